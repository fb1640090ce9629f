// Package prometheus reads a ModelDeployment version's serving metrics (request
// rate, error rate, latency) from a Prometheus server through its HTTP API.
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
	// ErrorRate is the share (0..1) of requests answered with a 5xx code;
	// only meaningful when RequestsPerSecond > 0.
	ErrorRate float64
	// AverageLatencyMs is the mean request latency; HasLatency says whether
	// the server exports a latency histogram at all.
	AverageLatencyMs float64
	HasLatency       bool
}

// Source reads a version's serving metrics. HTTPSource asks Prometheus;
// tests may serve canned results.
type Source interface {
	VersionMetrics(ctx context.Context, namespace, modelDeployment, version string) (VersionMetrics, error)
}

// The PromQL the operator asks, per version. Model servers are expected to
// export the conventional http_requests_total{code} counter and the
// http_request_duration_seconds histogram; Prometheus' usual Kubernetes pod
// scrape config adds the namespace and pod labels the queries select on.
// %[1]s is the namespace, %[2]s the pod-name regex of the version's Deployment.
const (
	QueryRequestsPerSecond = `sum(rate(http_requests_total{namespace="%[1]s",pod=~"%[2]s"}[1m]))`
	QueryErrorRate         = `sum(rate(http_requests_total{namespace="%[1]s",pod=~"%[2]s",code=~"5.."}[1m])) / sum(rate(http_requests_total{namespace="%[1]s",pod=~"%[2]s"}[1m]))`
	QueryAverageLatencyMs  = `1000 * sum(rate(http_request_duration_seconds_sum{namespace="%[1]s",pod=~"%[2]s"}[1m])) / sum(rate(http_request_duration_seconds_count{namespace="%[1]s",pod=~"%[2]s"}[1m]))`
)

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

// podRegex matches the pods of Deployment <md>-<version>: <deployment>-<rs hash>-<pod suffix>.
func podRegex(md, version string) string {
	return fmt.Sprintf("%s-%s-[a-z0-9]+-[a-z0-9]+", md, version)
}

// VersionMetrics implements Source.
func (p *HTTPSource) VersionMetrics(ctx context.Context, namespace, md, version string) (VersionMetrics, error) {
	ctx, cancel := context.WithTimeout(ctx, p.Timeout)
	defer cancel()
	pods := podRegex(md, version)
	var m VersionMetrics
	rps, ok, err := p.scalar(ctx, fmt.Sprintf(QueryRequestsPerSecond, namespace, pods))
	if err != nil || !ok {
		return m, err
	}
	m.RequestsPerSecond = rps
	if m.ErrorRate, _, err = p.scalar(ctx, fmt.Sprintf(QueryErrorRate, namespace, pods)); err != nil {
		return m, err
	}
	if m.AverageLatencyMs, m.HasLatency, err = p.scalar(ctx, fmt.Sprintf(QueryAverageLatencyMs, namespace, pods)); err != nil {
		return m, err
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
