package modeldeployment_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/test/testutil"
)

// promoted creates md, makes its only version Ready and reconciles until
// its version set is promoted (history Succeeded): the stable set a stepped
// rollout starts from.
func (h *harness) promoted(md *mlv1.ModelDeployment, ready int32) {
	h.t.Helper()
	h.create(md)
	h.reconcile(md.Name)
	dep := md.Name + "-" + md.Spec.Versions[0].Name
	if d := h.deployment(dep); ptr.Deref(d.Spec.Replicas, 1) < ready {
		// The HPA scales it to its minimum (envtest runs no HPA controller).
		d.Spec.Replicas = ptr.To(ready)
		require.NoError(h.t, k8s.Update(context.Background(), d))
	}
	h.setReady(dep, ready)
	h.reconcile(md.Name)
	got := h.md(md.Name)
	require.Equal(h.t, mlv1.OutcomeSucceeded, got.Status.History[0].Outcome)
	require.Nil(h.t, got.Status.Rollout, "the first version set applies at once")
}

// replaceWith asks for version v2 (100 %) next to v1 (0 %).
func (h *harness) replaceWith(name, v2Path string) {
	h.t.Helper()
	h.update(name, func(md *mlv1.ModelDeployment) {
		md.Spec.Versions[0].Weight = ptr.To[int32](0)
		md.Spec.Versions = append(md.Spec.Versions, mlv1.ModelVersion{Name: "v2", Weight: ptr.To[int32](100), ModelPath: v2Path})
	})
}

// healthyCanary answers every preset query of a healthy server: 10 req/s,
// no errors, 20 ms.
func healthyCanary(q string) (float64, bool) {
	switch {
	case strings.Contains(q, `code=~"5.."`):
		return 0, true
	case strings.Contains(q, "http_request_duration_seconds"):
		return 20, true
	}
	return 10, true
}

// A good version moves 10 -> 50 -> 100 through its steps, each step's
// analysis passing one interval after its weight took effect, and is
// promoted; the HTTPRoute carries each step's weights.
func TestSteppedRolloutPromotes(t *testing.T) {
	h := newHarness(t)
	h.withPrometheus(healthyCanary)
	h.promoted(testutil.ModelDeployment("good", "").Router(mlv1.RouterGatewayAPI).AnalysisPreset(mlv1.AnalysisGeneric).AnalysisInterval("30s").
		Step(10, "", 1).Step(50, "", 1).Version("v1", -1, "s3://m/v1").Obj(), 1)

	h.replaceWith("good", "s3://m/v2")
	h.reconcile("good")
	md := h.md("good")
	require.NotNil(t, md.Status.Rollout)
	assert.Equal(t, mlv1.RolloutProgressing, md.Status.Rollout.Phase)
	assert.Equal(t, []string{"v2"}, md.Status.Rollout.Canaries)
	assert.Equal(t, []mlv1.VersionWeight{{Name: "v1", Weight: 100}}, md.Status.Rollout.Stable)
	assert.Equal(t, "step 0 (10%): waiting for a Ready pod of v2", md.Status.Rollout.Message)
	assert.Equal(t, map[string]int32{"good-v1": 100, "good-v2": 0}, h.routeWeights("good"), "no weight for a canary that is not Ready")

	h.setReady("good-v2", 1)
	h.reconcile("good")
	assert.Equal(t, map[string]int32{"good-v1": 90, "good-v2": 10}, h.routeWeights("good"))
	md = h.md("good")
	require.NotNil(t, md.Status.Rollout.StepStartTime)
	_, reason := condStatus(md, mlv1.ModelDeploymentProgressing)
	assert.Equal(t, mlv1.ReasonRolloutStep, reason)
	assert.Equal(t, mlv1.OutcomeProgressing, md.Status.History[0].Outcome)

	h.clock.Step(29 * time.Second)
	h.reconcile("good")
	assert.Empty(t, h.md("good").Status.Rollout.Analyses, "no analysis before one interval")

	h.clock.Step(time.Second)
	h.reconcile("good")
	md = h.md("good")
	assert.Equal(t, int32(1), md.Status.Rollout.Step)
	assert.Equal(t, int32(50), md.Status.Rollout.StepWeight)
	assert.Equal(t, map[string]int32{"good-v1": 50, "good-v2": 50}, h.routeWeights("good"))
	require.Len(t, md.Status.Rollout.Analyses, 1)
	assert.Equal(t, mlv1.AnalysisPassed, md.Status.Rollout.Analyses[0].Outcome)
	assert.True(t, hasEvent(h.events(), "Normal RolloutStep", "step 1: v1=50%, v2=50%"))

	h.clock.Step(30 * time.Second)
	h.reconcile("good")
	md = h.md("good")
	assert.Equal(t, mlv1.RolloutPromoted, md.Status.Rollout.Phase)
	assert.Equal(t, map[string]int32{"good-v1": 0, "good-v2": 100}, h.routeWeights("good"))
	assert.Equal(t, mlv1.OutcomeSucceeded, md.Status.History[0].Outcome)
	assert.Equal(t, "v1 100% -> 0%; v2 added at 100% (image example.com/server:latest, s3://m/v2)", md.Status.History[0].Change)
	assert.Len(t, md.Status.Rollout.Analyses, 2)
	assert.True(t, hasEvent(h.events(), "Normal Promoted", "v2=100%"))
	assert.Empty(t, md.Status.FailedVersions)
	// docs/modeldeployment.md quotes this output (go test -v -run TestSteppedRolloutPromotes).
	t.Logf("status.rollout:\n%s\nstatus.history:\n%s", yamlOf(t, md.Status.Rollout), yamlOf(t, md.Status.History))
}

