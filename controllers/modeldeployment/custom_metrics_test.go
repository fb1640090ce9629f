package modeldeployment_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/test/testutil"
)

// The documented examples of spec.scaling.metrics, as in
// config/samples/ml_v1_modeldeployment_custom_metrics.yaml.
var (
	cpuMetric = autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
		Name:   corev1.ResourceCPU,
		Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](80)},
	}}
	queueDepthMetric = autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
		Metric: autoscalingv2.MetricIdentifier{Name: "inference_queue_messages_ready",
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"queue": "llm-requests"}}},
		Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr.To(resource.MustParse("30"))},
	}}
	gpuUtilMetric = autoscalingv2.MetricSpec{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{
		Metric: autoscalingv2.MetricIdentifier{Name: "DCGM_FI_DEV_GPU_UTIL"},
		Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr.To(resource.MustParse("70"))},
	}}
)

// hpaMetrics reads a version's HPA from the API server and returns its metrics.
func hpaMetrics(t *testing.T, ns, name string) []autoscalingv2.MetricSpec {
	t.Helper()
	hpa := &autoscalingv2.HorizontalPodAutoscaler{}
	get(t, ns, name, hpa)
	return hpa.Spec.Metrics
}

// The custom-metrics sample, created as written: each version's HPA has the
// CPU target followed by spec.scaling.metrics as they are (External queue
// depth, Pods GPU utilization). A version added later gets them too, and a
// metric removed from the spec leaves every HPA.
func TestCustomMetricsReachEveryVersionHPA(t *testing.T) {
	objs, err := testutil.ReadManifests(filepath.Join("..", "..", "config", "samples", "ml_v1_modeldeployment_custom_metrics.yaml"))
	require.NoError(t, err)
	require.Len(t, objs, 1)
	md := &mlv1.ModelDeployment{}
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(objs[0].Object, md, true), "the sample has no unknown fields")

	h := newHarness(t)
	h.create(md)
	h.reconcile("llm-server")
	want := []autoscalingv2.MetricSpec{cpuMetric, queueDepthMetric, gpuUtilMetric}
	if diff := cmp.Diff(want, hpaMetrics(t, h.ns, "llm-server-v1")); diff != "" {
		t.Errorf("HPA llm-server-v1 metrics (-want +got):\n%s", diff)
	}
	hpa := &autoscalingv2.HorizontalPodAutoscaler{}
	get(t, h.ns, "llm-server-v1", hpa)
	require.Equal(t, int32(2), *hpa.Spec.MinReplicas)
	require.Equal(t, int32(12), hpa.Spec.MaxReplicas)

	// A canary version gets its own HPA with the same metrics.
	h.update("llm-server", func(md *mlv1.ModelDeployment) {
		md.Spec.Versions[0].Weight = ptr.To[int32](90)
		md.Spec.Versions = append(md.Spec.Versions, mlv1.ModelVersion{Name: "v2", Weight: ptr.To[int32](10), ModelPath: "s3://models/llama-3-8b-instruct/v2"})
	})
	h.reconcile("llm-server")
	for _, name := range []string{"llm-server-v1", "llm-server-v2"} {
		if diff := cmp.Diff(want, hpaMetrics(t, h.ns, name)); diff != "" {
			t.Errorf("HPA %s metrics (-want +got):\n%s", name, diff)
		}
	}

	// The queue-depth metric removed from the spec leaves both HPAs.
	h.update("llm-server", func(md *mlv1.ModelDeployment) { md.Spec.Scaling.Metrics = md.Spec.Scaling.Metrics[1:] })
	h.reconcile("llm-server")
	want = []autoscalingv2.MetricSpec{cpuMetric, gpuUtilMetric}
	for _, name := range []string{"llm-server-v1", "llm-server-v2"} {
		if diff := cmp.Diff(want, hpaMetrics(t, h.ns, name)); diff != "" {
			t.Errorf("HPA %s metrics after removing queue depth (-want +got):\n%s", name, diff)
		}
	}
}

// The CRD schema carries autoscaling/v2's MetricSpec: a metric written in
// the old v2beta1 shape (external.metricName) is refused with kubectl's
// default strict field validation, not silently dropped.
func TestCustomMetricInOldShapeRefused(t *testing.T) {
	ns := testutil.Namespace(t, k8s)
	objs, err := testutil.ReadManifests(filepath.Join("..", "..", "config", "samples", "ml_v1_modeldeployment_custom_metrics.yaml"))
	require.NoError(t, err)
	u := objs[0]
	u.SetNamespace(ns)
	metrics, _, err := unstructured.NestedSlice(u.Object, "spec", "scaling", "metrics")
	require.NoError(t, err)
	metrics[0].(map[string]any)["external"].(map[string]any)["metricName"] = "inference_queue_messages_ready"
	require.NoError(t, unstructured.SetNestedSlice(u.Object, metrics, "spec", "scaling", "metrics"))
	err = k8s.Create(context.Background(), u, client.FieldValidation("Strict"))
	require.ErrorContains(t, err, `unknown field "spec.scaling.metrics[0].external.metricName"`)
}
