package modeldeployment_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	mdctrl "github.com/ml-operator/ml-operator/controllers/modeldeployment"
	"github.com/ml-operator/ml-operator/internal/integrations/prometheus"
	"github.com/ml-operator/ml-operator/internal/integrations/prometheus/prometheustest"
	"github.com/ml-operator/ml-operator/test/testutil"
)

func get(t *testing.T, ns, name string, obj client.Object) {
	t.Helper()
	require.NoError(t, k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, obj))
}

func gone(t *testing.T, ns, name string, obj client.Object) bool {
	t.Helper()
	err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, obj)
	return apierrors.IsNotFound(err)
}

// deleting reports whether obj is gone or has a deletion timestamp.
func deleting(t *testing.T, ns, name string, obj client.Object) bool {
	t.Helper()
	err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, obj)
	if apierrors.IsNotFound(err) {
		return true
	}
	require.NoError(t, err)
	return obj.GetDeletionTimestamp() != nil
}

// metricValue reads one series from controller-runtime's registry.
func metricValue(t *testing.T, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	families, err := crmetrics.Registry.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue next
				}
			}
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue(), true
			}
			return m.GetGauge().GetValue(), true
		}
	}
	return 0, false
}

// An 80/20 A/B split reaches the children in each of the three routers once
// both versions are Ready.
func TestABSplitInEveryRouter(t *testing.T) {
	for _, router := range []mlv1.TrafficRouter{mlv1.RouterGatewayAPI, mlv1.RouterIstio, mlv1.RouterService} {
		t.Run(string(router), func(t *testing.T) {
			h := newHarness(t)
			h.create(testutil.ModelDeployment("ab", "").Router(router).Replicas(2, 10).
				Version("v1", 80, "s3://m/v1").Version("v2", 20, "s3://m/v2").Obj())
			h.reconcile("ab")
			h.setReady("ab-v1", 1)
			h.setReady("ab-v2", 1)
			res := h.reconcile("ab")
			assert.Equal(t, 30*time.Second, res.RequeueAfter, "health re-evaluated every healthCheck.intervalSeconds")

			md := h.md("ab")
			assert.Equal(t, router, md.Status.Router)
			assert.Equal(t, map[string]int32{"v1": 80, "v2": 20}, activeWeights(md))
			assert.Equal(t, mlv1.PhaseRunning, md.Status.Phase)

			switch router {
			case mlv1.RouterGatewayAPI:
				assert.Equal(t, map[string]int32{"ab-v1": 80, "ab-v2": 20}, h.routeWeights("ab"))
			case mlv1.RouterIstio:
				vs := &unstructured.Unstructured{}
				vs.SetAPIVersion("networking.istio.io/v1")
				vs.SetKind("VirtualService")
				get(t, h.ns, "ab", vs)
				httpRoutes, _, _ := unstructured.NestedSlice(vs.Object, "spec", "http")
				require.Len(t, httpRoutes, 1)
				got := map[string]int64{}
				for _, d := range httpRoutes[0].(map[string]any)["route"].([]any) {
					dest := d.(map[string]any)
					subset, _, _ := unstructured.NestedString(dest, "destination", "subset")
					host, _, _ := unstructured.NestedString(dest, "destination", "host")
					assert.Equal(t, "ab", host)
					got[subset] = dest["weight"].(int64)
				}
				assert.Equal(t, map[string]int64{"v1": 80, "v2": 20}, got)
				assert.Equal(t, "ModelDeployment", vs.GetOwnerReferences()[0].Kind)

				dr := &unstructured.Unstructured{}
				dr.SetAPIVersion("networking.istio.io/v1")
				dr.SetKind("DestinationRule")
				get(t, h.ns, "ab", dr)
				subsets, _, _ := unstructured.NestedSlice(dr.Object, "spec", "subsets")
				require.Len(t, subsets, 2)
				assert.Equal(t, map[string]any{"name": "v2", "labels": map[string]any{mlv1.LabelModelVersion: "v2"}}, subsets[1])
			case mlv1.RouterService:
				// No L7 router: the HPA bounds follow the weights, so the stable
				// Service's endpoints approximate 80/20.
				hpa1, hpa2 := &autoscalingv2.HorizontalPodAutoscaler{}, &autoscalingv2.HorizontalPodAutoscaler{}
				get(t, h.ns, "ab-v1", hpa1)
				get(t, h.ns, "ab-v2", hpa2)
				assert.Equal(t, int32(2), *hpa1.Spec.MinReplicas)
				assert.Equal(t, int32(8), hpa1.Spec.MaxReplicas)
				assert.Equal(t, int32(1), *hpa2.Spec.MinReplicas)
				assert.Equal(t, int32(2), hpa2.Spec.MaxReplicas)
				assert.True(t, gone(t, h.ns, "ab", &unstructured.Unstructured{Object: map[string]any{
					"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute"}}), "service mode writes no HTTPRoute")
			}
		})
	}
}

// When the detector finds another router, every ModelDeployment on auto
// (or with no router) is reconciled at once; those that name a router are not.
func TestRouterChangeReconcilesAutoRouted(t *testing.T) {
	h := newHarness(t)
	h.create(testutil.ModelDeployment("implicit", "").Version("v1", -1, "s3://m/v1").Obj())
	h.create(testutil.ModelDeployment("auto", "").Router(mlv1.RouterAuto).Version("v1", -1, "s3://m/v1").Obj())
	h.create(testutil.ModelDeployment("fixed", "").Router(mlv1.RouterService).Version("v1", -1, "s3://m/v1").Obj())
	var mine []string
	for _, req := range h.r.AutoRouted(context.Background(), nil) {
		if req.Namespace == h.ns {
			mine = append(mine, req.Name)
		}
	}
	assert.ElementsMatch(t, []string{"implicit", "auto"}, mine)
}

