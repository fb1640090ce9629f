//go:build e2e_real

package e2ereal

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientretry "k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/internal/realnode"
)

// Tags of the project's model server that misbehave from their image's
// environment (a ModelDeployment sets no per-version environment).
const (
	// modelServerErrors answers 20 % of its predictions with 500
	// (FAIL_RATE=0.2; exactly every fifth).
	modelServerErrors = "ghcr.io/ml-operator/model-server:e2e-errors"
	// modelServerUnready never passes its health checks (READY=false).
	modelServerUnready = "ghcr.io/ml-operator/model-server:e2e-unready"
)

// progressivePrefix starts the namespaces of the stepped-rollout tests: the
// suite's Prometheus scrapes the ModelDeployment pods there only, so the
// other workloads' ModelDeployments are not judged by it.
const progressivePrefix = "e2ereal-pd-"

// The analysis timing of the stepped rollouts: Prometheus scrapes each
// model server every scrapeInterval; an analysis reads the rates over
// analysisWindow; a step's first analysis runs analysisInterval after its
// weight reached a Ready pod, then every interval.
const (
	scrapeInterval   = 2 * time.Second
	analysisWindow   = 30 * time.Second
	analysisInterval = 20 * time.Second
)

// loadPort is where `probe load` answers its counts.
const loadPort = "8090"

// deployPrometheus runs the Prometheus built from the module proxy (make
// prometheus) on the node, scraping the stepped-rollout namespaces, before
// the operator is deployed with its address.
func deployPrometheus(t testing.TB) {
	t.Helper()
	require.NoError(t, node.DeployPrometheus(context.Background(), realnode.PrometheusOptions{
		Binary:         filepath.Join(binDir(mustAbs("../..")), "prometheus"),
		Namespaces:     progressivePrefix + ".+",
		ScrapeInterval: scrapeInterval,
	}))
}

// testProgressiveDelivery: stepped rollouts under steady load, judged by the
// manager against the real Prometheus (issue 23, item 3). The three run
// side by side, each in a namespace of its own, with one Prometheus.
func testProgressiveDelivery(t *testing.T) {
	ctx := context.Background()
	pushModelServers(t)
	require.NoError(t, node.PushModelServerWithEnv(ctx, modelServerErrors, "FAIL_RATE=0.2"))
	require.NoError(t, node.PushModelServerWithEnv(ctx, modelServerUnready, "READY=false"))
	url, err := node.PrometheusPodURL(ctx)
	require.NoError(t, err)
	pc, err := promapi.NewClient(promapi.Config{Address: url})
	require.NoError(t, err)
	prom := promv1.NewAPI(pc)
	for name, f := range map[string]func(*testing.T, promv1.API){
		"GoodVersionPromotedThroughTheSteps": testGoodVersionPromoted,
		"ErroringVersionAbortedAtFirstCheck": testErroringVersionAborted,
		"UnreadyVersionNeverReceivesTraffic": testUnreadyVersionGetsNoTraffic,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f(t, prom)
		})
	}
}

// steppedModelDeployment is v1 of the model server alone, one replica, with
// three rollout steps (10 %, 50 %, 100 %) each judged by one analysis of
// the generic preset (the model server's http_requests_total and
// http_request_duration_seconds) against a 5 % error rate and a 500 ms
// average latency.
func steppedModelDeployment(ns, name string) *mlv1.ModelDeployment {
	step := func(w int32) mlv1.RolloutStep {
		return mlv1.RolloutStep{Weight: w, Analysis: &mlv1.StepAnalysis{Checks: 1}}
	}
	return &mlv1.ModelDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: mlv1.ModelDeploymentSpec{
			ModelName: "fraud-detector",
			Framework: mlv1.ModelFrameworkCustom,
			Image:     modelServerV1,
			Versions:  []mlv1.ModelVersion{{Name: "v1"}},
			Scaling:   mlv1.ScalingSpec{MinReplicas: 1, MaxReplicas: ptr.To[int32](1)},
			// Probes every 2 s: a Ready pod is seen within seconds.
			HealthCheck: mlv1.HealthCheckSpec{IntervalSeconds: 2, TimeoutSeconds: 1, FailureThreshold: 3},
			Rollout: mlv1.RolloutSpec{
				MaxErrorRate:            ptr.To(0.05),
				MaxLatencyMs:            ptr.To[int32](500),
				ProgressDeadlineSeconds: 600,
				Analysis: &mlv1.AnalysisSpec{
					Preset:   mlv1.AnalysisGeneric,
					Window:   fmt.Sprintf("%ds", int(analysisWindow.Seconds())),
					Interval: fmt.Sprintf("%ds", int(analysisInterval.Seconds())),
				},
				Steps: []mlv1.RolloutStep{step(10), step(50), step(100)},
			},
		},
	}
}

