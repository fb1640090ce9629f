package prometheus_test

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/storage"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/internal/integrations/prometheus"
)

// The recorded scrapes in testdata/<preset>/ are each server's /metrics in
// Prometheus' text format, with the metric names and labels its
// documentation gives, taken 30 s apart (0s.prom, 30s.prom). Between the
// two, every server served 300 requests (10/s) with these outcomes. Every
// counter that moves is far from zero, as on a server that has run a while,
// so Prometheus' extrapolation of rate() to the window gives exact rates.
var presetWant = map[string]prometheus.VersionMetrics{
	// 12 of 300 answered 5xx; 12 s of request time in all.
	"generic": {RequestsPerSecond: 10, ErrorRate: 0.04, HasErrorRate: true, AverageLatencyMs: 40, HasLatency: true},
	// 10 of 300 failed; 9 s on the infer endpoint (the health probes' own
	// durations must not count).
	"mlserver": {RequestsPerSecond: 10, ErrorRate: 10.0 / 300, HasErrorRate: true, AverageLatencyMs: 30, HasLatency: true},
	// 10 of 300 answered 5xx; 7.5e6 µs of inference.
	"torchserve": {RequestsPerSecond: 10, ErrorRate: 10.0 / 300, HasErrorRate: true, AverageLatencyMs: 25, HasLatency: true},
	// 6 of 300 failed; 4.5e6 µs of request handling.
	"triton": {RequestsPerSecond: 10, ErrorRate: 0.02, HasErrorRate: true, AverageLatencyMs: 15, HasLatency: true},
	// 0.3 + 5.4 + 0.3 s of pre-process, predict and post-process; no error count.
	"kserve": {RequestsPerSecond: 10, AverageLatencyMs: 20, HasLatency: true},
}

// readScrape parses a recorded scrape in Prometheus' text format.
func readScrape(t *testing.T, file string) map[string]*dto.MetricFamily {
	t.Helper()
	f, err := os.Open(file)
	require.NoError(t, err)
	defer f.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(f)
	require.NoError(t, err, file)
	return families
}

// loadScrape appends one recorded scrape to the storage at ts, with the
// namespace and pod labels Prometheus' Kubernetes pod scrape config adds.
func loadScrape(t *testing.T, st *memStorage, file string, ts time.Time, namespace, pod string) {
	t.Helper()
	families := readScrape(t, file)
	add := func(name string, m *dto.Metric, v float64, extra ...string) {
		b := labels.NewBuilder(labels.EmptyLabels())
		b.Set(labels.MetricName, name)
		for _, lp := range m.GetLabel() {
			b.Set(lp.GetName(), lp.GetValue())
		}
		for i := 0; i+1 < len(extra); i += 2 {
			b.Set(extra[i], extra[i+1])
		}
		b.Set("namespace", namespace)
		b.Set("pod", pod)
		st.add(b.Labels(), ts.UnixMilli(), v)
	}
	for name, mf := range families {
		for _, m := range mf.GetMetric() {
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				add(name, m, m.GetCounter().GetValue())
			case dto.MetricType_GAUGE:
				add(name, m, m.GetGauge().GetValue())
			case dto.MetricType_UNTYPED:
				add(name, m, m.GetUntyped().GetValue())
			case dto.MetricType_HISTOGRAM:
				h := m.GetHistogram()
				for _, b := range h.GetBucket() {
					add(name+"_bucket", m, float64(b.GetCumulativeCount()), "le", model.FloatString(b.GetUpperBound()).String())
				}
				add(name+"_bucket", m, float64(h.GetSampleCount()), "le", "+Inf")
				add(name+"_sum", m, h.GetSampleSum())
				add(name+"_count", m, float64(h.GetSampleCount()))
			default:
				t.Fatalf("%s: metric type %s not loaded", name, mf.GetType())
			}
		}
	}
}

// evaluate runs query at ts with Prometheus' own PromQL engine; ok is false
// for an empty or non-finite answer, as HTTPSource reads one.
func evaluate(t *testing.T, st storage.Queryable, query string, ts time.Time) (float64, bool) {
	t.Helper()
	engine := promql.NewEngine(promql.EngineOpts{MaxSamples: 100000, Timeout: 10 * time.Second})
	q, err := engine.NewInstantQuery(context.Background(), st, nil, query, ts)
	require.NoError(t, err, query)
	defer q.Close()
	res := q.Exec(context.Background())
	require.NoError(t, res.Err, query)
	vec, err := res.Vector()
	require.NoError(t, err, query)
	if len(vec) == 0 {
		return 0, false
	}
	require.Len(t, vec, 1, query)
	f := vec[0].F
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, false
	}
	return f, true
}