func yamlOf(t *testing.T, v any) string {
	t.Helper()
	out, err := yaml.Marshal(v)
	require.NoError(t, err)
	return string(out)
}

// A version that answers 20 % errors fails its first analysis: the rollout
// is aborted, the traffic goes back to the stable version, and the failing
// query, value and threshold are in status and in a Warning event.
func TestSteppedRolloutAbortsOnFailedAnalysis(t *testing.T) {
	h := newHarness(t)
	h.withPrometheus(func(q string) (float64, bool) {
		if strings.Contains(q, `code=~"5.."`) && strings.Contains(q, `pod=~"bad-v2-`) {
			return 0.2, true
		}
		return healthyCanary(q)
	})
	h.promoted(testutil.ModelDeployment("bad", "").Router(mlv1.RouterGatewayAPI).AnalysisPreset(mlv1.AnalysisGeneric).MaxErrorRate(0.05).
		Step(10, "", 1).Step(50, "", 1).Version("v1", -1, "s3://m/v1").Obj(), 1)
	h.replaceWith("bad", "s3://m/v2")
	h.reconcile("bad")
	h.setReady("bad-v2", 1)
	h.reconcile("bad")
	assert.Equal(t, map[string]int32{"bad-v1": 90, "bad-v2": 10}, h.routeWeights("bad"))

	h.clock.Step(30 * time.Second) // the default interval
	h.reconcile("bad")
	md := h.md("bad")
	assert.Equal(t, map[string]int32{"bad-v1": 100, "bad-v2": 0}, h.routeWeights("bad"), "traffic back on stable")
	assert.Equal(t, map[string]int32{"v1": 100, "v2": 0}, activeWeights(md))
	require.NotNil(t, md.Status.Rollout)
	assert.Equal(t, mlv1.RolloutAborted, md.Status.Rollout.Phase)
	require.Len(t, md.Status.Rollout.Analyses, 1)
	a := md.Status.Rollout.Analyses[0]
	assert.Equal(t, mlv1.AnalysisFailed, a.Outcome)
	assert.Equal(t, mlv1.ReasonErrorRate, a.Metric)
	assert.Equal(t, "v2", a.Version)
	assert.Equal(t, "0.2", a.Value)
	assert.Equal(t, "0.05", a.Threshold)
	assert.Contains(t, a.Query, `code=~"5.."`)
	assert.Contains(t, a.Query, `pod=~"bad-v2-`)

	require.Len(t, md.Status.FailedVersions, 1)
	assert.Equal(t, mlv1.ReasonAnalysisFailed, md.Status.FailedVersions[0].Reason)
	assert.Contains(t, md.Status.FailedVersions[0].Message, "error rate 0.2 is above rollout.maxErrorRate 0.05 (query: "+a.Query+")")
	rolledBack, reason := condStatus(md, mlv1.ModelDeploymentRolledBack)
	assert.Equal(t, metav1.ConditionTrue, rolledBack)
	assert.Equal(t, mlv1.ReasonAnalysisFailed, reason)
	assert.Equal(t, mlv1.OutcomeRolledBack, md.Status.History[0].Outcome)
	evs := h.events()
	assert.True(t, hasEvent(evs, "Warning AnalysisFailed", "error rate 0.2 is above rollout.maxErrorRate 0.05 (query: "+a.Query+")"))
	assert.True(t, hasEvent(evs, "Warning RolledBack", "version v2 rolled back (AnalysisFailed)"))
	// docs/modeldeployment.md quotes this output (go test -v -run TestSteppedRolloutAbortsOnFailedAnalysis).
	t.Logf("status.rollout:\n%s\nstatus.failedVersions:\n%s\nevents:\n%s", yamlOf(t, md.Status.Rollout), yamlOf(t, md.Status.FailedVersions), strings.Join(evs, "\n"))

	// It stays aborted for this generation.
	h.clock.Step(time.Minute)
	h.reconcile("bad")
	assert.Equal(t, map[string]int32{"bad-v1": 100, "bad-v2": 0}, h.routeWeights("bad"))
}