// steppedRollout is one stepped rollout under load: a ModelDeployment of v1
// Running, a load client sending predictions through its Service, then
// spec.versions changed to v1 at 0 % and v2 (a new image) at 100 %.
type steppedRollout struct {
	md *mlv1.ModelDeployment
	// generation is the one the change made (the rollout's).
	generation int64
	load       *loadClient
	// began is when the load, steady on v1, starts to count; changed when
	// spec.versions changed.
	began, changed time.Time
}

func startSteppedRollout(t *testing.T, name, v2Image string) *steppedRollout {
	t.Helper()
	ctx := context.Background()
	ns := namespaceNamed(t, progressivePrefix)
	md := steppedModelDeployment(ns, name)
	require.NoError(t, opClient.Create(ctx, md))
	got := waitRunning(t, md, 5*time.Minute, map[string]int32{"v1": 1})
	// v1 is the promoted set the rollout starts from.
	require.NoError(t, poll(time.Minute, func() bool {
		return opClient.Get(ctx, client.ObjectKeyFromObject(md), got) == nil && len(got.Status.History) > 0 &&
			got.Status.History[0].Generation == got.Generation && got.Status.History[0].Outcome == mlv1.OutcomeSucceeded
	}), "status.history %s", toYAML(got.Status.History))
	r := &steppedRollout{md: md}
	started := time.Now()
	r.load = startLoad(t, ns, got.Status.URL+"/v1/models/fraud-detector:predict")
	// The load is steady (DNS answered, v1 answering) before it counts.
	steady := r.load.waitFor(t, started, 40)
	t.Logf("%s/%s: load client at %s; its first %d requests: by version %v, by code %v", ns, name, r.load.url, steady.Total, steady.Versions, steady.Codes)
	r.began = time.Now()

	cur := &mlv1.ModelDeployment{}
	require.NoError(t, clientretry.RetryOnConflict(onConflict, func() error {
		if err := opClient.Get(ctx, client.ObjectKeyFromObject(md), cur); err != nil {
			return err
		}
		cur.Spec.Versions = []mlv1.ModelVersion{
			{Name: "v1", Weight: ptr.To[int32](0)},
			{Name: "v2", Weight: ptr.To[int32](100), Image: v2Image},
		}
		return opClient.Update(ctx, cur)
	}))
	r.changed, r.generation = time.Now(), cur.Generation
	t.Logf("%s/%s: spec.versions changed to v1 0%%, v2 100%% (image %s) at generation %d", ns, name, v2Image, r.generation)
	return r
}

// wait polls the ModelDeployment until cond holds for its rollout's status,
// and returns it.
func (r *steppedRollout) wait(t *testing.T, timeout time.Duration, what string, cond func(*mlv1.ModelDeployment, *mlv1.RolloutStatus) bool) *mlv1.ModelDeployment {
	t.Helper()
	ctx := context.Background()
	got := &mlv1.ModelDeployment{}
	var last string
	err := poll(timeout, func() bool {
		if opClient.Get(ctx, client.ObjectKeyFromObject(r.md), got) != nil {
			return false
		}
		st := got.Status.Rollout
		if st == nil || st.Generation != r.generation {
			return false
		}
		// The rollout as it goes, each change once.
		if now := fmt.Sprintf("%s step %d (%d%%), weights %v: %s", st.Phase, st.Step, st.StepWeight, weights(got), st.Message); now != last {
			t.Logf("+%s %s", time.Since(r.changed).Round(time.Second), now)
			last = now
		}
		return cond(got, st)
	})
	require.NoError(t, err, "%s: status.rollout %s\nweights %v\n%s", what, toYAML(got.Status.Rollout), weights(got), node.NamespaceDiagnostics(ctx, r.md.Namespace))
	return got
}

