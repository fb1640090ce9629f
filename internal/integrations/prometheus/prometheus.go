// Package prometheus reads a ModelDeployment version's serving metrics (request
// rate, error rate, latency) from a Prometheus server through its HTTP API,
// with queries from a preset per model server (presets.go) or the user's.
// Source is what the ModelDeployment controller calls; HTTPSource asks
// Prometheus. What the numbers mean for a rollout is the controller's.
package prometheus

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
)

// VersionMetrics are one version's serving metrics over the query window.
type VersionMetrics struct {
	// RequestsPerSecond served by the version.
	RequestsPerSecond float64
	// ErrorRate is the share (0..1) of failed requests; HasErrorRate says
	// whether the server's metrics answered it (KServe's runtimes count no
	// errors). Only meaningful when RequestsPerSecond > 0.
	ErrorRate    float64
	HasErrorRate bool
	// AverageLatencyMs is the mean request latency; HasLatency says whether
	// the server's metrics answered it.
	AverageLatencyMs float64
	HasLatency       bool
}

// Source reads a version's serving metrics with rendered queries
// (Queries.Render). HTTPSource asks Prometheus; tests may serve canned
// results.
type Source interface {
	VersionMetrics(ctx context.Context, q Queries) (VersionMetrics, error)
}

// HTTPSource reads VersionMetrics from a Prometheus server with the
// official HTTP API client.
type HTTPSource struct {
	API     promv1.API
	Timeout time.Duration
}

var _ Source = &HTTPSource{}

// NewHTTPSource connects to the Prometheus at address (for example
// http://prometheus.monitoring:9090).
// roundTripper is the HTTP transport (promapi's default when nil).
func NewHTTPSource(address string, roundTripper http.RoundTripper) (*HTTPSource, error) {
	c, err := promapi.NewClient(promapi.Config{Address: address, RoundTripper: roundTripper})
	if err != nil {
		return nil, fmt.Errorf("--prometheus-url %q: %w", address, err)
	}
	return &HTTPSource{API: promv1.NewAPI(c), Timeout: 5 * time.Second}, nil
}

// VersionMetrics implements Source: the request rate first, and the other
// two only when it answered (no data is no traffic yet); an empty query is
// not asked.
func (p *HTTPSource) VersionMetrics(ctx context.Context, q Queries) (VersionMetrics, error) {
	ctx, cancel := context.WithTimeout(ctx, p.Timeout)
	defer cancel()
	var m VersionMetrics
	if q.RequestRate == "" {
		return m, nil
	}
	rps, ok, err := p.scalar(ctx, q.RequestRate)
	if err != nil || !ok {
		return m, err
	}
	m.RequestsPerSecond = rps
	if q.ErrorRate != "" {
		if m.ErrorRate, m.HasErrorRate, err = p.scalar(ctx, q.ErrorRate); err != nil {
			return m, err
		}
	}
	if q.LatencyMs != "" {
		if m.AverageLatencyMs, m.HasLatency, err = p.scalar(ctx, q.LatencyMs); err != nil {
			return m, err
		}
	}
	return m, nil
}

// scalar runs an instant query and returns its single value; ok is false
// when the result is empty or not a number (no traffic yet).
func (p *HTTPSource) scalar(ctx context.Context, query string) (float64, bool, error) {
	v, _, err := p.API.Query(ctx, query, time.Time{})
	if err != nil {
		return 0, false, fmt.Errorf("prometheus query %q: %w", query, err)
	}
	var f float64
	switch r := v.(type) {
	case model.Vector:
		if len(r) == 0 {
			return 0, false, nil
		}
		f = float64(r[0].Value)
	case *model.Scalar:
		f = float64(r.Value)
	default:
		return 0, false, fmt.Errorf("prometheus query %q: unexpected result type %s", query, v.Type())
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, false, nil
	}
	return f, true, nil
}