// Every preset, evaluated by Prometheus' engine against its server's
// recorded scrapes, measures the requests, errors and latency the
// recordings hold, for the version's pod only.
func TestPresetsAgainstRecordedScrapes(t *testing.T) {
	start := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	for name, want := range presetWant {
		t.Run(name, func(t *testing.T) {
			st := newMemStorage()
			dir := filepath.Join("testdata", name)
			canary, stable := "fraud-v2-7d9f8b6c5-x2x9k", "fraud-v1-5c4b7d9f8-q8w7e"
			for _, pod := range []string{canary, stable} {
				loadScrape(t, st, filepath.Join(dir, "0s.prom"), start, "team-a", pod)
				loadScrape(t, st, filepath.Join(dir, "30s.prom"), start.Add(30*time.Second), "team-a", pod)
			}
			// Another namespace's model of the same name must not count either.
			loadScrape(t, st, filepath.Join(dir, "0s.prom"), start, "team-b", canary)
			loadScrape(t, st, filepath.Join(dir, "30s.prom"), start.Add(30*time.Second), "team-b", canary)

			q, err := prometheus.PresetQueries(name)
			require.NoError(t, err)
			q = q.Render("team-a", prometheus.PodRegex("fraud", "v2"), "1m")
			at := start.Add(30 * time.Second)
			var got prometheus.VersionMetrics
			var ok bool
			got.RequestsPerSecond, ok = evaluate(t, st, q.RequestRate, at)
			require.True(t, ok, "request rate answered: %s", q.RequestRate)
			if q.ErrorRate != "" {
				got.ErrorRate, got.HasErrorRate = evaluate(t, st, q.ErrorRate, at)
			}
			if q.LatencyMs != "" {
				got.AverageLatencyMs, got.HasLatency = evaluate(t, st, q.LatencyMs, at)
			}
			assert.InDelta(t, want.RequestsPerSecond, got.RequestsPerSecond, 1e-9)
			assert.InDelta(t, want.ErrorRate, got.ErrorRate, 1e-9)
			assert.InDelta(t, want.AverageLatencyMs, got.AverageLatencyMs, 1e-9)
			assert.Equal(t, want.HasErrorRate, got.HasErrorRate)
			assert.Equal(t, want.HasLatency, got.HasLatency)
		})
	}
}

// Every preset the API offers has queries here (custom has none of its own),
// every framework maps to one, and every preset but custom is tested
// against recordings above.
func TestEveryAPIPresetHasQueries(t *testing.T) {
	for _, p := range []mlv1.AnalysisPreset{mlv1.AnalysisGeneric, mlv1.AnalysisMLServer, mlv1.AnalysisTorchServe,
		mlv1.AnalysisTriton, mlv1.AnalysisKServe, mlv1.AnalysisCustom} {
		q, err := prometheus.PresetQueries(string(p))
		require.NoError(t, err, p)
		if p == mlv1.AnalysisCustom {
			assert.Equal(t, prometheus.Queries{}, q)
			continue
		}
		assert.NotEmpty(t, q.RequestRate, p)
		assert.Contains(t, presetWant, string(p), "preset %s has recorded scrapes", p)
	}
	assert.Len(t, prometheus.Presets, 6)
	for _, f := range []mlv1.ModelFramework{mlv1.ModelFrameworkTensorFlow, mlv1.ModelFrameworkPyTorch, mlv1.ModelFrameworkSKLearn,
		mlv1.ModelFrameworkONNX, mlv1.ModelFrameworkXGBoost, mlv1.ModelFrameworkCustom} {
		_, err := prometheus.PresetQueries(string(mlv1.FrameworkAnalysisPreset(f)))
		assert.NoError(t, err, f)
	}
	_, err := prometheus.PresetQueries("nope")
	assert.Error(t, err)
}

// A user's query replaces the preset's, one by one, and is rendered too.
func TestQueriesOverrideAndRender(t *testing.T) {
	q, err := prometheus.PresetQueries("torchserve")
	require.NoError(t, err)
	got := q.Override(prometheus.Queries{ErrorRate: `my_errors{namespace="$namespace",pod=~"$pods"}[$window]`}).
		Render("ns", "p-.*", "5m")
	assert.Equal(t, `my_errors{namespace="ns",pod=~"p-.*"}[5m]`, got.ErrorRate)
	assert.Contains(t, got.RequestRate, "ts_inference_requests_total")
	assert.Contains(t, got.RequestRate, "[5m]")
}