// logWalkthrough logs what a user sees of the rollout now: kubectl get,
// the rollout's status, the failed versions, the history and the
// ModelDeployment's events.
func (r *steppedRollout) logWalkthrough(t *testing.T) {
	t.Helper()
	md := &mlv1.ModelDeployment{}
	require.NoError(t, opClient.Get(context.Background(), client.ObjectKeyFromObject(r.md), md))
	t.Logf("$ kubectl get md %s -n %s\n%s", md.Name, md.Namespace, kubectlGet("md", md.Name, "-n", md.Namespace))
	t.Logf("status.rollout:\n%s", toYAML(md.Status.Rollout))
	if len(md.Status.FailedVersions) > 0 {
		t.Logf("status.failedVersions:\n%s", toYAML(md.Status.FailedVersions))
	}
	t.Logf("status.activeVersions:\n%s", toYAML(md.Status.ActiveVersions))
	t.Logf("status.history:\n%s", toYAML(md.Status.History))
	var lines []string
	for _, e := range modelDeploymentEvents(t, md) {
		lines = append(lines, fmt.Sprintf("%s %s %s", e.Type, e.Reason, e.Message))
	}
	t.Logf("events:\n%s", strings.Join(lines, "\n"))
}

// testGoodVersionPromoted: a version that answers every prediction moves
// through 10 %, 50 % and 100 %, passes each step's analysis on Prometheus'
// answers, and is promoted; the old version drains; not one request fails.
func testGoodVersionPromoted(t *testing.T, prom promv1.API) {
	r := startSteppedRollout(t, "good", modelServerV2)
	got := r.wait(t, 8*time.Minute, "promoted", func(_ *mlv1.ModelDeployment, st *mlv1.RolloutStatus) bool {
		return st.Phase == mlv1.RolloutPromoted
	})
	t.Logf("promoted %s after the change", time.Since(r.changed).Round(time.Second))
	st := got.Status.Rollout
	passed := map[int32]bool{}
	for _, a := range st.Analyses {
		require.NotEqual(t, mlv1.AnalysisFailed, a.Outcome, "analysis %+v", a)
		if a.Outcome == mlv1.AnalysisPassed {
			passed[a.Step] = true
		}
	}
	require.Equal(t, map[int32]bool{0: true, 1: true, 2: true}, passed, "every step passed an analysis: %s", toYAML(st.Analyses))
	w := weights(got)
	require.Equal(t, int32(100), w["v2"], "weights %v", w)
	require.Zero(t, w["v1"], "weights %v", w)

	// The old version drains and leaves; then v2 alone answers.
	waitNoPods(t, got, "v1", 2*time.Minute)
	after := r.load.waitFor(t, time.Now(), 100)
	require.Equal(t, map[string]int{"v2": after.Total}, after.Versions, "after v1 left: %+v", after)

	// The steps as the events tell them; Promoted comes once the version
	// set has rolled out (v1 drained).
	var all string
	require.NoError(t, poll(2*time.Minute, func() bool {
		var events []string
		for _, e := range modelDeploymentEvents(t, got) {
			events = append(events, e.Reason+" "+e.Message)
		}
		all = strings.Join(events, "\n")
		return strings.Contains(all, fmt.Sprintf("Promoted generation %d rolled out", r.generation))
	}), "events:\n%s", all)
	require.Contains(t, all, "RolloutStep step 1: v1=50%, v2=50%")
	require.Contains(t, all, "RolloutStep step 2: v1=0%, v2=100%")

	// Through the whole rollout not one request failed, and both versions
	// answered.
	c := r.load.count(t, r.began)
	t.Logf("load from before the change until after v1 left: %d requests, by version %v, by code %v", c.Total, c.Versions, c.Codes)
	require.Zero(t, c.Failed, "failed requests: %v", c.Errors)
	require.Positive(t, c.Versions["v1"])
	require.Positive(t, c.Versions["v2"])

	// Prometheus saw v2's traffic too: its request counter, as scraped.
	q := fmt.Sprintf(`sum(http_requests_total{namespace=%q,pod=~"good-v2-.+"})`, got.Namespace)
	v := promValue(t, prom, q)
	t.Logf("%s = %s", q, v)
	require.Positive(t, float64(v))
	r.logWalkthrough(t)
}