// KServe #5983: a canary that is not Ready never gets weight, however long
// its steps wait, and the stable version keeps its full capacity until the
// new version is promoted and its own capacity is Ready (router service,
// where replica counts are the split).
func TestStableNeverShrinksFirst(t *testing.T) {
	h := newHarness(t)
	h.promoted(testutil.ModelDeployment("cap", "").Router(mlv1.RouterService).Replicas(2, 4).ProgressDeadline(3600).
		Step(50, "1m", 0).Version("v1", -1, "s3://m/v1").Obj(), 2)
	stableBounds := func() (int32, int32) {
		hpa := &autoscalingv2.HorizontalPodAutoscaler{}
		get(t, h.ns, "cap-v1", hpa)
		return *hpa.Spec.MinReplicas, hpa.Spec.MaxReplicas
	}
	lo, hi := stableBounds()
	require.Equal(t, [2]int32{2, 4}, [2]int32{lo, hi})

	h.replaceWith("cap", "s3://m/v2")
	for range 5 {
		h.reconcile("cap")
		md := h.md("cap")
		assert.Equal(t, map[string]int32{"v1": 100, "v2": 0}, activeWeights(md), "an unready canary gets no weight")
		lo, hi = stableBounds()
		assert.Equal(t, [2]int32{2, 4}, [2]int32{lo, hi}, "stable keeps its full capacity while the canary is not Ready")
		assert.Equal(t, int32(0), md.Status.Rollout.Step)
		h.clock.Step(2 * time.Minute)
	}
	hpa2 := &autoscalingv2.HorizontalPodAutoscaler{}
	get(t, h.ns, "cap-v2", hpa2)
	assert.Equal(t, int32(1), *hpa2.Spec.MinReplicas, "the canary is sized for its step (50 % of 2)")

	h.setReady("cap-v2", 1)
	h.reconcile("cap")
	assert.Equal(t, map[string]int32{"v1": 50, "v2": 50}, activeWeights(h.md("cap")))
	lo, hi = stableBounds()
	assert.Equal(t, [2]int32{2, 4}, [2]int32{lo, hi}, "stable keeps its capacity at 50 %")

	h.clock.Step(time.Minute)
	h.reconcile("cap")
	md := h.md("cap")
	assert.Equal(t, mlv1.RolloutPromoting, md.Status.Rollout.Phase)
	assert.Equal(t, "promoting: waiting for the new versions' own capacity: v2 1/2 Ready", md.Status.Rollout.Message)
	_, reason := condStatus(md, mlv1.ModelDeploymentProgressing)
	assert.Equal(t, mlv1.ReasonRolloutPromoting, reason)
	get(t, h.ns, "cap-v2", hpa2)
	assert.Equal(t, int32(2), *hpa2.Spec.MinReplicas, "the canary is sized for its own target")
	lo, hi = stableBounds()
	assert.Equal(t, [2]int32{2, 4}, [2]int32{lo, hi}, "stable keeps its capacity while the canary scales up")
	assert.Equal(t, map[string]int32{"v1": 50, "v2": 50}, activeWeights(md))

	// The HPA scales the canary to its minimum; once both pods are Ready it is promoted.
	d := h.deployment("cap-v2")
	d.Spec.Replicas = ptr.To[int32](2)
	require.NoError(t, k8s.Update(context.Background(), d))
	h.setReady("cap-v2", 2)
	h.reconcile("cap")
	md = h.md("cap")
	assert.Equal(t, mlv1.RolloutPromoted, md.Status.Rollout.Phase)
	assert.Equal(t, map[string]int32{"v1": 0, "v2": 100}, activeWeights(md))
	assert.True(t, gone(t, h.ns, "cap-v1", &autoscalingv2.HorizontalPodAutoscaler{}), "only now does stable give up its capacity")
	assert.Equal(t, int32(0), *h.deployment("cap-v1").Spec.Replicas)
}

