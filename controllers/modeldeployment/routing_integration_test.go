package modeldeployment_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	fakediscovery "k8s.io/client-go/discovery/fake"
	kubetesting "k8s.io/client-go/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	mdctrl "github.com/ml-operator/ml-operator/controllers/modeldeployment"
	"github.com/ml-operator/ml-operator/test/testutil"
)

// These tests run where both the Gateway API's HTTPRoute and Istio's
// VirtualService/DestinationRule CRDs are installed (suite_test.go): the
// cluster seed 004 met, on which auto used to pick an HTTPRoute with no
// parentRefs.

func httpRoute() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("gateway.networking.k8s.io/v1")
	u.SetKind("HTTPRoute")
	return u
}

func virtualService() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("networking.istio.io/v1")
	u.SetKind("VirtualService")
	return u
}

// trafficRouted is the TrafficRouted condition.
func trafficRouted(t *testing.T, md *mlv1.ModelDeployment) metav1.Condition {
	t.Helper()
	c := meta.FindStatusCondition(md.Status.Conditions, mlv1.ModelDeploymentTrafficRouted)
	require.NotNil(t, c, "TrafficRouted condition")
	assert.Equal(t, md.Generation, c.ObservedGeneration)
	return *c
}

// labelNamespace adds labels to the test's namespace.
func (h *harness) labelNamespace(labels map[string]string) {
	h.t.Helper()
	ns := &corev1.Namespace{}
	require.NoError(h.t, k8s.Get(context.Background(), client.ObjectKey{Name: h.ns}, ns))
	if ns.Labels == nil {
		ns.Labels = map[string]string{}
	}
	for k, v := range labels {
		ns.Labels[k] = v
	}
	require.NoError(h.t, k8s.Update(context.Background(), ns))
}

// Auto with both router APIs served but no gateway and no mesh: neither
// router would route anything, so the replica split is used, and says so.
func TestRouterAutoWithNothingConfiguredSplitsByReplicas(t *testing.T) {
	h := newHarness(t)
	h.create(testutil.ModelDeployment("auto", "").Replicas(2, 10).
		Version("v1", 80, "s3://m/v1").Version("v2", 20, "s3://m/v2").Obj())
	h.reconcile("auto")
	h.setReady("auto-v1", 1)
	h.setReady("auto-v2", 1)
	h.reconcile("auto")

	md := h.md("auto")
	assert.Equal(t, mlv1.RouterService, md.Status.Router)
	c := trafficRouted(t, md)
	assert.Equal(t, metav1.ConditionTrue, c.Status)
	assert.Equal(t, mlv1.ReasonReplicaCounts, c.Reason)
	assert.Contains(t, c.Message, "no gateway is named")
	assert.True(t, gone(t, h.ns, "auto", httpRoute()), "no HTTPRoute without a gateway")
	assert.True(t, gone(t, h.ns, "auto", virtualService()), "no VirtualService outside the mesh")
	hpa := &autoscalingv2.HorizontalPodAutoscaler{}
	get(t, h.ns, "auto-v2", hpa)
	assert.Equal(t, int32(2), hpa.Spec.MaxReplicas, "replica counts follow the 20% weight")
}

// Auto with a gateway in the spec attaches an HTTPRoute to it.
func TestRouterAutoAttachesToTheNamedGateway(t *testing.T) {
	h := newHarness(t)
	md := testutil.ModelDeployment("gw", "").Version("v1", -1, "s3://m/v1").Obj()
	md.Spec.Traffic.Gateway = &mlv1.GatewayReference{Name: "public", Namespace: "infra", SectionName: "https"}
	h.create(md)
	h.reconcile("gw")
	h.setReady("gw-v1", 1)
	h.reconcile("gw")

	got := h.md("gw")
	assert.Equal(t, mlv1.RouterGatewayAPI, got.Status.Router)
	c := trafficRouted(t, got)
	assert.Equal(t, metav1.ConditionTrue, c.Status)
	assert.Equal(t, mlv1.ReasonWeightedRoutes, c.Reason)
	route := &gwv1.HTTPRoute{}
	get(t, h.ns, "gw", route)
	require.Len(t, route.Spec.ParentRefs, 1)
	p := route.Spec.ParentRefs[0]
	assert.Equal(t, gwv1.ObjectName("public"), p.Name)
	assert.Equal(t, gwv1.Namespace("infra"), *p.Namespace)
	assert.Equal(t, gwv1.SectionName("https"), *p.SectionName)
	assert.Equal(t, map[string]int32{"gw-v1": 100}, h.routeWeights("gw"))
	assert.True(t, gone(t, h.ns, "gw", virtualService()))
}

// Auto with the manager's --default-gateway attaches the HTTPRoute to it.
func TestRouterAutoUsesTheManagersDefaultGateway(t *testing.T) {
	h := newHarness(t)
	h.r.Routing = mdctrl.RoutingDefaults{Gateway: &mlv1.GatewayReference{Name: "models", Namespace: "gateways"}}
	h.create(testutil.ModelDeployment("dflt", "").Version("v1", -1, "s3://m/v1").Obj())
	h.reconcile("dflt")

	got := h.md("dflt")
	assert.Equal(t, mlv1.RouterGatewayAPI, got.Status.Router)
	assert.Equal(t, metav1.ConditionTrue, trafficRouted(t, got).Status)
	route := &gwv1.HTTPRoute{}
	get(t, h.ns, "dflt", route)
	require.Len(t, route.Spec.ParentRefs, 1)
	assert.Equal(t, gwv1.ObjectName("models"), route.Spec.ParentRefs[0].Name)
	assert.Equal(t, gwv1.Namespace("gateways"), *route.Spec.ParentRefs[0].Namespace)
}