// A version gets traffic only once its pods are Ready; until then its share
// goes to the Ready versions.
func TestReadinessGatedWeights(t *testing.T) {
	h := newHarness(t)
	h.create(testutil.ModelDeployment("gated", "").Router(mlv1.RouterGatewayAPI).
		Version("v1", 80, "s3://m/v1").Version("v2", 20, "s3://m/v2").Obj())
	h.reconcile("gated")
	evs := h.events()
	assert.True(t, hasEvent(evs, "Normal Created", "gated-v1"), "events: %v", evs)
	assert.True(t, hasEvent(evs, "Normal Created", "gated-v2"), "events: %v", evs)
	md := h.md("gated")
	assert.Equal(t, mlv1.PhasePending, md.Status.Phase)
	assert.Equal(t, map[string]int32{"v1": 0, "v2": 0}, activeWeights(md))
	ready, _ := condStatus(md, mlv1.ModelDeploymentReady)
	assert.Equal(t, metav1.ConditionFalse, ready)

	h.setReady("gated-v2", 1)
	h.reconcile("gated")
	assert.Equal(t, map[string]int32{"gated-v1": 0, "gated-v2": 100}, h.routeWeights("gated"))
	md = h.md("gated")
	assert.Equal(t, map[string]int32{"v1": 0, "v2": 100}, activeWeights(md))
	assert.False(t, md.Status.ActiveVersions[0].Ready)
	assert.True(t, md.Status.ActiveVersions[1].Ready)
	progressing, _ := condStatus(md, mlv1.ModelDeploymentProgressing)
	assert.Equal(t, metav1.ConditionTrue, progressing)
	v, ok := metricValue(t, "modeldeployment_traffic_weight", map[string]string{"namespace": h.ns, "name": "gated", "version": "v2"})
	assert.True(t, ok)
	assert.Equal(t, 100.0, v)

	h.setReady("gated-v1", 1)
	h.reconcile("gated")
	assert.Equal(t, map[string]int32{"gated-v1": 80, "gated-v2": 20}, h.routeWeights("gated"))
	md = h.md("gated")
	assert.Equal(t, map[string]int32{"v1": 80, "v2": 20}, activeWeights(md))
	assert.Equal(t, mlv1.PhaseRunning, md.Status.Phase)
	assert.Equal(t, mlv1.OutcomeSucceeded, md.Status.History[0].Outcome)
	assert.True(t, hasEvent(h.events(), "Normal Promoted", "v1=80%, v2=20%"))
}

// The HPA owns the replicas: after the HPA (here, the test in its place)
// scales the Deployment, a reconcile that changes the pod template leaves the
// replicas alone, and the operator owns no replicas field.
func TestHPAOwnedReplicasUntouched(t *testing.T) {
	h := newHarness(t)
	h.create(testutil.ModelDeployment("hpa", "").Router(mlv1.RouterGatewayAPI).Replicas(2, 10).
		Version("v1", -1, "s3://m/v1").Config("threads", "4").Obj())
	h.reconcile("hpa")

	ctx := context.Background()
	d := h.deployment("hpa-v1")
	patch := client.MergeFrom(d.DeepCopy())
	d.Spec.Replicas = ptr.To[int32](5)
	require.NoError(t, k8s.Patch(ctx, d, patch, client.FieldOwner("horizontal-pod-autoscaler")))
	hashBefore := d.Spec.Template.Annotations[mdctrl.AnnotationConfigHash]

	h.update("hpa", func(md *mlv1.ModelDeployment) { md.Spec.Config["threads"] = "8" })
	h.reconcile("hpa")

	d = h.deployment("hpa-v1")
	assert.NotEqual(t, hashBefore, d.Spec.Template.Annotations[mdctrl.AnnotationConfigHash], "the reconcile applied the new template")
	assert.Equal(t, int32(5), *d.Spec.Replicas, "the operator must not reset the HPA's replicas")
	applied := false
	for _, mf := range d.ManagedFields {
		if mf.Manager == mdctrl.FieldOwner {
			assert.Equal(t, metav1.ManagedFieldsOperationApply, mf.Operation, "children are server-side applied")
			assert.NotContains(t, string(mf.FieldsV1.Raw), `"f:replicas"`, "ml-operator must not own spec.replicas")
			applied = true
		}
	}
	assert.True(t, applied, "ml-operator is a field manager of the Deployment")
	cm := &corev1.ConfigMap{}
	get(t, h.ns, "hpa-model-config", cm)
	assert.Equal(t, "8", cm.Data["threads"])
}

// A version removed from the spec first drains (weight 0, children kept) for
// one health interval, then its Deployment, Service and HPA are deleted; its
// model cache PVC is kept (retainOnDelete defaults to true) and loses no data.
func TestVersionRemovalDrainsThenDeletes(t *testing.T) {
	for _, retain := range []bool{true, false} {
		t.Run(map[bool]string{true: "retain PVC", false: "delete PVC"}[retain], func(t *testing.T) {
			h := newHarness(t)
			h.create(testutil.ModelDeployment("rm", "").Router(mlv1.RouterGatewayAPI).Storage("1Gi", retain).
				HealthCheck(30, 5).Version("v1", 50, "s3://m/v1").Version("v2", 50, "s3://m/v2").Obj())
			h.reconcile("rm")
			h.setReady("rm-v1", 1)
			h.setReady("rm-v2", 1)
			h.reconcile("rm")
			pvc := &corev1.PersistentVolumeClaim{}
			get(t, h.ns, "rm-v2-model", pvc)
			assert.Equal(t, !retain, len(pvc.OwnerReferences) == 1, "a retained PVC has no owner reference")

			h.update("rm", func(md *mlv1.ModelDeployment) {
				md.Spec.Versions = md.Spec.Versions[:1]
				md.Spec.Versions[0].Weight = ptr.To[int32](100)
			})
			res := h.reconcile("rm")
			assert.Equal(t, map[string]int32{"rm-v1": 100, "rm-v2": 0}, h.routeWeights("rm"), "draining: weight 0")
			h.deployment("rm-v2")
			md := h.md("rm")
			require.Len(t, md.Status.ActiveVersions, 2)
			assert.NotNil(t, md.Status.ActiveVersions[1].DrainStartTime)
			progressing, reason := condStatus(md, mlv1.ModelDeploymentProgressing)
			assert.Equal(t, metav1.ConditionTrue, progressing)
			assert.Equal(t, mlv1.ReasonDraining, reason)
			assert.LessOrEqual(t, res.RequeueAfter, 30*time.Second)

			h.clock.Step(30 * time.Second)
			h.reconcile("rm")
			assert.Equal(t, map[string]int32{"rm-v1": 100}, h.routeWeights("rm"))
			assert.True(t, gone(t, h.ns, "rm-v2", &appsv1.Deployment{}))
			assert.True(t, gone(t, h.ns, "rm-v2", &corev1.Service{}))
			assert.True(t, gone(t, h.ns, "rm-v2", &autoscalingv2.HorizontalPodAutoscaler{}))
			// The API server's pvc-protection finalizer keeps a deleted claim
			// around (Terminating) in envtest; deletion is what the operator owes.
			assert.Equal(t, !retain, deleting(t, h.ns, "rm-v2-model", &corev1.PersistentVolumeClaim{}))
			assert.False(t, gone(t, h.ns, "rm-v1", &appsv1.Deployment{}))
			md = h.md("rm")
			require.Len(t, md.Status.ActiveVersions, 1)
			assert.True(t, hasEvent(h.events(), "Normal VersionRemoved", "v2"))
			_, ok := metricValue(t, "modeldeployment_traffic_weight", map[string]string{"namespace": h.ns, "name": "rm", "version": "v2"})
			assert.False(t, ok, "the removed version's series is deleted")
			w, ok := metricValue(t, "modeldeployment_traffic_weight", map[string]string{"namespace": h.ns, "name": "rm", "version": "v1"})
			assert.True(t, ok)
			assert.Equal(t, 100.0, w)
		})
	}
}

