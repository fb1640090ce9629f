package bench

import (
	"math"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/ml-operator/ml-operator/internal/localcluster"
	"github.com/ml-operator/ml-operator/internal/manifests"
)

func TestSummarizeMedianSpreadAndP99(t *testing.T) {
	s := Summarize([]float64{5, 1, 4, 2, 3})
	if s.N != 5 || s.Median != 3 || s.Min != 1 || s.Max != 5 || s.P99 != 5 {
		t.Errorf("Summarize(1..5) = %+v", s)
	}
	if s := Summarize([]float64{4, 1, 3, 2}); s.Median != 2.5 {
		t.Errorf("median of 1..4 = %v, want 2.5", s.Median)
	}
	xs := make([]float64, 200)
	for i := range xs {
		xs[i] = float64(i + 1)
	}
	if s := Summarize(xs); s.P99 != 198 {
		t.Errorf("nearest-rank p99 of 1..200 = %v, want 198", s.P99)
	}
	if s := Summarize(nil); s.N != 0 || !math.IsNaN(s.Median) {
		t.Errorf("Summarize(nil) = %+v, want NaN median", s)
	}
}

const apiserverText = `# TYPE apiserver_request_total counter
apiserver_request_total{code="201",component="apiserver",group="",resource="pods",scope="resource",subresource="",verb="POST",version="v1"} 10
apiserver_request_total{code="409",component="apiserver",group="",resource="pods",scope="resource",subresource="",verb="POST",version="v1"} 2
apiserver_request_total{code="201",component="apiserver",group="",resource="pods",scope="resource",subresource="binding",verb="POST",version="v1"} 7
# TYPE apiserver_admission_webhook_admission_duration_seconds histogram
apiserver_admission_webhook_admission_duration_seconds_bucket{name="a",operation="CREATE",rejected="false",type="validating",le="0.005"} 50
apiserver_admission_webhook_admission_duration_seconds_bucket{name="a",operation="CREATE",rejected="false",type="validating",le="0.025"} 90
apiserver_admission_webhook_admission_duration_seconds_bucket{name="a",operation="CREATE",rejected="false",type="validating",le="+Inf"} 100
apiserver_admission_webhook_admission_duration_seconds_sum{name="a",operation="CREATE",rejected="false",type="validating"} 1
apiserver_admission_webhook_admission_duration_seconds_count{name="a",operation="CREATE",rejected="false",type="validating"} 100
apiserver_admission_webhook_admission_duration_seconds_bucket{name="b",operation="CREATE",rejected="false",type="mutating",le="0.005"} 50
apiserver_admission_webhook_admission_duration_seconds_bucket{name="b",operation="CREATE",rejected="false",type="mutating",le="0.025"} 100
apiserver_admission_webhook_admission_duration_seconds_bucket{name="b",operation="CREATE",rejected="false",type="mutating",le="+Inf"} 100
apiserver_admission_webhook_admission_duration_seconds_sum{name="b",operation="CREATE",rejected="false",type="mutating"} 1
apiserver_admission_webhook_admission_duration_seconds_count{name="b",operation="CREATE",rejected="false",type="mutating"} 100
`

func TestRequestCountsSumOverCodesBySubresource(t *testing.T) {
	mf, err := parseMetrics([]byte(apiserverText))
	if err != nil {
		t.Fatal(err)
	}
	c := requestCounts(mf)
	if got := c[RequestKey{Verb: "POST", Resource: "pods"}]; got != 12 {
		t.Errorf("POST pods = %v, want 12 (both codes)", got)
	}
	if got := c[RequestKey{Verb: "POST", Resource: "pods", Subresource: "binding"}]; got != 7 {
		t.Errorf("POST pods/binding = %v, want 7", got)
	}
}

func TestHistogramQuantileInterpolatesAcrossSeries(t *testing.T) {
	mf, err := parseMetrics([]byte(apiserverText))
	if err != nil {
		t.Fatal(err)
	}
	h := sumHistogram(mf, "apiserver_admission_webhook_admission_duration_seconds", nil)
	if h.total != 200 {
		t.Fatalf("total = %v, want 200", h.total)
	}
	// 100 of 200 are <= 5 ms: the median is the top of the first bucket.
	if got := h.quantile(0.5); math.Abs(got-0.005) > 1e-9 {
		t.Errorf("p50 = %v, want 0.005", got)
	}
	// 190 <= 25 ms; rank 150 is 50/90 of the way through 5..25 ms.
	if got, want := h.quantile(0.75), 0.005+0.020*50/90; math.Abs(got-want) > 1e-9 {
		t.Errorf("p75 = %v, want %v", got, want)
	}
	// Above the last finite bound PromQL answers that bound.
	if got := h.quantile(0.99); got != 0.025 {
		t.Errorf("p99 = %v, want 0.025", got)
	}
	if got := h.minus(h).quantile(0.5); !math.IsNaN(got) {
		t.Errorf("quantile of an empty difference = %v, want NaN", got)
	}
}