// With traffic.canaryHeader, the HTTPRoute and the VirtualService the
// operator writes send requests with the header to the canary at any
// weight (0 here), once it is Ready.
func TestCanaryHeaderRoutes(t *testing.T) {
	for _, router := range []mlv1.TrafficRouter{mlv1.RouterGatewayAPI, mlv1.RouterIstio} {
		t.Run(string(router), func(t *testing.T) {
			h := newHarness(t)
			h.create(testutil.ModelDeployment("hdr", "").Router(router).CanaryHeader("X-Canary", "always").
				Version("v1", 100, "s3://m/v1").Version("v2", 0, "s3://m/v2").Obj())
			h.reconcile("hdr")
			h.setReady("hdr-v1", 1)
			h.reconcile("hdr")
			switch router {
			case mlv1.RouterGatewayAPI:
				route := &gwv1.HTTPRoute{}
				get(t, h.ns, "hdr", route)
				assert.Len(t, route.Spec.Rules, 1, "no header rule to a canary that is not Ready")
			case mlv1.RouterIstio:
				assert.Len(t, h.virtualServiceHTTP("hdr"), 1, "no header route to a canary that is not Ready")
			}

			h.setReady("hdr-v2", 1)
			h.reconcile("hdr")
			switch router {
			case mlv1.RouterGatewayAPI:
				route := &gwv1.HTTPRoute{}
				get(t, h.ns, "hdr", route)
				require.Len(t, route.Spec.Rules, 2)
				first := route.Spec.Rules[0]
				require.Len(t, first.Matches, 1)
				require.Len(t, first.Matches[0].Headers, 1)
				hm := first.Matches[0].Headers[0]
				assert.Equal(t, gwv1.HTTPHeaderName("X-Canary"), hm.Name)
				assert.Equal(t, "always", hm.Value)
				assert.Equal(t, gwv1.HeaderMatchExact, *hm.Type)
				require.Len(t, first.BackendRefs, 1)
				assert.Equal(t, gwv1.ObjectName("hdr-v2"), first.BackendRefs[0].Name)
				weights := map[string]int32{}
				for _, b := range route.Spec.Rules[1].BackendRefs {
					weights[string(b.Name)] = *b.Weight
				}
				assert.Equal(t, map[string]int32{"hdr-v1": 100, "hdr-v2": 0}, weights)
			case mlv1.RouterIstio:
				http := h.virtualServiceHTTP("hdr")
				require.Len(t, http, 2)
				first := http[0].(map[string]any)
				exact, _, _ := unstructured.NestedString(first["match"].([]any)[0].(map[string]any), "headers", "x-canary", "exact")
				assert.Equal(t, "always", exact)
				subset, _, _ := unstructured.NestedString(first["route"].([]any)[0].(map[string]any), "destination", "subset")
				assert.Equal(t, "v2", subset)
			}
		})
	}
}