// Pods crash-looping past failureThreshold are deleted with an event; when the
// crash loop survives that remediation the version is rolled back to the last
// healthy version, with the spec left alone until a later change retries it.
func TestCrashLoopRemediatedThenRolledBack(t *testing.T) {
	h := newHarness(t)
	h.create(testutil.ModelDeployment("cl", "").Router(mlv1.RouterGatewayAPI).FailureThreshold(3).
		Version("v1", -1, "s3://m/v1").Obj())
	h.reconcile("cl")
	h.setReady("cl-v1", 1)
	h.reconcile("cl")
	require.Equal(t, mlv1.OutcomeSucceeded, h.md("cl").Status.History[0].Outcome)

	h.update("cl", func(md *mlv1.ModelDeployment) {
		md.Spec.Versions[0].Weight = ptr.To[int32](80)
		md.Spec.Versions = append(md.Spec.Versions, mlv1.ModelVersion{Name: "v2", Weight: ptr.To[int32](20), ModelPath: "s3://m/v2", Image: "example.com/bad:1"})
	})
	h.reconcile("cl")
	h.events()

	first := h.crashLoopingPod("cl", "v2", "cl-v2-aaaaa", 3)
	h.reconcile("cl")
	assert.True(t, gone(t, h.ns, first.Name, &corev1.Pod{}), "crash-looping pod deleted")
	evs := h.events()
	assert.True(t, hasEvent(evs, "Warning Remediated", first.Name), "events: %v", evs)
	md := h.md("cl")
	assert.Equal(t, int32(1), md.Status.ActiveVersions[1].Remediations)
	assert.Empty(t, md.Status.FailedVersions, "one remediation is not a rollback yet")
	healthy, reason := condStatus(md, mlv1.ModelDeploymentHealthy)
	assert.Equal(t, metav1.ConditionFalse, healthy)
	assert.Equal(t, mlv1.ReasonCrashLoop, reason)
	assert.Equal(t, mlv1.PhaseDegraded, md.Status.Phase)

	h.crashLoopingPod("cl", "v2", "cl-v2-bbbbb", 4)
	h.reconcile("cl")
	md = h.md("cl")
	require.Len(t, md.Status.FailedVersions, 1)
	fv := md.Status.FailedVersions[0]
	assert.Equal(t, "v2", fv.Name)
	assert.Equal(t, mlv1.ReasonCrashLoop, fv.Reason)
	assert.Equal(t, md.Generation, fv.Generation)
	rolledBack, reason := condStatus(md, mlv1.ModelDeploymentRolledBack)
	assert.Equal(t, metav1.ConditionTrue, rolledBack)
	assert.Equal(t, mlv1.ReasonCrashLoop, reason)
	assert.Equal(t, map[string]int32{"cl-v1": 100, "cl-v2": 0}, h.routeWeights("cl"))
	assert.Equal(t, int32(20), *md.Spec.Versions[1].Weight, "the spec is left alone")
	assert.Equal(t, mlv1.OutcomeRolledBack, md.Status.History[0].Outcome)
	assert.True(t, hasEvent(h.events(), "Warning RolledBack", "version v2 rolled back to v1 (CrashLoop)"))
	n, ok := metricValue(t, "modeldeployment_rollbacks_total", map[string]string{"namespace": h.ns, "name": "cl", "version": "v2", "reason": "CrashLoop"})
	assert.True(t, ok)
	assert.Equal(t, 1.0, n)
	assert.False(t, gone(t, h.ns, "cl-v2-bbbbb", &corev1.Pod{}), "a rolled-back version is no longer remediated")

	// A later spec change retries the version.
	h.update("cl", func(md *mlv1.ModelDeployment) { md.Spec.Versions[1].Image = "example.com/fixed:2" })
	h.reconcile("cl")
	md = h.md("cl")
	assert.Empty(t, md.Status.FailedVersions)
	rolledBack, _ = condStatus(md, mlv1.ModelDeploymentRolledBack)
	assert.Equal(t, metav1.ConditionFalse, rolledBack)
}

// A version with no Ready pod after rollout.progressDeadlineSeconds is a
// failed rollout and is rolled back; the requeue is timed to the deadline.
func TestProgressDeadlineRollsBack(t *testing.T) {
	h := newHarness(t)
	h.create(testutil.ModelDeployment("pd", "").Router(mlv1.RouterGatewayAPI).ProgressDeadline(120).HealthCheck(300, 5).
		Version("v1", 90, "s3://m/v1").Version("v2", 10, "s3://m/v2").Obj())
	h.reconcile("pd")
	h.setReady("pd-v1", 1)
	res := h.reconcile("pd")
	assert.Equal(t, 120*time.Second, res.RequeueAfter, "requeued at the progress deadline, before the 300s health interval")
	assert.Empty(t, h.md("pd").Status.FailedVersions)

	h.clock.Step(119 * time.Second)
	h.reconcile("pd")
	assert.Empty(t, h.md("pd").Status.FailedVersions)

	h.clock.Step(time.Second)
	h.reconcile("pd")
	md := h.md("pd")
	require.Len(t, md.Status.FailedVersions, 1)
	assert.Equal(t, mlv1.ReasonProgressDeadlineExceeded, md.Status.FailedVersions[0].Reason)
	assert.Equal(t, map[string]int32{"pd-v1": 100, "pd-v2": 0}, h.routeWeights("pd"))
	progressing, reason := condStatus(md, mlv1.ModelDeploymentProgressing)
	assert.Equal(t, metav1.ConditionFalse, progressing)
	assert.Equal(t, mlv1.ReasonRolloutFailed, reason)
	assert.Equal(t, mlv1.PhaseRunning, md.Status.Phase, "v1 still serves")
}

