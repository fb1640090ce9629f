package prometheus_test

import (
	"context"
	"fmt"
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

// The three queries select the version's pods by namespace and the
// Deployment's pod-name pattern, and their answers fill VersionMetrics.
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
	m, err := src.VersionMetrics(context.Background(), "team-a", "llm", "v2")
	require.NoError(t, err)
	assert.Equal(t, prometheus.VersionMetrics{RequestsPerSecond: 12.5, ErrorRate: 0.02, AverageLatencyMs: 40, HasLatency: true}, m)
	pods := `pod=~"llm-v2-[a-z0-9]+-[a-z0-9]+"`
	assert.Equal(t, []string{
		fmt.Sprintf(prometheus.QueryRequestsPerSecond, "team-a", "llm-v2-[a-z0-9]+-[a-z0-9]+"),
		fmt.Sprintf(prometheus.QueryErrorRate, "team-a", "llm-v2-[a-z0-9]+-[a-z0-9]+"),
		fmt.Sprintf(prometheus.QueryAverageLatencyMs, "team-a", "llm-v2-[a-z0-9]+-[a-z0-9]+"),
	}, asked)
	for _, q := range asked {
		assert.Contains(t, q, `namespace="team-a"`)
		assert.Contains(t, q, pods)
	}
}

// No traffic yet (an empty answer to the request rate) is no data, not an
// error, and the other queries are not asked; a server without a latency
// histogram leaves HasLatency false.
func TestVersionMetricsWithoutData(t *testing.T) {
	srv := prometheustest.NewServer(t, func(string) (float64, bool) { return 0, false })
	src, err := prometheus.NewHTTPSource(srv.URL, nil)
	require.NoError(t, err)
	m, err := src.VersionMetrics(context.Background(), "ns", "md", "v1")
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
	m, err = src.VersionMetrics(context.Background(), "ns", "md", "v1")
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
	_, err = src.VersionMetrics(context.Background(), "ns", "md", "v1")
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
