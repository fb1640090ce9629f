package modeldeployment_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/test/testutil"
)

// recordQueries makes h's Prometheus answer every query with value and
// returns what it was asked.
func (h *harness) recordQueries(answer func(q string) (float64, bool)) func() []string {
	var mu sync.Mutex
	var asked []string
	h.withPrometheus(func(q string) (float64, bool) {
		mu.Lock()
		asked = append(asked, q)
		mu.Unlock()
		return answer(q)
	})
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), asked...)
	}
}

// With no analysis set, the framework picks the preset: a PyTorch
// ModelDeployment is judged on TorchServe's metric names, and its 5xx share
// rolls the canary back.
func TestAnalysisPresetByFramework(t *testing.T) {
	h := newHarness(t)
	asked := h.recordQueries(func(q string) (float64, bool) {
		canary := strings.Contains(q, `pod=~"ts-v2-`)
		switch {
		case strings.Contains(q, "Requests5XX") && canary:
			return 0.3, true
		case strings.Contains(q, "Requests5XX"):
			return 0, true
		case strings.Contains(q, "ts_inference_latency_microseconds"):
			return 20, true
		default:
			return 10, true
		}
	})
	h.create(testutil.ModelDeployment("ts", "").Framework(mlv1.ModelFrameworkPyTorch).Router(mlv1.RouterService).
		Version("v1", 90, "s3://m/v1").Version("v2", 10, "s3://m/v2").Obj())
	h.reconcile("ts")
	h.setReady("ts-v1", 1)
	h.setReady("ts-v2", 1)
	h.reconcile("ts")

	qs := asked()
	require.NotEmpty(t, qs)
	for _, q := range qs {
		assert.NotContains(t, q, "http_requests_total", "pytorch is judged on TorchServe's names")
	}
	assert.True(t, strings.Contains(strings.Join(qs, "\n"), "ts_inference_requests_total"))
	md := h.md("ts")
	require.Len(t, md.Status.FailedVersions, 1)
	assert.Equal(t, mlv1.ReasonErrorRate, md.Status.FailedVersions[0].Reason)
}

// A query of the user's replaces the preset's (rendered for the version),
// and a KServe runtime, which counts no errors, is never rolled back for
// its error rate: only latency judges it.
func TestAnalysisCustomQueryAndPresetWithoutErrors(t *testing.T) {
	h := newHarness(t)
	asked := h.recordQueries(func(q string) (float64, bool) {
		switch {
		case strings.HasPrefix(q, "my_latency") && strings.Contains(q, `pod=~"ks-v2-`):
			return 900, true
		case strings.HasPrefix(q, "my_latency"):
			return 100, true
		}
		return 10, true
	})
	md := testutil.ModelDeployment("ks", "").Framework(mlv1.ModelFrameworkSKLearn).Router(mlv1.RouterService).MaxLatencyMs(500).
		Version("v1", 90, "s3://m/v1").Version("v2", 10, "s3://m/v2").Obj()
	md.Spec.Rollout.Analysis = &mlv1.AnalysisSpec{Preset: mlv1.AnalysisKServe, Window: "5m",
		Queries: &mlv1.AnalysisQueries{LatencyMs: `my_latency{namespace="$namespace",pod=~"$pods"}[$window]`}}
	h.create(md)
	h.reconcile("ks")
	h.setReady("ks-v1", 1)
	h.setReady("ks-v2", 1)
	h.reconcile("ks")

	joined := strings.Join(asked(), "\n")
	assert.Contains(t, joined, `my_latency{namespace="`+h.ns+`",pod=~"ks-v2-[a-z0-9]+-[a-z0-9]+"}[5m]`)
	assert.Contains(t, joined, `request_predict_seconds_count`)
	assert.Contains(t, joined, `[5m]`)
	assert.NotContains(t, joined, "[1m]", "the window applies to the preset's queries too")
	got := h.md("ks")
	// The request rate query answers 10 for every query the fake is asked,
	// so an error-rate query, had one been sent, would read 10 (1000%): v2
	// is rolled back for latency only, and v1 not at all.
	require.Len(t, got.Status.FailedVersions, 1)
	assert.Equal(t, "v2", got.Status.FailedVersions[0].Name)
	assert.Equal(t, mlv1.ReasonLatency, got.Status.FailedVersions[0].Reason)
}