// Health: fewer than 80 % of the desired replicas Ready is Degraded.
func TestDegradedBelow80Percent(t *testing.T) {
	h := newHarness(t)
	h.create(testutil.ModelDeployment("deg", "").Router(mlv1.RouterService).Replicas(5, 5).Version("v1", -1, "s3://m/v1").Obj())
	h.reconcile("deg")
	ctx := context.Background()
	d := h.deployment("deg-v1")
	patch := client.MergeFrom(d.DeepCopy())
	d.Spec.Replicas = ptr.To[int32](5) // as the HPA would, to its minimum
	require.NoError(t, k8s.Patch(ctx, d, patch, client.FieldOwner("horizontal-pod-autoscaler")))
	h.setReady("deg-v1", 4)
	h.reconcile("deg")
	md := h.md("deg")
	assert.Equal(t, mlv1.PhaseRunning, md.Status.Phase, "4 of 5 is 80 %%: healthy")
	assert.True(t, hasEvent(h.events(), "Normal Scaled", "from 1 to 5"))

	h.setReady("deg-v1", 3)
	h.clock.Step(30 * time.Second)
	h.reconcile("deg")
	md = h.md("deg")
	assert.Equal(t, mlv1.PhaseDegraded, md.Status.Phase)
	healthy, reason := condStatus(md, mlv1.ModelDeploymentHealthy)
	assert.Equal(t, metav1.ConditionFalse, healthy)
	assert.Equal(t, mlv1.ReasonDegraded, reason)
	assert.True(t, hasEvent(h.events(), "Warning Degraded", "3 of 5"))
	v, ok := metricValue(t, "modeldeployment_phase", map[string]string{"namespace": h.ns, "name": "deg", "phase": "Degraded"})
	assert.True(t, ok)
	assert.Equal(t, 1.0, v)
}

// withPrometheus makes h's reconciler read Prometheus from a server that
// answers each query with rules (prometheustest).
func (h *harness) withPrometheus(rules prometheustest.Rules) {
	h.t.Helper()
	src, err := prometheus.NewHTTPSource(prometheustest.NewServer(h.t, rules).URL, nil)
	require.NoError(h.t, err)
	h.r.Metrics = src
}

// A canned Prometheus error spike on the canary rolls it back to the stable
// version; status.metrics reports the traffic-weighted totals.
func TestPrometheusErrorSpikeRollsBack(t *testing.T) {
	h := newHarness(t)
	h.withPrometheus(func(q string) (float64, bool) {
		canary := strings.Contains(q, `pod=~"spike-v2-`)
		switch {
		case strings.Contains(q, "http_request_duration_seconds"):
			return 40, true
		case strings.Contains(q, `code=~"5.."`) && canary:
			return 0.25, true
		case strings.Contains(q, `code=~"5.."`):
			return 0.01, true
		case canary:
			return 10, true
		default:
			return 90, true
		}
	})
	h.create(testutil.ModelDeployment("spike", "").Router(mlv1.RouterGatewayAPI).AnalysisPreset(mlv1.AnalysisGeneric).MaxErrorRate(0.05).
		Version("v1", 90, "s3://m/v1").Version("v2", 10, "s3://m/v2").Obj())
	h.reconcile("spike")
	h.setReady("spike-v1", 1)
	h.setReady("spike-v2", 1)
	h.reconcile("spike")

	md := h.md("spike")
	require.Len(t, md.Status.FailedVersions, 1)
	assert.Equal(t, "v2", md.Status.FailedVersions[0].Name)
	assert.Equal(t, mlv1.ReasonErrorRate, md.Status.FailedVersions[0].Reason)
	assert.Contains(t, md.Status.FailedVersions[0].Message, "error rate 0.2500")
	assert.Equal(t, map[string]int32{"spike-v1": 100, "spike-v2": 0}, h.routeWeights("spike"))
	assert.Equal(t, map[string]int32{"v1": 100, "v2": 0}, activeWeights(md))
	rolledBack, reason := condStatus(md, mlv1.ModelDeploymentRolledBack)
	assert.Equal(t, metav1.ConditionTrue, rolledBack)
	assert.Equal(t, mlv1.ReasonErrorRate, reason)
	assert.True(t, hasEvent(h.events(), "Warning RolledBack", "version v2 rolled back to v1 (ErrorRate)"))
	require.NotNil(t, md.Status.Metrics)
	assert.InDelta(t, 100, *md.Status.Metrics.RequestsPerSecond, 1e-9)
	assert.InDelta(t, (90*0.01+10*0.25)/100, *md.Status.Metrics.ErrorRate, 1e-9)
	assert.InDelta(t, 40, *md.Status.Metrics.AverageLatencyMs, 1e-9)
	assert.Equal(t, int32(10), *md.Spec.Versions[1].Weight, "the spec is left alone")
}

// A canary whose latency exceeds rollout.maxLatencyMs is rolled back (with
// autoRollback on, the default): traffic to the stable version, the failed
// version recorded with reason Latency at the pass's time, RolledBack=True.
func TestLatencySpikeRollsBack(t *testing.T) {
	h := newHarness(t)
	h.withPrometheus(func(q string) (float64, bool) {
		canary := strings.Contains(q, `pod=~"lag-v2-`)
		switch {
		case strings.Contains(q, "http_request_duration_seconds") && canary:
			return 900, true
		case strings.Contains(q, "http_request_duration_seconds"):
			return 40, true
		case strings.Contains(q, `code=~"5.."`):
			return 0, true
		default:
			return 5, true
		}
	})
	h.create(testutil.ModelDeployment("lag", "").Router(mlv1.RouterGatewayAPI).AnalysisPreset(mlv1.AnalysisGeneric).MaxLatencyMs(500).
		Version("v1", 80, "s3://m/v1").Version("v2", 20, "s3://m/v2").Obj())
	h.reconcile("lag")
	h.setReady("lag-v1", 1)
	h.setReady("lag-v2", 1)
	h.clock.Step(7 * time.Second)
	passTime := h.clock.Now()
	h.reconcile("lag")

	md := h.md("lag")
	require.Len(t, md.Status.FailedVersions, 1)
	failed := md.Status.FailedVersions[0]
	assert.Equal(t, "v2", failed.Name)
	assert.Equal(t, mlv1.ReasonLatency, failed.Reason)
	assert.Contains(t, failed.Message, "average latency 900.0ms is above rollout.maxLatencyMs 500")
	assert.True(t, failed.Time.Time.Equal(passTime), "rolled back at %v, the pass ran at %v", failed.Time, passTime)
	assert.Equal(t, map[string]int32{"lag-v1": 100, "lag-v2": 0}, h.routeWeights("lag"))
	rolledBack, reason := condStatus(md, mlv1.ModelDeploymentRolledBack)
	assert.Equal(t, metav1.ConditionTrue, rolledBack)
	assert.Equal(t, mlv1.ReasonLatency, reason)
	assert.True(t, hasEvent(h.events(), "Warning RolledBack", "version v2 rolled back to v1 (Latency)"))
	assert.Equal(t, int32(20), *md.Spec.Versions[1].Weight, "the spec is left alone")
}