// Auto in a namespace labeled for Istio's sidecar injection writes the
// VirtualService (mesh only) and DestinationRule, even with the Gateway API
// installed: seed 004's case.
func TestRouterAutoPicksIstioInAMeshNamespace(t *testing.T) {
	for name, labels := range map[string]map[string]string{
		"istio-injection": {"istio-injection": "enabled"},
		"istio.io/rev":    {"istio.io/rev": "canary"},
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			h.labelNamespace(labels)
			h.create(testutil.ModelDeployment("mesh", "").Version("v1", -1, "s3://m/v1").Obj())
			h.reconcile("mesh")

			got := h.md("mesh")
			assert.Equal(t, mlv1.RouterIstio, got.Status.Router)
			c := trafficRouted(t, got)
			assert.Equal(t, metav1.ConditionTrue, c.Status)
			assert.Contains(t, c.Message, "clients in Istio's mesh")
			vs := virtualService()
			get(t, h.ns, "mesh", vs)
			_, bound, _ := unstructured.NestedSlice(vs.Object, "spec", "gateways")
			assert.False(t, bound, "a mesh VirtualService binds no gateway")
			assert.True(t, gone(t, h.ns, "mesh", httpRoute()))
		})
	}
}

// A namespace labeled later moves an auto ModelDeployment to Istio at its
// next pass, and the replica split's bounds give way to the full ones.
func TestRouterAutoFollowsTheNamespaceIntoTheMesh(t *testing.T) {
	h := newHarness(t)
	h.create(testutil.ModelDeployment("late", "").Version("v1", -1, "s3://m/v1").Obj())
	h.reconcile("late")
	assert.Equal(t, mlv1.RouterService, h.md("late").Status.Router)
	h.labelNamespace(map[string]string{"istio-injection": "enabled"})
	h.clock.Step(30 * time.Second)
	h.reconcile("late")
	assert.Equal(t, mlv1.RouterIstio, h.md("late").Status.Router)
	get(t, h.ns, "late", virtualService())
}

// A router named explicitly is used as named; when it cannot split traffic
// the condition says why.
func TestExplicitRouterThatCannotSplitSaysSo(t *testing.T) {
	t.Run("gatewayapi without a gateway", func(t *testing.T) {
		h := newHarness(t)
		h.create(testutil.ModelDeployment("nogw", "").Router(mlv1.RouterGatewayAPI).Version("v1", -1, "s3://m/v1").Obj())
		h.reconcile("nogw")
		got := h.md("nogw")
		assert.Equal(t, mlv1.RouterGatewayAPI, got.Status.Router)
		c := trafficRouted(t, got)
		assert.Equal(t, metav1.ConditionFalse, c.Status)
		assert.Equal(t, mlv1.ReasonNoGateway, c.Reason)
		assert.Contains(t, c.Message, "spec.traffic.gateway")
		route := &gwv1.HTTPRoute{}
		get(t, h.ns, "nogw", route)
		assert.Empty(t, route.Spec.ParentRefs)

		// Naming a gateway fixes it.
		h.update("nogw", func(md *mlv1.ModelDeployment) { md.Spec.Traffic.Gateway = &mlv1.GatewayReference{Name: "public"} })
		h.reconcile("nogw")
		c = trafficRouted(t, h.md("nogw"))
		assert.Equal(t, metav1.ConditionTrue, c.Status)
		assert.Equal(t, mlv1.ReasonWeightedRoutes, c.Reason)
	})
	t.Run("istio outside the mesh", func(t *testing.T) {
		h := newHarness(t)
		h.create(testutil.ModelDeployment("out", "").Router(mlv1.RouterIstio).Version("v1", -1, "s3://m/v1").Obj())
		h.reconcile("out")
		c := trafficRouted(t, h.md("out"))
		assert.Equal(t, metav1.ConditionFalse, c.Status)
		assert.Equal(t, mlv1.ReasonOutsideMesh, c.Reason)
		assert.Contains(t, c.Message, h.ns)
		get(t, h.ns, "out", virtualService())
	})
	t.Run("router API not served", func(t *testing.T) {
		h := newHarness(t)
		// A detector that finds neither API: the CRDs this suite installs are
		// ignored, as on a cluster without them.
		none := mdctrl.NewRouterDetector(&fakediscovery.FakeDiscovery{Fake: &kubetesting.Fake{}}, time.Minute)
		_, err := none.Detect()
		require.NoError(t, err)
		h.r.Routers = none
		md := testutil.ModelDeployment("absent", "").Router(mlv1.RouterGatewayAPI).Version("v1", -1, "s3://m/v1").Obj()
		md.Spec.Traffic.Gateway = &mlv1.GatewayReference{Name: "public"}
		h.create(md)
		h.reconcile("absent") // no error: nothing is applied that the cluster cannot take
		got := h.md("absent")
		c := trafficRouted(t, got)
		assert.Equal(t, metav1.ConditionFalse, c.Status)
		assert.Equal(t, mlv1.ReasonRouterNotInstalled, c.Reason)
		assert.True(t, gone(t, h.ns, "absent", httpRoute()), "no HTTPRoute written")
		get(t, h.ns, "absent", &corev1.Service{}) // the stable Service still serves
	})
}
