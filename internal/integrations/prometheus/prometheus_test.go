package prometheus_test

import (
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ml-operator/ml-operator/internal/integrations/prometheus"
	"github.com/ml-operator/ml-operator/internal/integrations/prometheus/prometheustest"
)

func generic(t *testing.T) prometheus.Queries {
	t.Helper()
	q, err := prometheus.PresetQueries("generic")
	require.NoError(t, err)
	return q.Render("team-a", prometheus.PodRegex("llm", "v2"), "1m")
}

// The three rendered queries are asked in order (request rate first) and
// their answers fill VersionMetrics.
func TestVersionMetrics(t *testing.T) {
	var mu sync.Mutex
	var asked []string
	srv := prometheustest.NewServer(t, func(q string) (float64, bool) {
		mu.Lock()
		asked = append(asked, q)
		mu.Unlock()
		switch {
		case strings.Contains(q, "http_request_duration_seconds"):
			return 40, true
		case strings.Contains(q, `code=~"5.."`):
			return 0.02, true
		default:
			return 12.5, true
		}
	})
	src, err := prometheus.NewHTTPSource(srv.URL, nil)
	require.NoError(t, err)
	q := generic(t)
	m, err := src.VersionMetrics(context.Background(), q)
	require.NoError(t, err)
	assert.Equal(t, prometheus.VersionMetrics{RequestsPerSecond: 12.5, ErrorRate: 0.02, HasErrorRate: true, AverageLatencyMs: 40, HasLatency: true}, m)
	assert.Equal(t, []string{q.RequestRate, q.ErrorRate, q.LatencyMs}, asked)
	for _, q := range asked {
		assert.Contains(t, q, `namespace="team-a"`)
		assert.Contains(t, q, `pod=~"llm-v2-[a-z0-9]+-[a-z0-9]+"`)
		assert.Contains(t, q, `[1m]`)
		assert.NotContains(t, q, "$")
	}
}

// An empty query is not asked, and its measure stays unknown (KServe's
// runtimes count no errors).
func TestVersionMetricsSkipsEmptyQueries(t *testing.T) {
	var asked []string
	srv := prometheustest.NewServer(t, func(q string) (float64, bool) {
		asked = append(asked, q)
		return 2, true
	})
	src, err := prometheus.NewHTTPSource(srv.URL, nil)
	require.NoError(t, err)
	m, err := src.VersionMetrics(context.Background(), prometheus.Queries{RequestRate: "vector(2)", LatencyMs: "vector(2)"})
	require.NoError(t, err)
	assert.Equal(t, prometheus.VersionMetrics{RequestsPerSecond: 2, AverageLatencyMs: 2, HasLatency: true}, m)
	assert.Equal(t, []string{"vector(2)", "vector(2)"}, asked)
}

// No traffic yet (an empty answer to the request rate) is no data, not an
// error, and the other queries are not asked; a server without a latency
// histogram leaves HasLatency false.
func TestVersionMetricsWithoutData(t *testing.T) {
	srv := prometheustest.NewServer(t, func(string) (float64, bool) { return 0, false })
	src, err := prometheus.NewHTTPSource(srv.URL, nil)
	require.NoError(t, err)
	m, err := src.VersionMetrics(context.Background(), generic(t))
	require.NoError(t, err)
	assert.Equal(t, prometheus.VersionMetrics{}, m)

	srv = prometheustest.NewServer(t, func(q string) (float64, bool) {
		if strings.Contains(q, "http_request_duration_seconds") {
			return 0, false
		}
		return 3, true
	})
	src, err = prometheus.NewHTTPSource(srv.URL, nil)
	require.NoError(t, err)
	m, err = src.VersionMetrics(context.Background(), generic(t))
	require.NoError(t, err)
	assert.False(t, m.HasLatency)
	assert.Equal(t, 3.0, m.RequestsPerSecond)
	assert.False(t, math.IsNaN(m.AverageLatencyMs))
}

// A Prometheus that answers with an error is an error naming the query.
func TestVersionMetricsPrometheusDown(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "unavailable", http.StatusServiceUnavailable)
	}))
	t.Cleanup(srv.Close)
	src, err := prometheus.NewHTTPSource(srv.URL, nil)
	require.NoError(t, err)
	_, err = src.VersionMetrics(context.Background(), generic(t))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "http_requests_total")
}

// An address the client cannot use is refused when the source is built,
// naming the flag it came from.
func TestNewHTTPSourceRefusesABadAddress(t *testing.T) {
	_, err := prometheus.NewHTTPSource("://nope", nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--prometheus-url")
}
