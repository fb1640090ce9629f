// Package mlflowtest serves a tracking server for tests: an httptest server
// that answers the endpoints of MLflow's REST API the mlflow package uses,
// with MLflow's documented request and response shapes, and lets a test
// look at and steer what it holds.
package mlflowtest

import (
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

	"github.com/ml-operator/ml-operator/internal/integrations/mlflow"
)

// Server follows the request and response shapes of MLflow's REST API
// (https://mlflow.org/docs/latest/rest-api.html) for the endpoints the
// operator uses. Its URL is the tracking URI.
type Server struct {
	*httptest.Server
	mu sync.Mutex
	// down makes every call fail with 503, as in an outage.
	down        bool
	experiments map[string]string // name -> id
	runs        map[string]*Run
	calls       []string
}

// Run is a run as the server holds it.
type Run struct {
	ExperimentID, Name, Status string
	StartTime, EndTime         int64
	Tags                       map[string]string
	Metrics                    []mlflow.Metric
}

// NewServer starts a server, closed when the test ends.
func NewServer(t testing.TB) *Server {
	f := &Server{experiments: map[string]string{}, runs: map[string]*Run{}}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

// SetDown makes every call fail with 503 (true), as in an outage, or
// answer again (false).
func (f *Server) SetDown(down bool) { f.mu.Lock(); f.down = down; f.mu.Unlock() }

// Run returns a copy of the run with that id.
func (f *Server) Run(id string) (Run, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.runs[id]
	if !ok {
		return Run{}, false
	}
	c := *r
	c.Metrics = append([]mlflow.Metric(nil), r.Metrics...)
	return c, true
}

// ExperimentID is the id of the named experiment, "" if it does not exist.
func (f *Server) ExperimentID(name string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.experiments[name]
}

// Calls are the calls served so far, as "<method> <endpoint>".
func (f *Server) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

func (f *Server) serve(w http.ResponseWriter, r *http.Request) {
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
		run := &Run{ExperimentID: str("experiment_id"), Name: str("run_name"), Status: "RUNNING", StartTime: num("start_time"), Tags: map[string]string{}}
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
			var metric mlflow.Metric
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

// AddRun stores a run as if created earlier, and returns its id.
func (f *Server) AddRun(experiment string, tags map[string]string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	expID, ok := f.experiments[experiment]
	if !ok {
		expID = fmt.Sprint(len(f.experiments) + 1)
		f.experiments[experiment] = expID
	}
	id := fmt.Sprintf("run%d", len(f.runs)+1)
	f.runs[id] = &Run{ExperimentID: expID, Name: "earlier", Status: "RUNNING", Tags: tags}
	return id
}

// RunCount is the number of runs the server holds.
func (f *Server) RunCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.runs)
}

// MetricValues are the values logged to the run for key, in order.
func (r Run) MetricValues(key string) []float64 {
	var out []float64
	for _, m := range r.Metrics {
		if m.Key == key {
			out = append(out, m.Value)
		}
	}
	return out
}