// With autoRollback off, a failing version only loses its traffic while it
// is not Ready; nothing is rolled back.
func TestLatencyWithoutAutoRollbackOnlyReports(t *testing.T) {
	h := newHarness(t)
	h.withPrometheus(func(q string) (float64, bool) {
		switch {
		case strings.Contains(q, "http_request_duration_seconds"):
			return 900, true
		case strings.Contains(q, `code=~"5.."`):
			return 0, true
		default:
			return 5, true
		}
	})
	h.create(testutil.ModelDeployment("slow", "").Router(mlv1.RouterGatewayAPI).AnalysisPreset(mlv1.AnalysisGeneric).MaxLatencyMs(500).AutoRollback(false).
		Version("v1", 50, "s3://m/v1").Version("v2", 50, "s3://m/v2").Obj())
	h.reconcile("slow")
	h.setReady("slow-v1", 1)
	h.setReady("slow-v2", 1)
	h.reconcile("slow")
	md := h.md("slow")
	assert.Empty(t, md.Status.FailedVersions)
	assert.Equal(t, map[string]int32{"slow-v1": 50, "slow-v2": 50}, h.routeWeights("slow"))
	healthy, reason := condStatus(md, mlv1.ModelDeploymentHealthy)
	assert.Equal(t, metav1.ConditionFalse, healthy)
	assert.Equal(t, mlv1.ReasonLatency, reason)
}

// The seed example, run by the real controller in a manager, creates the
// Deployment, Services, HPA and ConfigMap its user expects.
func TestSeedExampleCreatesChildren(t *testing.T) {
	ctx := context.Background()
	objs, err := testutil.ReadManifests(testutil.SeedExamplesDir() + "/modeldeployment-v1-sentiment-analysis.yaml")
	require.NoError(t, err)
	require.Len(t, objs, 1)
	require.NoError(t, testutil.EnsureNamespace(ctx, k8s, objs[0].GetNamespace()))
	ns, name := "ml-models", "sentiment-analysis"
	// With both the Gateway API and Istio installed, seed 004 (no gateway)
	// gets Istio's VirtualService in a namespace in the mesh.
	nsObj := &corev1.Namespace{}
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Name: ns}, nsObj))
	nsObj.Labels = map[string]string{"istio-injection": "enabled"}
	require.NoError(t, k8s.Update(ctx, nsObj))
	runManager(t)
	require.NoError(t, k8s.Create(ctx, objs[0]))

	d := &appsv1.Deployment{}
	testutil.Eventually(t, func() bool {
		return k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-v1"}, d) == nil
	}, "Deployment sentiment-analysis-v1")
	wantLabels := map[string]string{
		mlv1.LabelModelDeployment: name, mlv1.LabelModelVersion: "v1", mlv1.LabelManagedBy: mlv1.ManagedByValue,
	}
	assert.Equal(t, wantLabels, d.Labels)
	assert.Equal(t, wantLabels, d.Spec.Template.Labels, "pods carry the labels the manager's cache selects on")
	require.Len(t, d.OwnerReferences, 1)
	assert.Equal(t, name, d.OwnerReferences[0].Name)
	c := d.Spec.Template.Spec.Containers[0]
	assert.Equal(t, "my-registry/sentiment-model:v1.0.0", c.Image)
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	assert.Equal(t, map[string]string{
		"HOME":       "/home/ml-operator", // the manager's default --pod-home
		"MODEL_NAME": "sentiment-classifier", "MODEL_PATH": "/mnt/model/model.pt",
		"MODEL_URI": "s3://models/sentiment/v1/model.pt", "MODEL_VERSION": "v1", "FRAMEWORK": "pytorch",
	}, env)
	// The seed's s3:// model is fetched by the storage initializer, the
	// manager's default image.
	require.Len(t, d.Spec.Template.Spec.InitContainers, 1)
	ic := d.Spec.Template.Spec.InitContainers[0]
	assert.Equal(t, mlv1.StorageInitializerContainerName, ic.Name)
	assert.Equal(t, "ghcr.io/ml-operator/storage-initializer:v0.2.0", ic.Image)
	assert.Equal(t, []string{"s3://models/sentiment/v1/model.pt", "/mnt/model/model.pt"}, ic.Args)
	assert.Equal(t, "2", c.Resources.Limits.Cpu().String())
	assert.Equal(t, "2Gi", c.Resources.Requests.Memory().String())
	for _, p := range []*corev1.Probe{c.ReadinessProbe, c.LivenessProbe, c.StartupProbe} {
		require.NotNil(t, p)
		assert.Equal(t, "/health", p.HTTPGet.Path)
		assert.Equal(t, intstr.FromInt32(8080), p.HTTPGet.Port)
		assert.Equal(t, int32(30), p.PeriodSeconds)
	}
	assert.Equal(t, int32(3), c.ReadinessProbe.FailureThreshold)
	assert.Equal(t, int32(20), c.StartupProbe.FailureThreshold, "600s progress deadline / 30s interval")
	assert.Equal(t, "/etc/model-config", c.VolumeMounts[0].MountPath)
	assert.Equal(t, name+"-model-config", d.Spec.Template.Spec.Volumes[0].ConfigMap.Name)

	hpa := &autoscalingv2.HorizontalPodAutoscaler{}
	testutil.Eventually(t, func() bool {
		return k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-v1"}, hpa) == nil
	}, "HPA sentiment-analysis-v1")
	assert.Equal(t, int32(2), *hpa.Spec.MinReplicas)
	assert.Equal(t, int32(10), hpa.Spec.MaxReplicas)
	assert.Equal(t, name+"-v1", hpa.Spec.ScaleTargetRef.Name)
	require.Len(t, hpa.Spec.Metrics, 1)
	assert.Equal(t, int32(70), *hpa.Spec.Metrics[0].Resource.Target.AverageUtilization)

	stable, perVersion := &corev1.Service{}, &corev1.Service{}
	testutil.Eventually(t, func() bool {
		return k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, stable) == nil &&
			k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-v1"}, perVersion) == nil
	}, "stable and per-version Services")
	assert.Equal(t, map[string]string{mlv1.LabelModelDeployment: name}, stable.Spec.Selector)
	assert.Equal(t, map[string]string{mlv1.LabelModelDeployment: name, mlv1.LabelModelVersion: "v1"}, perVersion.Spec.Selector)
	assert.Equal(t, int32(8080), stable.Spec.Ports[0].Port)
	get(t, ns, name+"-model-config", &corev1.ConfigMap{})

	setDeploymentReady(t, ns, name+"-v1", 1)
	testutil.Eventually(t, func() bool {
		md := &mlv1.ModelDeployment{}
		if k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, md) != nil {
			return false
		}
		return len(md.Status.ActiveVersions) == 1 && md.Status.ActiveVersions[0].Weight == 100 &&
			md.Status.ActiveVersions[0].Ready && md.Status.Router == mlv1.RouterIstio &&
			md.Status.URL == "http://sentiment-analysis.ml-models.svc.cluster.local:8080" &&
			md.Status.ObservedGeneration == md.Generation
	}, "status shows v1 serving 100% through Istio")
	get(t, ns, name, virtualService())
	get(t, ns, name, &unstructured.Unstructured{Object: map[string]any{"apiVersion": "networking.istio.io/v1", "kind": "DestinationRule"}})
	assert.True(t, gone(t, ns, name, httpRoute()), "no HTTPRoute: it would route nothing")
}