// testErroringVersionAborted: a version that answers 20 % of its
// predictions with 500 is aborted at its first analysis, within the window
// plus one interval of its step's start, with the query, the value and the
// threshold in its status and in an event; the traffic returns to v1.
func testErroringVersionAborted(t *testing.T, prom promv1.API) {
	r := startSteppedRollout(t, "bad", modelServerErrors)
	got := r.wait(t, 5*time.Minute, "aborted", func(_ *mlv1.ModelDeployment, st *mlv1.RolloutStatus) bool {
		return st.Phase == mlv1.RolloutAborted
	})
	t.Logf("aborted %s after the change", time.Since(r.changed).Round(time.Second))
	st := got.Status.Rollout
	require.Equal(t, int32(0), st.Step, "aborted at the first step")
	require.Len(t, st.Analyses, 1, "aborted at its first analysis: %s", toYAML(st.Analyses))
	a := st.Analyses[0]
	require.Equal(t, mlv1.AnalysisFailed, a.Outcome)
	require.Equal(t, "v2", a.Version)
	require.Equal(t, mlv1.ReasonErrorRate, a.Metric)
	require.Equal(t, "0.05", a.Threshold)
	require.Contains(t, a.Query, fmt.Sprintf(`namespace="%s"`, got.Namespace))
	require.Contains(t, a.Query, `code=~"5.."`)
	value, err := strconv.ParseFloat(a.Value, 64)
	require.NoError(t, err, "value %q", a.Value)
	require.InDelta(t, 0.2, value, 0.1, "the share of 500s v2 answered")
	require.NotNil(t, st.StepStartTime)
	took := a.Time.Sub(st.StepStartTime.Time)
	t.Logf("step 0 started %s, its first analysis failed %s later (window %s + interval %s = %s)",
		st.StepStartTime.UTC().Format(time.RFC3339), took, analysisWindow, analysisInterval, analysisWindow+analysisInterval)
	require.LessOrEqual(t, took, analysisWindow+analysisInterval)

	// The value is Prometheus' answer to the query, asked again for that
	// moment.
	again := promValue(t, prom, a.Query, a.Time.Time)
	t.Logf("the query asked again at %s: %s", a.Time.UTC().Format(time.RFC3339), again)
	require.InDelta(t, value, float64(again), 0.05)

	// status.failedVersions and the events carry the query, value and
	// threshold.
	require.Len(t, got.Status.FailedVersions, 1)
	fv := got.Status.FailedVersions[0]
	require.Equal(t, "v2", fv.Name)
	require.Equal(t, mlv1.ReasonAnalysisFailed, fv.Reason)
	for _, want := range []string{a.Query, "error rate " + a.Value, "rollout.maxErrorRate 0.05"} {
		require.Contains(t, fv.Message, want)
	}
	var analysisEvent, rolledBackEvent string
	for _, e := range modelDeploymentEvents(t, got) {
		switch {
		case e.Reason == mlv1.EventAnalysis && e.Type == corev1.EventTypeWarning:
			analysisEvent = e.Message
		case e.Reason == mlv1.EventRolledBack && e.Type == corev1.EventTypeWarning:
			rolledBackEvent = e.Message
		}
	}
	for _, want := range []string{a.Query, "error rate " + a.Value, "rollout.maxErrorRate 0.05"} {
		require.Contains(t, analysisEvent, want)
	}
	require.Contains(t, rolledBackEvent, "version v2 rolled back (AnalysisFailed)")

	// The traffic is back on v1: the weights, then what the load client gets.
	w := weights(got)
	require.Equal(t, int32(100), w["v1"], "weights %v", w)
	require.Zero(t, w["v2"], "weights %v", w)
	waitNoPods(t, got, "v2", 2*time.Minute)
	after := r.load.waitFor(t, time.Now(), 100)
	require.Equal(t, map[string]int{"v1": after.Total}, after.Versions, "after the abort: %+v", after)
	require.Zero(t, after.Failed, "after the abort: %v", after.Errors)

	// Before the abort v2 did take traffic, and failed a fifth of it: the
	// analysis judged real requests.
	c := r.load.count(t, r.began)
	t.Logf("load from before the change until after v2 left: %d requests, by version %v, by code %v", c.Total, c.Versions, c.Codes)
	require.Positive(t, c.Versions["v2"])
	require.Equal(t, c.Codes["500"], c.Failed, "every failure was one of v2's 500s: %v", c.Errors)
	require.InDelta(t, float64(c.Versions["v2"])/5, float64(c.Codes["500"]), 1, "v2 failed every fifth prediction")
	r.logWalkthrough(t)
}

