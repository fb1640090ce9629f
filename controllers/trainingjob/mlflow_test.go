package trainingjob_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/controllers/trainingjob"
	"github.com/ml-operator/ml-operator/test/testutil"
)

// fakeMLflow follows the request and response shapes of MLflow's REST API
// (https://mlflow.org/docs/latest/rest-api.html) for the endpoints the
// operator uses. down makes every call fail with 503, as in an outage.
type fakeMLflow struct {
	*httptest.Server
	mu          sync.Mutex
	down        bool
	experiments map[string]string // name -> id
	runs        map[string]*fakeRun
	calls       []string
}

type fakeRun struct {
	ExperimentID, Name, Status string
	StartTime, EndTime         int64
	Tags                       map[string]string
	Metrics                    []trainingjob.MLflowMetric
}

func newFakeMLflow(t *testing.T) *fakeMLflow {
	f := &fakeMLflow{experiments: map[string]string{}, runs: map[string]*fakeRun{}}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeMLflow) setDown(down bool) { f.mu.Lock(); f.down = down; f.mu.Unlock() }

func (f *fakeMLflow) run(id string) (fakeRun, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.runs[id]
	if !ok {
		return fakeRun{}, false
	}
	c := *r
	c.Metrics = append([]trainingjob.MLflowMetric(nil), r.Metrics...)
	return c, true
}

func (f *fakeMLflow) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	endpoint := strings.TrimPrefix(r.URL.Path, "/api/2.0/mlflow/")
	f.calls = append(f.calls, r.Method+" "+endpoint)
	reply := func(code int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(v)
	}
	fail := func(code int, errCode, msg string) {
		reply(code, map[string]string{"error_code": errCode, "message": msg})
	}
	if f.down {
		fail(http.StatusServiceUnavailable, "TEMPORARILY_UNAVAILABLE", "the tracking server is down")
		return
	}
	var in map[string]any
	if r.Method == http.MethodPost {
		if r.Header.Get("Content-Type") != "application/json" || json.NewDecoder(r.Body).Decode(&in) != nil {
			fail(http.StatusBadRequest, "MALFORMED_REQUEST", "a JSON body is required")
			return
		}
	}
	str := func(k string) string { s, _ := in[k].(string); return s }
	num := func(k string) int64 { n, _ := in[k].(float64); return int64(n) }
	switch r.Method + " " + endpoint {
	case "GET experiments/get-by-name":
		name := r.URL.Query().Get("experiment_name")
		id, ok := f.experiments[name]
		if !ok {
			fail(http.StatusNotFound, "RESOURCE_DOES_NOT_EXIST", fmt.Sprintf("Could not find experiment with name '%s'", name))
			return
		}
		reply(http.StatusOK, map[string]any{"experiment": map[string]any{"experiment_id": id, "name": name, "lifecycle_stage": "active"}})
	case "POST experiments/create":
		if _, ok := f.experiments[str("name")]; ok {
			fail(http.StatusBadRequest, "RESOURCE_ALREADY_EXISTS", "exists")
			return
		}
		id := fmt.Sprint(len(f.experiments) + 1)
		f.experiments[str("name")] = id
		reply(http.StatusOK, map[string]any{"experiment_id": id})
	case "POST runs/create":
		id := fmt.Sprintf("run%d", len(f.runs)+1)
		run := &fakeRun{ExperimentID: str("experiment_id"), Name: str("run_name"), Status: "RUNNING", StartTime: num("start_time"), Tags: map[string]string{}}
		tags, _ := in["tags"].([]any)
		for _, t := range tags {
			m, _ := t.(map[string]any)
			run.Tags[fmt.Sprint(m["key"])] = fmt.Sprint(m["value"])
		}
		f.runs[id] = run
		reply(http.StatusOK, map[string]any{"run": map[string]any{"info": map[string]any{"run_id": id, "run_uuid": id,
			"experiment_id": run.ExperimentID, "run_name": run.Name, "status": "RUNNING", "start_time": run.StartTime}, "data": map[string]any{}}})
	case "POST runs/search":
		// The filter grammar the operator sends: tags.`<key>` = '<value>'.
		m := searchFilter.FindStringSubmatch(str("filter"))
		if m == nil {
			fail(http.StatusBadRequest, "INVALID_PARAMETER_VALUE", "unsupported filter "+str("filter"))
			return
		}
		exps := map[string]bool{}
		ids, _ := in["experiment_ids"].([]any)
		for _, id := range ids {
			exps[fmt.Sprint(id)] = true
		}
		runs := []any{}
		for _, id := range slices.Sorted(maps.Keys(f.runs)) {
			run := f.runs[id]
			if exps[run.ExperimentID] && run.Tags[m[1]] == m[2] {
				runs = append(runs, map[string]any{"info": map[string]any{"run_id": id, "run_uuid": id,
					"experiment_id": run.ExperimentID, "run_name": run.Name, "status": run.Status}, "data": map[string]any{}})
			}
		}
		reply(http.StatusOK, map[string]any{"runs": runs})
	case "POST runs/log-batch":
		run, ok := f.runs[str("run_id")]
		if !ok {
			fail(http.StatusNotFound, "RESOURCE_DOES_NOT_EXIST", "no such run")
			return
		}
		ms, _ := in["metrics"].([]any)
		for _, m := range ms {
			b, _ := json.Marshal(m)
			var metric trainingjob.MLflowMetric
			_ = json.Unmarshal(b, &metric)
			run.Metrics = append(run.Metrics, metric)
		}
		reply(http.StatusOK, map[string]any{})
	case "POST runs/update":
		run, ok := f.runs[str("run_id")]
		if !ok {
			fail(http.StatusNotFound, "RESOURCE_DOES_NOT_EXIST", "no such run")
			return
		}
		run.Status, run.EndTime = str("status"), num("end_time")
		reply(http.StatusOK, map[string]any{"run_info": map[string]any{"run_id": str("run_id"), "status": run.Status, "end_time": run.EndTime}})
	default:
		fail(http.StatusNotFound, "ENDPOINT_NOT_FOUND", r.Method+" "+endpoint)
	}
}