// Switching routers deletes the old router's objects.
func TestRouterSwitchCleansUp(t *testing.T) {
	h := newHarness(t)
	h.create(testutil.ModelDeployment("sw", "").Router(mlv1.RouterGatewayAPI).Version("v1", -1, "s3://m/v1").Obj())
	h.reconcile("sw")
	route := &unstructured.Unstructured{}
	route.SetAPIVersion("gateway.networking.k8s.io/v1")
	route.SetKind("HTTPRoute")
	get(t, h.ns, "sw", route)

	h.update("sw", func(md *mlv1.ModelDeployment) { md.Spec.Traffic.Router = mlv1.RouterIstio })
	h.reconcile("sw")
	assert.True(t, gone(t, h.ns, "sw", route.DeepCopy()), "HTTPRoute deleted after switching to istio")
	vs := &unstructured.Unstructured{}
	vs.SetAPIVersion("networking.istio.io/v1")
	vs.SetKind("VirtualService")
	get(t, h.ns, "sw", vs)
	assert.Equal(t, mlv1.RouterIstio, h.md("sw").Status.Router)

	h.update("sw", func(md *mlv1.ModelDeployment) { md.Spec.Traffic.Router = mlv1.RouterService })
	h.reconcile("sw")
	assert.True(t, gone(t, h.ns, "sw", vs.DeepCopy()), "VirtualService deleted after switching to service")
	dr := &unstructured.Unstructured{}
	dr.SetAPIVersion("networking.istio.io/v1")
	dr.SetKind("DestinationRule")
	assert.True(t, gone(t, h.ns, "sw", dr))
}

// Under router service a rolled-back version is sized to zero: its HPA goes
// and the operator sets its replicas to 0, so the stable Service stops
// sending it traffic; the last healthy version is sized for 100 %.
func TestServiceRouterRollbackScalesToZero(t *testing.T) {
	h := newHarness(t)
	h.create(testutil.ModelDeployment("svc", "").Router(mlv1.RouterService).Replicas(2, 10).ProgressDeadline(60).
		Version("v1", 70, "s3://m/v1").Version("v2", 30, "s3://m/v2").Obj())
	h.reconcile("svc")
	h.setReady("svc-v1", 1)
	h.reconcile("svc")
	get(t, h.ns, "svc-v2", &autoscalingv2.HorizontalPodAutoscaler{})

	h.clock.Step(61 * time.Second)
	h.reconcile("svc")
	md := h.md("svc")
	require.Len(t, md.Status.FailedVersions, 1)
	assert.True(t, gone(t, h.ns, "svc-v2", &autoscalingv2.HorizontalPodAutoscaler{}), "no HPA for a version sized to zero")
	assert.Equal(t, int32(0), *h.deployment("svc-v2").Spec.Replicas)
	hpa := &autoscalingv2.HorizontalPodAutoscaler{}
	get(t, h.ns, "svc-v1", hpa)
	assert.Equal(t, int32(2), *hpa.Spec.MinReplicas)
	assert.Equal(t, int32(10), hpa.Spec.MaxReplicas)

	// A spec change retries v2: it gets its HPA back and the operator lets go of its replicas.
	h.update("svc", func(md *mlv1.ModelDeployment) { md.Spec.Versions[1].ModelPath = "s3://m/v2-fixed" })
	h.reconcile("svc")
	get(t, h.ns, "svc-v2", &autoscalingv2.HorizontalPodAutoscaler{})
	assert.Equal(t, int32(1), *h.deployment("svc-v2").Spec.Replicas, "one replica to start from: an HPA does not scale up from zero")
	h.reconcile("svc")
	d := h.deployment("svc-v2")
	for _, mf := range d.ManagedFields {
		if mf.Manager == mdctrl.FieldOwner {
			assert.NotContains(t, string(mf.FieldsV1.Raw), `"f:replicas"`)
		}
	}
}

// Deleting a ModelDeployment removes its metric series.
func TestMetricsRemovedWithTheObject(t *testing.T) {
	h := newHarness(t)
	md := h.create(testutil.ModelDeployment("gone", "").Router(mlv1.RouterService).Version("v1", -1, "s3://m/v1").Obj())
	h.reconcile("gone")
	_, ok := metricValue(t, "modeldeployment_ready_replicas", map[string]string{"namespace": h.ns, "name": "gone", "version": "v1"})
	require.True(t, ok)
	require.NoError(t, k8s.Delete(context.Background(), md))
	h.reconcile("gone")
	for _, name := range []string{"modeldeployment_phase", "modeldeployment_ready_replicas", "modeldeployment_traffic_weight"} {
		_, ok := metricValue(t, name, map[string]string{"namespace": h.ns, "name": "gone"})
		assert.False(t, ok, "%s series left behind", name)
	}
}

// A Prometheus with no traffic for a version yields no rollback.
func TestPrometheusWithoutTrafficDoesNotRollBack(t *testing.T) {
	h := newHarness(t)
	h.withPrometheus(func(string) (float64, bool) { return 0, false })
	h.create(testutil.ModelDeployment("quiet", "").Router(mlv1.RouterGatewayAPI).
		Version("v1", 50, "s3://m/v1").Version("v2", 50, "s3://m/v2").Obj())
	h.reconcile("quiet")
	h.setReady("quiet-v1", 1)
	h.setReady("quiet-v2", 1)
	h.reconcile("quiet")
	md := h.md("quiet")
	assert.Empty(t, md.Status.FailedVersions)
	assert.Equal(t, mlv1.PhaseRunning, md.Status.Phase)
}

// Renaming a version never drops traffic: the removed version keeps serving
// until its replacement is Ready, then drains and goes.
func TestRenamedVersionServesUntilReplacementReady(t *testing.T) {
	h := newHarness(t)
	h.create(testutil.ModelDeployment("rn", "").Router(mlv1.RouterGatewayAPI).HealthCheck(30, 5).Version("blue", -1, "s3://m/1").Obj())
	h.reconcile("rn")
	h.setReady("rn-blue", 1)
	h.reconcile("rn")

	h.update("rn", func(md *mlv1.ModelDeployment) { md.Spec.Versions[0].Name = "green" })
	h.reconcile("rn")
	assert.Equal(t, map[string]int32{"rn-green": 0, "rn-blue": 100}, h.routeWeights("rn"), "blue serves while green starts")
	md := h.md("rn")
	ready, _ := condStatus(md, mlv1.ModelDeploymentReady)
	assert.Equal(t, metav1.ConditionTrue, ready)
	h.clock.Step(time.Hour)
	h.reconcile("rn")
	h.deployment("rn-blue") // not deleted while nothing else serves

	h.setReady("rn-green", 1)
	h.reconcile("rn")
	assert.Equal(t, map[string]int32{"rn-green": 100, "rn-blue": 0}, h.routeWeights("rn"), "blue drains once green is Ready")
	h.deployment("rn-blue")
	h.clock.Step(30 * time.Second)
	h.reconcile("rn")
	assert.Equal(t, map[string]int32{"rn-green": 100}, h.routeWeights("rn"))
	assert.True(t, gone(t, h.ns, "rn-blue", &appsv1.Deployment{}))
}