// virtualServiceHTTP reads the VirtualService's http routes.
func (h *harness) virtualServiceHTTP(name string) []any {
	h.t.Helper()
	vs := &unstructured.Unstructured{}
	vs.SetAPIVersion("networking.istio.io/v1")
	vs.SetKind("VirtualService")
	get(h.t, h.ns, name, vs)
	http, _, _ := unstructured.NestedSlice(vs.Object, "spec", "http")
	return http
}

// rollout.rollbackTo serves an earlier version alone: at once by default,
// through the steps when asked; history records what changed.
func TestRollbackTo(t *testing.T) {
	for _, strategy := range []mlv1.RollbackStrategy{mlv1.RollbackImmediate, mlv1.RollbackSteps} {
		t.Run(string(strategy), func(t *testing.T) {
			h := newHarness(t)
			h.promoted(testutil.ModelDeployment("rb", "").Router(mlv1.RouterGatewayAPI).Version("v1", -1, "s3://m/v1").Obj(), 1)
			h.replaceWith("rb", "s3://m/v2")
			h.reconcile("rb")
			h.setReady("rb-v2", 1)
			h.reconcile("rb")
			require.Equal(t, map[string]int32{"rb-v1": 0, "rb-v2": 100}, h.routeWeights("rb"))

			h.update("rb", func(md *mlv1.ModelDeployment) {
				md.Spec.Rollout.Steps = []mlv1.RolloutStep{{Weight: 50, Pause: "1m"}}
				md.Spec.Rollout.RollbackTo = "v1"
				md.Spec.Rollout.RollbackStrategy = strategy
			})
			h.reconcile("rb")
			md := h.md("rb")
			assert.Equal(t, "v1 0% -> 100%; v2 100% -> 0%", md.Status.History[0].Change)
			if strategy == mlv1.RollbackSteps {
				assert.Equal(t, map[string]int32{"rb-v1": 50, "rb-v2": 50}, h.routeWeights("rb"), "through the steps")
				assert.Equal(t, []string{"v1"}, md.Status.Rollout.Canaries)
				h.clock.Step(time.Minute)
				h.reconcile("rb")
			}
			assert.Equal(t, map[string]int32{"rb-v1": 100, "rb-v2": 0}, h.routeWeights("rb"))
			assert.Equal(t, mlv1.OutcomeSucceeded, h.md("rb").Status.History[0].Outcome)
			assert.Equal(t, int32(100), *h.md("rb").Spec.Versions[1].Weight, "spec.versions is left alone")
		})
	}
}

// rollbackTo a version no longer in spec.versions serves it again as
// history recorded it.
func TestRollbackToARemovedVersion(t *testing.T) {
	h := newHarness(t)
	h.promoted(testutil.ModelDeployment("old", "").Router(mlv1.RouterGatewayAPI).Version("v1", -1, "s3://m/v1").Obj(), 1)
	h.update("old", func(md *mlv1.ModelDeployment) {
		md.Spec.Versions = []mlv1.ModelVersion{{Name: "v2", ModelPath: "s3://m/v2"}}
	})
	h.reconcile("old")
	h.setReady("old-v2", 1)
	h.reconcile("old")
	h.clock.Step(31 * time.Second)
	h.reconcile("old")
	require.True(t, gone(t, h.ns, "old-v1", &appsv1.Deployment{}), "v1 drained and deleted")

	h.update("old", func(md *mlv1.ModelDeployment) { md.Spec.Rollout.RollbackTo = "v1" })
	h.reconcile("old")
	d := h.deployment("old-v1")
	var uri string
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		if e.Name == mlv1.EnvModelURI {
			uri = e.Value
		}
	}
	assert.Equal(t, "s3://m/v1", uri, "rebuilt from history")
	h.setReady("old-v1", 1)
	h.reconcile("old")
	assert.Equal(t, map[string]int32{"old-v1": 100, "old-v2": 0}, h.routeWeights("old"))
}