var searchFilter = regexp.MustCompile("^tags\\.`([^`]+)` = '([^']*)'$")

// addRun stores a run as if created earlier, and returns its id.
func (f *fakeMLflow) addRun(experiment string, tags map[string]string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	expID, ok := f.experiments[experiment]
	if !ok {
		expID = fmt.Sprint(len(f.experiments) + 1)
		f.experiments[experiment] = expID
	}
	id := fmt.Sprintf("run%d", len(f.runs)+1)
	f.runs[id] = &fakeRun{ExperimentID: expID, Name: "earlier", Status: "RUNNING", Tags: tags}
	return id
}

// runCount is the number of runs the server holds.
func (f *fakeMLflow) runCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.runs)
}

func metricValues(r fakeRun, key string) []float64 {
	var out []float64
	for _, m := range r.Metrics {
		if m.Key == key {
			out = append(out, m.Value)
		}
	}
	return out
}

func TestHTTPMLflowClient(t *testing.T) {
	f := newFakeMLflow(t)
	c := trainingjob.NewHTTPMLflowClient()
	bg := context.Background()
	start := time.UnixMilli(1767000000000)

	key1 := trainingjob.MLflowTag{Key: trainingjob.TagJobUID, Value: "uid-1"}
	key2 := trainingjob.MLflowTag{Key: trainingjob.TagJobUID, Value: "uid-2"}
	id, err := c.CreateRun(bg, f.URL, "exp", "ns/job", key1, start, []trainingjob.MLflowTag{{Key: "k", Value: "v"}})
	require.NoError(t, err)
	id2, err := c.CreateRun(bg, f.URL+"/", "exp", "ns/job2", key2, start, nil)
	require.NoError(t, err)
	assert.NotEqual(t, id, id2)
	assert.Equal(t, []string{"GET experiments/get-by-name", "POST experiments/create", "POST runs/search", "POST runs/create",
		"GET experiments/get-by-name", "POST runs/search", "POST runs/create"}, f.calls, "the experiment is created once, then found")
	r, _ := f.run(id)
	r2, _ := f.run(id2)
	assert.Equal(t, "ns/job", r.Name)
	assert.Equal(t, r.ExperimentID, r2.ExperimentID)
	assert.Equal(t, start.UnixMilli(), r.StartTime)
	assert.Equal(t, map[string]string{"k": "v", trainingjob.TagJobUID: "uid-1"}, r.Tags)

	// Asked again for the same key (a lost reply, a lost status write), the
	// client returns the existing run and creates none.
	again, err := c.CreateRun(bg, f.URL, "exp", "ns/job", key1, start, nil)
	require.NoError(t, err)
	assert.Equal(t, id, again)
	assert.Equal(t, 2, f.runCount())

	require.NoError(t, c.LogMetrics(bg, f.URL, id, []trainingjob.MLflowMetric{{Key: "loss", Value: 0.5, Timestamp: 1, Step: 2}}))
	r, _ = f.run(id)
	assert.Equal(t, []trainingjob.MLflowMetric{{Key: "loss", Value: 0.5, Timestamp: 1, Step: 2}}, r.Metrics)
	require.NoError(t, c.EndRun(bg, f.URL, id, trainingjob.MLflowRunKilled, start.Add(time.Minute)))
	r, _ = f.run(id)
	assert.Equal(t, "KILLED", r.Status)
	assert.Equal(t, start.Add(time.Minute).UnixMilli(), r.EndTime)

	assert.ErrorContains(t, c.LogMetrics(bg, f.URL, "nope", nil), "RESOURCE_DOES_NOT_EXIST")
	f.setDown(true)
	_, err = c.CreateRun(bg, f.URL, "exp", "ns/job3", key1, start, nil)
	assert.ErrorContains(t, err, "503")
}

