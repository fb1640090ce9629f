package prometheus

import (
	"fmt"
	"strings"
)

// Queries are one version's PromQL queries. In each, $namespace, $pods (a
// regex of the version's pod names) and $window are replaced before it is
// sent (Render). Prometheus' usual Kubernetes pod scrape config adds the
// namespace and pod labels the presets select on. An empty query is not
// asked: its measure is unknown (a server that counts no errors).
type Queries struct {
	// RequestRate answers requests per second.
	RequestRate string
	// ErrorRate answers the share (0..1) of failed requests.
	ErrorRate string
	// LatencyMs answers the mean request latency in milliseconds.
	LatencyMs string
}

// sel is the selector of a version's series, for a metric-name matcher
// (`__name__=~"..."` or `__name__="..."`).
func sel(name string) string {
	return `{` + name + `,namespace="$namespace",pod=~"$pods"}`
}

// rate is sum(rate(<selector>[$window])).
func rate(name string, extra ...string) string {
	s := sel(name)
	if len(extra) > 0 {
		s = s[:len(s)-1] + "," + strings.Join(extra, ",") + "}"
	}
	return "sum(rate(" + s + "[$window]))"
}

// total is the sum of the rates of several metrics, each 0 while a server
// has not created it yet (counters of rare outcomes appear with the first
// one). The rates are summed one metric at a time: rate() drops the metric
// name, so one selector over two names would give series Prometheus
// refuses to hold in one vector.
func total(names ...string) string {
	terms := make([]string, 0, len(names))
	for _, n := range names {
		terms = append(terms, "("+rate(n)+" or vector(0))")
	}
	return "(" + strings.Join(terms, " + ") + ")"
}

// Presets are the queries for the metric names each model server exports,
// as its documentation gives them (testdata/ holds recorded samples in that
// form, and the tests evaluate every preset against them with Prometheus'
// own engine). Keys are the api/v1 AnalysisPreset values.
var Presets = map[string]Queries{
	// The conventional HTTP metrics: a request counter with the status code
	// and a duration histogram in seconds.
	"generic": {
		RequestRate: rate(`__name__="http_requests_total"`),
		ErrorRate:   rate(`__name__="http_requests_total"`, `code=~"5.."`) + " / " + rate(`__name__="http_requests_total"`),
		LatencyMs:   "1000 * " + rate(`__name__="http_request_duration_seconds_sum"`) + " / " + rate(`__name__="http_request_duration_seconds_count"`),
	},
	// Seldon MLServer: model_infer_request_success/failure counters (the
	// Python client adds _total), and the REST server's request duration
	// histogram, restricted to the inference endpoints (not the probes).
	"mlserver": {
		RequestRate: total(`__name__="model_infer_request_success_total"`, `__name__="model_infer_request_failure_total"`),
		ErrorRate: total(`__name__="model_infer_request_failure_total"`) + " / " +
			total(`__name__="model_infer_request_success_total"`, `__name__="model_infer_request_failure_total"`),
		LatencyMs: "1000 * " + rate(`__name__="rest_server_requests_duration_seconds_sum"`, `path=~".*/infer"`) + " / " +
			rate(`__name__="rest_server_requests_duration_seconds_count"`, `path=~".*/infer"`),
	},
	// TorchServe (metrics_mode prometheus): ts_inference_requests_total and
	// the cumulative ts_inference_latency_microseconds, and the frontend's
	// Requests2XX/4XX/5XX counters (with or without the _total suffix, by
	// client version).
	"torchserve": {
		RequestRate: rate(`__name__="ts_inference_requests_total"`),
		ErrorRate: total(`__name__=~"Requests5XX(_total)?"`) + " / " +
			total(`__name__=~"Requests2XX(_total)?"`, `__name__=~"Requests4XX(_total)?"`, `__name__=~"Requests5XX(_total)?"`),
		LatencyMs: rate(`__name__="ts_inference_latency_microseconds"`) + " / " + rate(`__name__="ts_inference_requests_total"`) + " / 1000",
	},
	// NVIDIA Triton: nv_inference_request_success/failure and the cumulative
	// end-to-end nv_inference_request_duration_us.
	"triton": {
		RequestRate: total(`__name__="nv_inference_request_success"`, `__name__="nv_inference_request_failure"`),
		ErrorRate: total(`__name__="nv_inference_request_failure"`) + " / " +
			total(`__name__="nv_inference_request_success"`, `__name__="nv_inference_request_failure"`),
		LatencyMs: rate(`__name__="nv_inference_request_duration_us"`) + " / " +
			total(`__name__="nv_inference_request_success"`, `__name__="nv_inference_request_failure"`) + " / 1000",
	},
	// KServe's Python runtimes: request_{preprocess,predict,postprocess}_seconds
	// histograms. They count no errors: ErrorRate is left empty.
	"kserve": {
		RequestRate: rate(`__name__="request_predict_seconds_count"`),
		LatencyMs: "1000 * " + total(`__name__="request_preprocess_seconds_sum"`, `__name__="request_predict_seconds_sum"`,
			`__name__="request_postprocess_seconds_sum"`) + " / " + rate(`__name__="request_predict_seconds_count"`),
	},
	// Only the user's own queries.
	"custom": {},
}

// Override replaces q's queries with the non-empty ones of o.
func (q Queries) Override(o Queries) Queries {
	if o.RequestRate != "" {
		q.RequestRate = o.RequestRate
	}
	if o.ErrorRate != "" {
		q.ErrorRate = o.ErrorRate
	}
	if o.LatencyMs != "" {
		q.LatencyMs = o.LatencyMs
	}
	return q
}

// Render replaces $namespace, $pods and $window in every query with a
// version's values.
func (q Queries) Render(namespace, pods, window string) Queries {
	r := strings.NewReplacer("$namespace", namespace, "$pods", pods, "$window", window)
	return Queries{RequestRate: r.Replace(q.RequestRate), ErrorRate: r.Replace(q.ErrorRate), LatencyMs: r.Replace(q.LatencyMs)}
}

// PresetQueries returns the named preset's queries.
func PresetQueries(name string) (Queries, error) {
	q, ok := Presets[name]
	if !ok {
		return Queries{}, fmt.Errorf("unknown analysis preset %q", name)
	}
	return q, nil
}

// PodRegex matches the pods of Deployment <md>-<version>: <deployment>-<rs hash>-<pod suffix>.
func PodRegex(md, version string) string {
	return fmt.Sprintf("%s-%s-[a-z0-9]+-[a-z0-9]+", md, version)
}