// A version asked for no traffic is not rolling out: under router service it
// has no pods, no progress deadline runs, and it is never rolled back. Given a
// weight later, it starts a rollout with a fresh deadline.
func TestZeroWeightVersionIsNotAFailedRollout(t *testing.T) {
	h := newHarness(t)
	h.create(testutil.ModelDeployment("zw", "").Router(mlv1.RouterService).ProgressDeadline(60).
		Version("v1", 100, "s3://m/v1").Version("v2", 0, "s3://m/v2").Obj())
	h.reconcile("zw")
	h.setReady("zw-v1", 1)
	h.reconcile("zw")
	assert.Equal(t, int32(0), *h.deployment("zw-v2").Spec.Replicas)
	assert.True(t, gone(t, h.ns, "zw-v2", &autoscalingv2.HorizontalPodAutoscaler{}))
	h.clock.Step(time.Hour)
	h.reconcile("zw")
	md := h.md("zw")
	assert.Empty(t, md.Status.FailedVersions)
	assert.Nil(t, md.Status.ActiveVersions[1].RolloutStartTime)
	assert.Equal(t, mlv1.OutcomeSucceeded, md.Status.History[0].Outcome)

	h.update("zw", func(md *mlv1.ModelDeployment) {
		md.Spec.Versions[0].Weight = ptr.To[int32](50)
		md.Spec.Versions[1].Weight = ptr.To[int32](50)
	})
	h.reconcile("zw")
	md = h.md("zw")
	assert.Empty(t, md.Status.FailedVersions, "a fresh deadline, not an instant failure")
	require.NotNil(t, md.Status.ActiveVersions[1].RolloutStartTime)
	assert.True(t, h.clock.Now().Truncate(time.Second).Equal(md.Status.ActiveVersions[1].RolloutStartTime.Time),
		"rollout starts when the weight is given: %s", md.Status.ActiveVersions[1].RolloutStartTime)
	get(t, h.ns, "zw-v2", &autoscalingv2.HorizontalPodAutoscaler{})
	h.clock.Step(61 * time.Second)
	h.reconcile("zw")
	require.Len(t, h.md("zw").Status.FailedVersions, 1, "then the deadline applies")
}

// Envoy refuses a split whose weights sum to 0, so while no version is Ready
// the VirtualService carries the requested weights; once one is Ready it
// carries the effective ones.
func TestIstioWithNothingReadyRoutesAsRequested(t *testing.T) {
	h := newHarness(t)
	h.create(testutil.ModelDeployment("mesh", "").Router(mlv1.RouterIstio).
		Version("v1", 70, "s3://m/v1").Version("v2", 30, "s3://m/v2").Obj())
	weights := func() map[string]int64 {
		vs := &unstructured.Unstructured{}
		vs.SetAPIVersion("networking.istio.io/v1")
		vs.SetKind("VirtualService")
		get(t, h.ns, "mesh", vs)
		httpRoutes, _, _ := unstructured.NestedSlice(vs.Object, "spec", "http")
		out := map[string]int64{}
		for _, d := range httpRoutes[0].(map[string]any)["route"].([]any) {
			subset, _, _ := unstructured.NestedString(d.(map[string]any), "destination", "subset")
			out[subset] = d.(map[string]any)["weight"].(int64)
		}
		return out
	}
	h.reconcile("mesh")
	assert.Equal(t, map[string]int64{"v1": 70, "v2": 30}, weights())
	assert.Equal(t, map[string]int32{"v1": 0, "v2": 0}, activeWeights(h.md("mesh")), "status shows the effective weights")

	h.setReady("mesh-v2", 1)
	h.reconcile("mesh")
	assert.Equal(t, map[string]int64{"v1": 0, "v2": 100}, weights())
}

// A pass with nothing changed re-sends no cached child (only the router,
// which is not cached); a change re-sends exactly the children it affects.
// recordApplies makes h's reconciler note every apply it sends, as
// Kind/name, in the returned slice.
func recordApplies(t *testing.T, h *harness) *[]string {
	t.Helper()
	base, err := client.NewWithWatch(restCfg, client.Options{Scheme: h.r.Client.Scheme()})
	require.NoError(t, err)
	applied := &[]string{}
	h.r.Client = interceptor.NewClient(base, interceptor.Funcs{
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			data, _ := json.Marshal(obj)
			var meta struct {
				Kind     string `json:"kind"`
				Metadata struct {
					Name string `json:"name"`
				} `json:"metadata"`
			}
			_ = json.Unmarshal(data, &meta)
			*applied = append(*applied, meta.Kind+"/"+meta.Metadata.Name)
			return c.Apply(ctx, obj, opts...)
		},
	})
	return applied
}

func TestUnchangedChildrenAreNotReapplied(t *testing.T) {
	h := newHarness(t)
	applied := recordApplies(t, h)
	h.create(testutil.ModelDeployment("quiet", "").Router(mlv1.RouterGatewayAPI).
		Version("v1", 80, "s3://m/v1").Version("v2", 20, "s3://m/v2").Obj())
	h.reconcile("quiet")
	assert.Len(t, *applied, 9, "first pass applies everything: %v", *applied)

	*applied = nil
	h.clock.Step(30 * time.Second)
	h.reconcile("quiet")
	assert.Equal(t, []string{"HTTPRoute/quiet"}, *applied)

	*applied = nil
	h.update("quiet", func(md *mlv1.ModelDeployment) { md.Spec.Versions[1].Image = "example.com/server:2" })
	h.reconcile("quiet")
	assert.Equal(t, []string{"Deployment/quiet-v2", "HTTPRoute/quiet"}, *applied)

	// A child deleted behind the operator's back comes back.
	*applied = nil
	require.NoError(t, k8s.Delete(context.Background(), &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "quiet-v1", Namespace: h.ns}}))
	h.reconcile("quiet")
	assert.Equal(t, []string{"Service/quiet-v1", "HTTPRoute/quiet"}, *applied)
	get(t, h.ns, "quiet-v1", &corev1.Service{})
}