// testUnreadyVersionGetsNoTraffic: a version whose pod runs but never
// passes its health checks gets no weight and no request for longer than a
// step's analysis window: the step waits for a Ready pod; the model
// server's own request counter, scraped by Prometheus, stays absent.
func testUnreadyVersionGetsNoTraffic(t *testing.T, prom promv1.API) {
	ctx := context.Background()
	r := startSteppedRollout(t, "unready", modelServerUnready)
	ns := r.md.Namespace
	var pod corev1.Pod
	require.NoError(t, poll(3*time.Minute, func() bool {
		pods := &corev1.PodList{}
		if node.Client.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{mlv1.LabelModelVersion: "v2"}) != nil {
			return false
		}
		for _, p := range pods.Items {
			for _, c := range p.Status.ContainerStatuses {
				if c.State.Running != nil {
					pod = p
					return true
				}
			}
		}
		return false
	}), "a running v2 pod\n%s", node.NamespaceDiagnostics(ctx, ns))
	running := time.Now()
	t.Logf("v2's pod %s runs; watching it for %s", pod.Name, analysisWindow+analysisInterval)
	time.Sleep(analysisWindow + analysisInterval)

	got := r.wait(t, time.Minute, "still waiting at step 0", func(_ *mlv1.ModelDeployment, st *mlv1.RolloutStatus) bool {
		return st.Phase == mlv1.RolloutProgressing
	})
	st := got.Status.Rollout
	require.Equal(t, int32(0), st.Step)
	require.Nil(t, st.StepStartTime, "the step never started: its weight reached no Ready pod")
	require.Empty(t, st.Analyses)
	require.Contains(t, st.Message, "waiting for a Ready pod of v2")
	w := weights(got)
	require.Equal(t, int32(100), w["v1"], "weights %v", w)
	require.Zero(t, w["v2"], "weights %v", w)

	p := &corev1.Pod{}
	require.NoError(t, node.Client.Get(ctx, client.ObjectKeyFromObject(&pod), p))
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			require.Equal(t, corev1.ConditionFalse, c.Status, "v2's pod is not Ready")
		}
	}

	// The load client never got an answer from v2, nor a failure.
	c := r.load.count(t, r.began)
	t.Logf("load from before the change until %s after v2's pod ran: %d requests, by version %v, by code %v",
		time.Since(running).Round(time.Second), c.Total, c.Versions, c.Codes)
	require.Equal(t, map[string]int{"v1": c.Total}, c.Versions)
	require.Zero(t, c.Failed, "failed requests: %v", c.Errors)

	// Prometheus scraped v2's server all along, and it counted no
	// prediction.
	pods := fmt.Sprintf(`namespace=%q,pod=%q`, ns, pod.Name)
	require.Equal(t, model.SampleValue(1), promValue(t, prom, "up{"+pods+"}"), "Prometheus scrapes v2's pod")
	vec := promVector(t, prom, "http_requests_total{"+pods+"}", time.Now())
	require.Empty(t, vec, "v2's server counted predictions: %v", vec)
	t.Logf("up{%s} = 1; http_requests_total{%s}: no series", pods, pods)
	r.logWalkthrough(t)
}

