package packaging

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
)

// Seed 003's monitoring steps, with config/overlays/metrics-http: the
// manager's args (parsed by its real flag set) serve plain-HTTP metrics on
// :8080 from a container port named metrics; the metrics Service's one port
// is named metrics, 8080, targeting it; the ServiceMonitor scrapes that
// port over http; the network policy admits 8080. (That a manager with
// --metrics-secure=false answers GET /metrics over plain HTTP is
// TestDashboardAndAlertMetricsAreExported's scrape: one manager per test
// process, as controller names must be unique.)
func TestMetricsHTTPOverlayServesSeed003sSteps(t *testing.T) {
	objs := buildAndDecode(t, "config/overlays/metrics-http")
	_, c := managerDeployment(t, objs)
	opts := parseManagerArgs(t, c)
	assert.False(t, opts.MetricsSecure, "--metrics-secure=false")
	assert.Equal(t, ":8080", opts.MetricsBindAddress())
	i := slices.IndexFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "metrics" })
	require.GreaterOrEqual(t, i, 0, "container port metrics: %v", c.Ports)
	assert.Equal(t, int32(8080), c.Ports[i].ContainerPort)

	var svc *corev1.Service
	for _, s := range typedOf[*corev1.Service](objs) {
		if s.Name == "ml-operator-controller-manager-metrics-service" {
			svc = s
		}
	}
	require.NotNil(t, svc, "the metrics Service")
	require.Len(t, svc.Spec.Ports, 1)
	assert.Equal(t, "metrics", svc.Spec.Ports[0].Name)
	assert.Equal(t, int32(8080), svc.Spec.Ports[0].Port)
	assert.Equal(t, "metrics", svc.Spec.Ports[0].TargetPort.String())

	monitors := unstructuredOf(objs, "ServiceMonitor")
	require.Len(t, monitors, 1)
	sm := monitors[0]
	assert.Equal(t, svc.Namespace, sm.GetNamespace())
	match, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	assert.True(t, len(match) > 0 && labels.SelectorFromSet(match).Matches(labels.Set(svc.Labels)), "the ServiceMonitor selects the Service")
	endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	require.Len(t, endpoints, 1)
	ep := endpoints[0].(map[string]any)
	assert.Equal(t, "metrics", ep["port"])
	assert.Equal(t, "http", ep["scheme"])

	var ports []int
	for _, np := range typedOf[*networkingv1.NetworkPolicy](objs) {
		if np.Name != "ml-operator-allow-metrics-traffic" {
			continue
		}
		for _, rule := range np.Spec.Ingress {
			for _, p := range rule.Ports {
				ports = append(ports, p.Port.IntValue())
			}
		}
	}
	assert.Equal(t, []int{8080}, ports, "the metrics network policy admits 8080")
}