// A child someone else edits (kubectl edit, another controller) is applied
// again on the next pass and gets the operator's fields back; status
// written by the Deployment and HPA controllers is not mistaken for an edit.
func TestChildrenEditedByOthersAreCorrected(t *testing.T) {
	h := newHarness(t)
	applied := recordApplies(t, h)
	h.create(testutil.ModelDeployment("drift", "").Router(mlv1.RouterGatewayAPI).Config("batch_size", "32").
		Version("v1", 80, "s3://m/v1").Version("v2", 20, "s3://m/v2").Obj())
	h.reconcile("drift")
	ctx := context.Background()
	image := h.deployment("drift-v1").Spec.Template.Spec.Containers[0].Image

	// Status writes, as the Deployment and HPA controllers make them.
	h.setReady("drift-v1", 1)
	hpa := &autoscalingv2.HorizontalPodAutoscaler{}
	get(t, h.ns, "drift-v2", hpa)
	hpa.Status.CurrentReplicas = 3
	hpa.Status.DesiredReplicas = 3
	require.NoError(t, k8s.Status().Update(ctx, hpa))
	*applied = nil
	h.reconcile("drift")
	assert.Equal(t, []string{"HTTPRoute/drift"}, *applied, "status writes are not edits")

	// Edits of fields the operator owns, by another field manager.
	d := h.deployment("drift-v1")
	d.Spec.Template.Spec.Containers[0].Image = "example.com/someone-else:1"
	require.NoError(t, k8s.Update(ctx, d, client.FieldOwner("kubectl-edit")))
	get(t, h.ns, "drift-v2", hpa)
	hpa.Spec.MaxReplicas = 99
	require.NoError(t, k8s.Update(ctx, hpa, client.FieldOwner("kubectl-edit")))
	cm := &corev1.ConfigMap{}
	get(t, h.ns, "drift-model-config", cm)
	cm.Data["batch_size"] = "1"
	require.NoError(t, k8s.Update(ctx, cm, client.FieldOwner("kubectl-edit")))
	svc := &corev1.Service{}
	get(t, h.ns, "drift", svc)
	svc.Spec.Selector[mlv1.LabelModelDeployment] = "elsewhere"
	require.NoError(t, k8s.Update(ctx, svc, client.FieldOwner("kubectl-edit")))
	stableSelector := func() map[string]string {
		s := &corev1.Service{}
		get(t, h.ns, "drift", s)
		return s.Spec.Selector
	}

	*applied = nil
	h.reconcile("drift")
	assert.ElementsMatch(t, []string{"ConfigMap/drift-model-config", "Deployment/drift-v1", "HorizontalPodAutoscaler/drift-v2",
		"Service/drift", "HTTPRoute/drift"}, *applied)
	assert.Equal(t, image, h.deployment("drift-v1").Spec.Template.Spec.Containers[0].Image)
	get(t, h.ns, "drift-v2", hpa)
	assert.NotEqual(t, int32(99), hpa.Spec.MaxReplicas)
	get(t, h.ns, "drift-model-config", cm)
	assert.Equal(t, "32", cm.Data["batch_size"])
	assert.Equal(t, "drift", stableSelector()[mlv1.LabelModelDeployment])

	// Corrected, they are left alone again.
	*applied = nil
	h.reconcile("drift")
	assert.Equal(t, []string{"HTTPRoute/drift"}, *applied)

	// A manager that restarts remembers nothing: its first pass applies
	// every child once (which corrects edits made while it was down).
	h.r = &mdctrl.Reconciler{Client: h.r.Client, Recorder: h.r.Recorder, Clock: h.r.Clock, Routers: h.r.Routers}
	*applied = nil
	h.reconcile("drift")
	assert.Len(t, *applied, 9, "%v", *applied)
}

// Under router service a removed version drains by scaling to zero: no
// weight to set, so its HPA goes and its replicas become 0, then it is deleted.
func TestServiceRouterDrainScalesToZero(t *testing.T) {
	h := newHarness(t)
	h.create(testutil.ModelDeployment("sd", "").Router(mlv1.RouterService).HealthCheck(30, 5).
		Version("v1", 50, "s3://m/v1").Version("v2", 50, "s3://m/v2").Obj())
	h.reconcile("sd")
	h.setReady("sd-v1", 1)
	h.setReady("sd-v2", 1)
	h.reconcile("sd")
	get(t, h.ns, "sd-v2", &autoscalingv2.HorizontalPodAutoscaler{})

	h.update("sd", func(md *mlv1.ModelDeployment) {
		md.Spec.Versions = md.Spec.Versions[:1]
		md.Spec.Versions[0].Weight = ptr.To[int32](100)
	})
	h.reconcile("sd")
	assert.Equal(t, int32(0), *h.deployment("sd-v2").Spec.Replicas)
	assert.True(t, gone(t, h.ns, "sd-v2", &autoscalingv2.HorizontalPodAutoscaler{}))
	assert.Equal(t, "example.com/server:latest", h.deployment("sd-v2").Spec.Template.Spec.Containers[0].Image, "the template is untouched")

	// Brought back while draining: one replica to start from (an HPA does not
	// scale up from zero), its HPA back, and the replicas left to the HPA after.
	h.update("sd", func(md *mlv1.ModelDeployment) {
		md.Spec.Versions[0].Weight = ptr.To[int32](50)
		md.Spec.Versions = append(md.Spec.Versions, mlv1.ModelVersion{Name: "v2", Weight: ptr.To[int32](50), ModelPath: "s3://m/v2"})
	})
	h.reconcile("sd")
	assert.Equal(t, int32(1), *h.deployment("sd-v2").Spec.Replicas)
	get(t, h.ns, "sd-v2", &autoscalingv2.HorizontalPodAutoscaler{})
	h.reconcile("sd")
	d := h.deployment("sd-v2")
	assert.Equal(t, int32(1), *d.Spec.Replicas)
	for _, mf := range d.ManagedFields {
		if mf.Manager == mdctrl.FieldOwner && mf.Operation == metav1.ManagedFieldsOperationApply {
			assert.NotContains(t, string(mf.FieldsV1.Raw), `"f:replicas"`, "the HPA owns the replicas again")
		}
	}

	// Removed again: drained to zero, then deleted.
	h.update("sd", func(md *mlv1.ModelDeployment) {
		md.Spec.Versions = md.Spec.Versions[:1]
		md.Spec.Versions[0].Weight = ptr.To[int32](100)
	})
	h.reconcile("sd")
	assert.Equal(t, int32(0), *h.deployment("sd-v2").Spec.Replicas)
	h.clock.Step(30 * time.Second)
	h.reconcile("sd")
	assert.True(t, gone(t, h.ns, "sd-v2", &appsv1.Deployment{}))
}