// waitNoPods waits until version has no pod left.
func waitNoPods(t *testing.T, md *mlv1.ModelDeployment, version string, timeout time.Duration) {
	t.Helper()
	ctx := context.Background()
	pods := &corev1.PodList{}
	err := poll(timeout, func() bool {
		return node.Client.List(ctx, pods, client.InNamespace(md.Namespace),
			client.MatchingLabels{mlv1.LabelModelDeployment: md.Name, mlv1.LabelModelVersion: version}) == nil && len(pods.Items) == 0
	})
	require.NoError(t, err, "pods of %s left: %d", version, len(pods.Items))
}

// modelDeploymentEvents are the events of md, oldest first.
func modelDeploymentEvents(t *testing.T, md *mlv1.ModelDeployment) []corev1.Event {
	t.Helper()
	list := &corev1.EventList{}
	require.NoError(t, node.Client.List(context.Background(), list, client.InNamespace(md.Namespace)))
	var out []corev1.Event
	for _, e := range list.Items {
		if e.InvolvedObject.Name == md.Name && e.InvolvedObject.Kind != "Service" {
			out = append(out, e)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return eventTime(out[i]).Before(eventTime(out[j])) })
	return out
}

func eventTime(e corev1.Event) time.Time {
	switch {
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	case !e.FirstTimestamp.IsZero():
		return e.FirstTimestamp.Time
	}
	return e.CreationTimestamp.Time
}

func toYAML(v any) string {
	out, err := yaml.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%+v", v)
	}
	return string(out)
}

// promVector asks Prometheus for query at ts.
func promVector(t *testing.T, prom promv1.API, query string, ts time.Time) model.Vector {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v, warnings, err := prom.Query(ctx, query, ts)
	require.NoError(t, err, query)
	if len(warnings) > 0 {
		t.Logf("%s: Prometheus warns %v", query, warnings)
	}
	vec, ok := v.(model.Vector)
	require.True(t, ok, "%s: %s is not a vector", query, v.Type())
	return vec
}

// promValue is the one value of an instant query (at ts, else now).
func promValue(t *testing.T, prom promv1.API, query string, ts ...time.Time) model.SampleValue {
	t.Helper()
	at := time.Now()
	if len(ts) > 0 {
		at = ts[0]
	}
	vec := promVector(t, prom, query, at)
	require.Len(t, vec, 1, "%s: %v", query, vec)
	return vec[0].Value
}

// loadClient is a `probe load` pod: a steady stream of predictions through
// a Service, counted by the version that answered and the status code.
type loadClient struct {
	url string
}

// loadCounts is what `probe load` answers (its LoadCounts).
type loadCounts struct {
	Total    int            `json:"total"`
	Versions map[string]int `json:"versions"`
	Codes    map[string]int `json:"codes"`
	Failed   int            `json:"failed"`
	Errors   []string       `json:"errors"`
}

// startLoad starts a load client in ns sending predictions to target, and
// returns once it runs.
func startLoad(t *testing.T, ns, target string) *loadClient {
	t.Helper()
	pod := runningPod(t, restricted(probePod(ns, "load", nil, "load", target, loadPort)))
	return &loadClient{url: "http://" + net.JoinHostPort(pod.Status.PodIP, loadPort)}
}

// count is what the load client got from requests sent at or after since
// (its pod's clock is this machine's).
func (l *loadClient) count(t *testing.T, since time.Time) loadCounts {
	t.Helper()
	c, err := l.get(since)
	require.NoError(t, err)
	return c
}

func (l *loadClient) get(since time.Time) (loadCounts, error) {
	var c loadCounts
	hc := &http.Client{Timeout: 10 * time.Second}
	resp, err := hc.Get(l.url + "/answers?since=" + strconv.FormatInt(since.UnixMilli(), 10))
	if err != nil {
		return c, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return c, fmt.Errorf("GET %s/answers: %s", l.url, resp.Status)
	}
	return c, json.NewDecoder(resp.Body).Decode(&c)
}

// waitFor waits until at least n requests were sent at or after since, and
// returns their counts.
func (l *loadClient) waitFor(t *testing.T, since time.Time, n int) loadCounts {
	t.Helper()
	var c loadCounts
	var err error
	require.NoError(t, poll(2*time.Minute, func() bool {
		c, err = l.get(since)
		return err == nil && c.Total >= n
	}), "%d requests from the load client since %s: %+v, %v", n, since.Format(time.RFC3339), c, err)
	return c
}