func TestNodesHaveRoomForThePods(t *testing.T) {
	if n := Nodes(4000, 0); len(n) != 41 || n[0].GPUs != 0 {
		t.Errorf("4000 CPU workers: %d nodes (GPUs %d), want 41 CPU nodes", len(n), n[0].GPUs)
	}
	if n := Nodes(800, 1); len(n) != 101 || n[0].GPUs != 8 || n[99].GPUs != 8 || n[100].GPUs != 0 {
		t.Errorf("800 one-GPU workers: %d nodes, want 100 of 8 GPUs and a CPU node for the model servers", len(n))
	}
	if n := Nodes(10, 3); len(n) != 6 {
		t.Errorf("10 three-GPU workers: %d nodes, want 5 GPU nodes (2 workers each) and a CPU node", len(n))
	}
}

func TestSourceOfAttributesRequests(t *testing.T) {
	for k, want := range map[RequestKey]string{
		{Verb: "POST", Resource: "pods", Subresource: "binding"}:                    "scheduler",
		{Verb: "PATCH", Resource: "pods", Subresource: "status"}:                    "kwok (kubelet)",
		{Verb: "PUT", Resource: "trainingjobs", Subresource: "status", Group: "ml"}: "operator",
		{Verb: "POST", Resource: "trainingjobs", Group: "ml"}:                       "user (benchmark)",
		{Verb: "POST", Resource: "pods"}:                                            "operator",
		{Verb: "GET", Resource: "pods"}:                                             "other",
	} {
		if got := sourceOf(k); got != want {
			t.Errorf("sourceOf(%s) = %q, want %q", k, got, want)
		}
	}
}

func TestPhaseIsTheDifferenceOfTwoSnapshots(t *testing.T) {
	mf, err := parseMetrics([]byte(apiserverText))
	if err != nil {
		t.Fatal(err)
	}
	h := sumHistogram(mf, "apiserver_admission_webhook_admission_duration_seconds", nil)
	before := phaseSnapshot{managerCPU: 1, apiserverCPU: 10}
	after := phaseSnapshot{at: before.at.Add(30e9), admission: h, server: h, managerCPU: 3.5, apiserverCPU: 16}
	p := phase("burst", before, after)
	if p.Seconds != 30 || p.Admissions != 200 || p.ServerCalls != 200 {
		t.Errorf("phase = %+v, want 30 s and 200 calls each", p)
	}
	if math.Abs(p.APIServerP50Ms-5) > 1e-9 || p.APIServerP99Ms != 25 {
		t.Errorf("apiserver p50/p99 = %v/%v ms, want 5/25", p.APIServerP50Ms, p.APIServerP99Ms)
	}
	if p.ManagerCPUSeconds != 2.5 || p.APIServerCPUSeconds != 6 {
		t.Errorf("CPU = %v/%v s, want 2.5/6", p.ManagerCPUSeconds, p.APIServerCPUSeconds)
	}
	empty := phase("quiet", before, before)
	if !math.IsNaN(empty.ServerP99Ms) {
		t.Errorf("p99 of no calls = %v, want NaN", empty.ServerP99Ms)
	}
	if _, err := empty.MarshalJSON(); err != nil {
		t.Errorf("a phase without calls does not marshal: %v", err)
	}
}

func TestNoopTwinsCopyOurWebhooksRules(t *testing.T) {
	objs, err := manifests.Read(filepath.Join("..", "..", localcluster.WebhookManifests))
	if err != nil {
		t.Fatal(err)
	}
	ours := []string{"mtrainingjob.ml.example.com", "vtrainingjob.ml.example.com"}
	w := localcluster.Webhook{Port: 4321, CABundle: []byte("ca")}
	var all []string
	for _, obj := range objs {
		orig := obj.DeepCopy()
		names, err := noopTwins(obj, w, ours)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, names...)
		if !isNoop(obj.GetName()) {
			t.Errorf("configuration %q is not named as a no-op's", obj.GetName())
		}
		twins, _, _ := unstructured.NestedSlice(obj.Object, "webhooks")
		hooks, _, _ := unstructured.NestedSlice(orig.Object, "webhooks")
		for _, tw := range twins {
			twin := tw.(map[string]any)
			if url, _, _ := unstructured.NestedString(twin, "clientConfig", "url"); !strings.HasPrefix(url, "https://127.0.0.1:4321/") {
				t.Errorf("twin %s calls %q, not the no-op server", twin["name"], url)
			}
			for _, h := range hooks {
				hook := h.(map[string]any)
				if NoopPrefix+hook["name"].(string) != twin["name"] {
					continue
				}
				for _, field := range []string{"rules", "matchPolicy", "failurePolicy", "sideEffects", "timeoutSeconds", "matchConditions", "reinvocationPolicy"} {
					if !reflect.DeepEqual(hook[field], twin[field]) {
						t.Errorf("twin %s: %s = %v, ours %v", twin["name"], field, twin[field], hook[field])
					}
				}
			}
		}
	}
	slices.Sort(all)
	if want := []string{"noop-mtrainingjob.ml.example.com", "noop-vtrainingjob.ml.example.com"}; !slices.Equal(all, want) {
		t.Errorf("twins = %v, want %v (only of the webhooks installed)", all, want)
	}
}