// A kubectl user pauses, resumes, promotes and aborts a rollout with the
// ml.example.com/rollout annotation; promote and abort are removed once
// acted on.
func TestRolloutAnnotations(t *testing.T) {
	annotate := func(h *harness, name, value string) {
		h.update(name, func(md *mlv1.ModelDeployment) {
			if value == "" {
				delete(md.Annotations, mlv1.AnnotationRollout)
				return
			}
			if md.Annotations == nil {
				md.Annotations = map[string]string{}
			}
			md.Annotations[mlv1.AnnotationRollout] = value
		})
	}
	start := func(t *testing.T, name string) *harness {
		h := newHarness(t)
		h.promoted(testutil.ModelDeployment(name, "").Router(mlv1.RouterGatewayAPI).
			Step(10, "", 1).Step(50, "", 1).Version("v1", -1, "s3://m/v1").Obj(), 1)
		h.replaceWith(name, "s3://m/v2")
		h.reconcile(name)
		h.setReady(name+"-v2", 1)
		h.reconcile(name)
		return h
	}

	t.Run("pause, resume, promote", func(t *testing.T) {
		h := start(t, "ctl")
		annotate(h, "ctl", mlv1.RolloutActionPause)
		h.reconcile("ctl")
		md := h.md("ctl")
		assert.Equal(t, mlv1.RolloutPaused, md.Status.Rollout.Phase)
		_, reason := condStatus(md, mlv1.ModelDeploymentProgressing)
		assert.Equal(t, mlv1.ReasonRolloutPaused, reason)
		h.clock.Step(time.Minute)
		h.reconcile("ctl")
		assert.Empty(t, h.md("ctl").Status.Rollout.Analyses, "a paused rollout runs no analysis")
		assert.Equal(t, map[string]int32{"ctl-v1": 90, "ctl-v2": 10}, h.routeWeights("ctl"))

		annotate(h, "ctl", "")
		h.reconcile("ctl")
		md = h.md("ctl")
		assert.Equal(t, mlv1.RolloutProgressing, md.Status.Rollout.Phase)
		// This manager has no Prometheus: the analysis cannot judge, and
		// the step waits.
		require.Len(t, md.Status.Rollout.Analyses, 1)
		assert.Equal(t, mlv1.AnalysisInconclusive, md.Status.Rollout.Analyses[0].Outcome)
		assert.Contains(t, md.Status.Rollout.Analyses[0].Message, "no --prometheus-url")
		assert.Equal(t, int32(0), md.Status.Rollout.Step)

		annotate(h, "ctl", mlv1.RolloutActionPromote)
		h.reconcile("ctl")
		md = h.md("ctl")
		assert.Equal(t, mlv1.RolloutPromoted, md.Status.Rollout.Phase)
		assert.Equal(t, map[string]int32{"ctl-v1": 0, "ctl-v2": 100}, h.routeWeights("ctl"))
		assert.NotContains(t, md.Annotations, mlv1.AnnotationRollout, "promote is removed once acted on")
	})

	t.Run("abort", func(t *testing.T) {
		h := start(t, "stop")
		annotate(h, "stop", mlv1.RolloutActionAbort)
		h.reconcile("stop")
		md := h.md("stop")
		assert.Equal(t, mlv1.RolloutAborted, md.Status.Rollout.Phase)
		assert.Equal(t, map[string]int32{"stop-v1": 100, "stop-v2": 0}, h.routeWeights("stop"))
		require.Len(t, md.Status.FailedVersions, 1)
		assert.Equal(t, mlv1.ReasonRolloutAborted, md.Status.FailedVersions[0].Reason)
		assert.NotContains(t, md.Annotations, mlv1.AnnotationRollout, "abort is removed once acted on")
	})
}