// A tracked job: the run is created when the job starts, the scraped
// progress is logged, and the run is FINISHED when the job completes.
func TestMLflowTrackedJob(t *testing.T) {
	ns := testutil.Namespace(t, env.Client)
	f := newFakeMLflow(t)
	ts := newTrainerServer(t, "training_epoch 4\ntraining_loss 0.5\n")
	w := testutil.TrainingJob("tracked", ns).Workers(2).GPUs(0).Hyperparameter("epochs", 10)
	w.Spec.Metrics.Port = ts.port(t)
	w.Spec.Tracking = &mlv1.TrackingSpec{MLflow: &mlv1.MLflowSpec{TrackingURI: f.URL, ExperimentName: "bert"}}
	job := create(t, w)
	got := waitPods(t, job, 2, 0)
	e := envOf(&got[0])
	assert.Equal(t, f.URL, e["MLFLOW_TRACKING_URI"])
	assert.Equal(t, "bert", e["MLFLOW_EXPERIMENT_NAME"])
	assert.Equal(t, ns+"/tracked", e["MLFLOW_RUN_NAME"])

	setAll(t, job, 2, corev1.PodRunning, testutil.WithPodIP("127.0.0.1"))
	j := waitJob(t, job, "MLflow run id", func(j *mlv1.TrainingJob) bool { return j.Status.MLflowRunID != "" })
	run, ok := f.run(j.Status.MLflowRunID)
	require.True(t, ok, "run %s exists in MLflow", j.Status.MLflowRunID)
	assert.Equal(t, ns+"/tracked", run.Name)
	f.mu.Lock()
	bertID := f.experiments["bert"]
	f.mu.Unlock()
	assert.Equal(t, bertID, run.ExperimentID)
	assert.Equal(t, "tracked", run.Tags["ml.example.com/trainingjob"])
	assert.Equal(t, ns, run.Tags["ml.example.com/namespace"])
	assert.Equal(t, "0", run.Tags["ml.example.com/attempt"])
	testutil.Eventually(t, func() bool {
		r, _ := f.run(j.Status.MLflowRunID)
		return len(metricValues(r, "loss")) > 0 && len(metricValues(r, "epoch")) > 0
	}, "scraped progress logged to the run")
	run, _ = f.run(j.Status.MLflowRunID)
	assert.Equal(t, 0.5, metricValues(run, "loss")[0])
	assert.Equal(t, 4.0, metricValues(run, "epoch")[0])
	assert.Equal(t, "True", condition(get(t, job), mlv1.TrainingJobMLflowTracking).Status)

	setAll(t, job, 2, corev1.PodSucceeded)
	waitState(t, job, mlv1.StateCompleted)
	testutil.Eventually(t, func() bool { r, _ := f.run(j.Status.MLflowRunID); return r.Status == "FINISHED" }, "run FINISHED")
	j = waitJob(t, job, "RunEnded", func(j *mlv1.TrainingJob) bool {
		c := condition(j, mlv1.TrainingJobMLflowTracking)
		return c != nil && c.Reason == mlv1.ReasonRunEnded
	})
	assert.Contains(t, condition(j, mlv1.TrainingJobMLflowTracking).Message, "FINISHED")
}

// An MLflow outage neither blocks nor fails the job: it completes, and a
// condition says tracking failed.
func TestMLflowOutageDoesNotAffectTheJob(t *testing.T) {
	ns := testutil.Namespace(t, env.Client)
	f := newFakeMLflow(t)
	f.setDown(true)
	w := testutil.TrainingJob("untracked", ns).Workers(2).GPUs(0)
	w.Spec.Tracking = &mlv1.TrackingSpec{MLflow: &mlv1.MLflowSpec{TrackingURI: f.URL, ExperimentName: "bert"}}
	job := create(t, w)
	runGang(t, job, 2, 0)
	j := waitJob(t, job, "MLflowTracking=False", func(j *mlv1.TrainingJob) bool {
		c := condition(j, mlv1.TrainingJobMLflowTracking)
		return c != nil && c.Status == "False"
	})
	c := condition(j, mlv1.TrainingJobMLflowTracking)
	assert.Equal(t, mlv1.ReasonTrackingFailed, c.Reason)
	assert.Contains(t, c.Message, "503")
	assert.Equal(t, mlv1.StateRunning, j.Status.State)
	assert.Empty(t, j.Status.MLflowRunID)

	setAll(t, job, 2, corev1.PodSucceeded)
	j = waitState(t, job, mlv1.StateCompleted)
	assert.Equal(t, "True", condition(j, "Succeeded").Status)
	assert.Equal(t, "False", condition(j, mlv1.TrainingJobMLflowTracking).Status)
}
