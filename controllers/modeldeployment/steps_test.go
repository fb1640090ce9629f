package modeldeployment

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1ac "sigs.k8s.io/gateway-api/applyconfiguration/apis/v1"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/internal/integrations/prometheus"
)

// A step mixes the stable set and the new one by its weight, always
// summing to 100.
func TestStepWeights(t *testing.T) {
	v1only := []versionWeight{{"v1", 100}}
	for _, tc := range []struct {
		name           string
		stable, target []versionWeight
		w              int32
		want           []versionWeight
	}{
		{"first step of a replacement", v1only, []versionWeight{{"v1", 0}, {"v2", 100}}, 10, []versionWeight{{"v1", 90}, {"v2", 10}}},
		{"half way", v1only, []versionWeight{{"v1", 0}, {"v2", 100}}, 50, []versionWeight{{"v1", 50}, {"v2", 50}}},
		{"weight 0 is the stable set", v1only, []versionWeight{{"v1", 0}, {"v2", 100}}, 0, []versionWeight{{"v1", 100}, {"v2", 0}}},
		{"weight 100 is the new set", v1only, []versionWeight{{"v1", 0}, {"v2", 100}}, 100, []versionWeight{{"v1", 0}, {"v2", 100}}},
		{"a weight change moves part of the way", []versionWeight{{"a", 80}, {"b", 20}}, []versionWeight{{"a", 20}, {"b", 80}}, 50, []versionWeight{{"a", 50}, {"b", 50}}},
		{"rounding still sums to 100", []versionWeight{{"a", 100}}, []versionWeight{{"a", 0}, {"b", 50}, {"c", 50}}, 33, []versionWeight{{"a", 67}, {"b", 17}, {"c", 16}}},
		{"nothing asked for", nil, []versionWeight{{"a", 0}}, 50, []versionWeight{{"a", 0}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, stepWeights(tc.stable, tc.target, tc.w), cmp.AllowUnexported(versionWeight{})); diff != "" {
				t.Errorf("stepWeights (-want +got):\n%s", diff)
			}
		})
	}
}

// The canaries are the versions the new set asks traffic of that the stable
// set gave none, or whose image, model or Secret changed.
func TestCanaryVersions(t *testing.T) {
	stable := []mlv1.VersionRecord{{Name: "v1", Weight: 100, Image: "s:1"}, {Name: "v2", Weight: 0, Image: "s:2"}}
	assert.Equal(t, []string{"v2"}, canaryVersions(stable, []mlv1.VersionRecord{{Name: "v1", Weight: 0, Image: "s:1"}, {Name: "v2", Weight: 100, Image: "s:2"}}))
	assert.Equal(t, []string{"v1"}, canaryVersions(stable, []mlv1.VersionRecord{{Name: "v1", Weight: 100, Image: "s:9"}}), "a new image in place")
	assert.Equal(t, []string{"v3"}, canaryVersions(stable, []mlv1.VersionRecord{{Name: "v1", Weight: 50, Image: "s:1"}, {Name: "v3", Weight: 50}}))
	assert.Empty(t, canaryVersions(stable, []mlv1.VersionRecord{{Name: "v1", Weight: 100, Image: "s:1"}, {Name: "v2", Weight: 0, Image: "s:9"}}),
		"a changed version asked for no traffic is not judged")
}

// A rollout starts for a new version set when an older set was promoted,
// carries over while the set stays, and restarts from its first step when
// a spec change retries an aborted one.
func TestStartRollout(t *testing.T) {
	steps := []mlv1.RolloutStep{{Weight: 10}, {Weight: 50}}
	promoted := mlv1.HistoryEntry{Generation: 1, Outcome: mlv1.OutcomeSucceeded, Versions: []mlv1.VersionRecord{{Name: "v1", Weight: 100}}}
	newSet := mlv1.HistoryEntry{Generation: 2, Outcome: mlv1.OutcomeProgressing,
		Versions: []mlv1.VersionRecord{{Name: "v1", Weight: 0}, {Name: "v2", Weight: 100}}}

	assert.Nil(t, startRollout(nil, []mlv1.HistoryEntry{newSet, promoted}, nil, false), "no steps, no rollout")
	assert.Nil(t, startRollout(nil, []mlv1.HistoryEntry{{Generation: 1, Outcome: mlv1.OutcomeProgressing}}, steps, false),
		"the first version set applies at once")

	got := startRollout(nil, []mlv1.HistoryEntry{newSet, promoted}, steps, false)
	want := &mlv1.RolloutStatus{Generation: 2, Phase: mlv1.RolloutProgressing, StepWeight: 10,
		Stable: []mlv1.VersionWeight{{Name: "v1", Weight: 100}}, Canaries: []string{"v2"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("a new set (-want +got):\n%s", diff)
	}

	at := got.DeepCopy()
	at.Step, at.Message = 1, "kept"
	kept := startRollout(at, []mlv1.HistoryEntry{newSet, promoted}, steps, false)
	assert.Equal(t, int32(1), kept.Step)
	assert.Equal(t, int32(50), kept.StepWeight, "the step's weight follows the spec's steps")

	aborted := got.DeepCopy()
	aborted.Phase, aborted.Step = mlv1.RolloutAborted, 1
	rolledBack := newSet
	rolledBack.Outcome = mlv1.OutcomeRolledBack
	assert.Equal(t, mlv1.RolloutAborted, startRollout(aborted, []mlv1.HistoryEntry{rolledBack, promoted}, steps, true).Phase,
		"aborted stays aborted for its generation")
	retry := startRollout(aborted, []mlv1.HistoryEntry{rolledBack, promoted}, steps, false)
	assert.Equal(t, mlv1.RolloutProgressing, retry.Phase, "a spec change retries")
	assert.Equal(t, int32(0), retry.Step)

	superseding := mlv1.HistoryEntry{Generation: 3, Outcome: mlv1.OutcomeProgressing, Versions: []mlv1.VersionRecord{{Name: "v1", Weight: 0}, {Name: "v3", Weight: 100}}}
	next := startRollout(at, []mlv1.HistoryEntry{superseding, {Generation: 2, Outcome: mlv1.OutcomeSuperseded}, promoted}, steps, false)
	assert.Equal(t, int64(3), next.Generation)
	assert.Equal(t, []mlv1.VersionWeight{{Name: "v1", Weight: 100}}, next.Stable, "the stable set is the last promoted one, not the superseded one")
	assert.Equal(t, []string{"v3"}, next.Canaries)

	back := mlv1.HistoryEntry{Generation: 4, Outcome: mlv1.OutcomeProgressing, Versions: []mlv1.VersionRecord{{Name: "v1", Weight: 100}}}
	assert.Nil(t, startRollout(next, []mlv1.HistoryEntry{back, {Generation: 3, Outcome: mlv1.OutcomeSuperseded}, promoted}, steps, false),
		"back to the promoted set: nothing new to judge, the weights apply at once")
}

// An analysis fails with the query, the value and the threshold; a version
// without requests cannot be judged.
func TestJudgeAnalysis(t *testing.T) {
	q := prometheus.Queries{RequestRate: "rps", ErrorRate: "errs", LatencyMs: "lat"}
	failed := judgeAnalysis("v2", q, prometheus.VersionMetrics{RequestsPerSecond: 5, ErrorRate: 0.2, HasErrorRate: true}, 0.05, nil)
	assert.Equal(t, mlv1.AnalysisResult{Outcome: mlv1.AnalysisFailed, Metric: mlv1.ReasonErrorRate, Query: "errs", Value: "0.2", Threshold: "0.05",
		Message: "version v2: error rate 0.2 is above rollout.maxErrorRate 0.05 (query: errs)"}, failed)

	slow := judgeAnalysis("v2", q, prometheus.VersionMetrics{RequestsPerSecond: 5, AverageLatencyMs: 812.5, HasLatency: true}, 0.05, ptr.To[int32](500))
	assert.Equal(t, mlv1.AnalysisFailed, slow.Outcome)
	assert.Equal(t, "lat", slow.Query)
	assert.Equal(t, "812.5", slow.Value)
	assert.Equal(t, "500", slow.Threshold)

	assert.Equal(t, mlv1.AnalysisInconclusive, judgeAnalysis("v2", q, prometheus.VersionMetrics{}, 0.05, nil).Outcome)
	assert.Equal(t, mlv1.AnalysisPassed, judgeAnalysis("v2", q, prometheus.VersionMetrics{RequestsPerSecond: 5, ErrorRate: 0.01, HasErrorRate: true}, 0.05, nil).Outcome)
	assert.Equal(t, mlv1.AnalysisPassed, judgeAnalysis("v2", q, prometheus.VersionMetrics{RequestsPerSecond: 5}, 0.05, nil).Outcome,
		"no error series yet is no errors")

	assert.Equal(t, mlv1.AnalysisFailed, outcome([]mlv1.AnalysisResult{{Outcome: mlv1.AnalysisPassed}, {Outcome: mlv1.AnalysisFailed}}))
	assert.Equal(t, mlv1.AnalysisInconclusive, outcome([]mlv1.AnalysisResult{{Outcome: mlv1.AnalysisPassed}, {Outcome: mlv1.AnalysisInconclusive}}))
	assert.Equal(t, mlv1.AnalysisInconclusive, outcome(nil), "no Ready canary judged is no pass")
	assert.Equal(t, mlv1.AnalysisPassed, outcome([]mlv1.AnalysisResult{{Outcome: mlv1.AnalysisPassed}}))
}

// With traffic.canaryHeader, the HTTPRoute's first rule matches the header
// and sends it to the canary alone; the weighted rule follows.
func TestDesiredHTTPRouteCanaryHeader(t *testing.T) {
	md := testMD()
	md.Spec.Traffic.CanaryHeader = &mlv1.CanaryHeader{Name: "X-Canary", Value: "always"}
	got := desiredHTTPRoute(md, nil, []versionWeight{{"v1", 100}, {"v2", 0}}, "v2")
	want := []gwv1ac.HTTPRouteRuleApplyConfiguration{
		*gwv1ac.HTTPRouteRule().
			WithMatches(gwv1ac.HTTPRouteMatch().WithHeaders(gwv1ac.HTTPHeaderMatch().WithType(gwv1.HeaderMatchExact).WithName("X-Canary").WithValue("always"))).
			WithBackendRefs(gwv1ac.HTTPBackendRef().WithName("fraud-v2").WithPort(9000).WithWeight(1)),
		*gwv1ac.HTTPRouteRule().WithBackendRefs(
			gwv1ac.HTTPBackendRef().WithName("fraud-v1").WithPort(9000).WithWeight(100),
			gwv1ac.HTTPBackendRef().WithName("fraud-v2").WithPort(9000).WithWeight(0),
		),
	}
	if diff := cmp.Diff(want, got.Spec.Rules); diff != "" {
		t.Errorf("rules (-want +got):\n%s", diff)
	}
	none := desiredHTTPRoute(md, nil, []versionWeight{{"v1", 100}, {"v2", 0}}, "")
	require.Len(t, none.Spec.Rules, 1, "no canary (not Ready): no header rule")
}

// The VirtualService's first http route matches the header (lower case, as
// Istio wants it) and goes to the canary's subset.
func TestDesiredVirtualServiceCanaryHeader(t *testing.T) {
	md := testMD()
	md.Spec.Traffic.CanaryHeader = &mlv1.CanaryHeader{Name: "X-Canary", Value: "always"}
	vs := desiredVirtualService(md, "v1", nil, []versionWeight{{"v1", 100}, {"v2", 0}}, "v2")
	want := []any{
		map[string]any{
			"match": []any{map[string]any{"headers": map[string]any{"x-canary": map[string]any{"exact": "always"}}}},
			"route": []any{map[string]any{"destination": map[string]any{"host": "fraud", "subset": "v2", "port": map[string]any{"number": int64(9000)}}}},
		},
		map[string]any{"route": []any{
			map[string]any{"destination": map[string]any{"host": "fraud", "subset": "v1", "port": map[string]any{"number": int64(9000)}}, "weight": int64(100)},
			map[string]any{"destination": map[string]any{"host": "fraud", "subset": "v2", "port": map[string]any{"number": int64(9000)}}, "weight": int64(0)},
		}},
	}
	if diff := cmp.Diff(want, vs.Object["spec"].(map[string]any)["http"]); diff != "" {
		t.Errorf("http (-want +got):\n%s", diff)
	}
}

// rollbackTo serves the named version alone; one no longer in the spec
// comes back as history recorded it.
func TestServedSpec(t *testing.T) {
	md := testMD()
	assert.Same(t, md, servedSpec(md), "no rollbackTo: the spec as it is")

	md.Spec.Rollout.RollbackTo = "v1"
	got := servedSpec(md)
	assert.Equal(t, map[string]int32{"v1": 100, "v2": 0}, got.Spec.RequestedWeights())
	assert.NotEqual(t, int32(100), *md.Spec.Versions[0].Weight, "the stored object is left alone")

	md.Spec.Rollout.RollbackTo = "v0"
	md.Status.History = []mlv1.HistoryEntry{
		{Generation: 2, Versions: []mlv1.VersionRecord{{Name: "v1", Weight: 100}}},
		{Generation: 1, Versions: []mlv1.VersionRecord{{Name: "v0", Weight: 100, Image: "s:0", ModelPath: "s3://m/v0", ModelSecretName: "creds"}}},
	}
	got = servedSpec(md)
	require.Len(t, got.Spec.Versions, 3)
	assert.Equal(t, mlv1.ModelVersion{Name: "v0", Weight: ptr.To[int32](100), Image: "s:0", ModelPath: "s3://m/v0", ModelSecretName: "creds"}, got.Spec.Versions[2])
	assert.Equal(t, map[string]int32{"v0": 100, "v1": 0, "v2": 0}, got.Spec.RequestedWeights())

	md.Spec.Rollout.RollbackTo = "nowhere"
	assert.Same(t, md, servedSpec(md), "a name known nowhere changes nothing")
}

// Each history entry says what changed.
func TestDescribeChange(t *testing.T) {
	v1 := mlv1.VersionRecord{Name: "v1", Weight: 100, Image: "s:1", ModelPath: "s3://m/v1"}
	assert.Equal(t, "created: v1 at 100% (image s:1, s3://m/v1)", describeChange(nil, []mlv1.VersionRecord{v1}))
	v1off := v1
	v1off.Weight = 0
	v2 := mlv1.VersionRecord{Name: "v2", Weight: 100, Image: "s:2"}
	assert.Equal(t, "v1 100% -> 0%; v2 added at 100% (image s:2)", describeChange([]mlv1.VersionRecord{v1}, []mlv1.VersionRecord{v1off, v2}))
	v1new := v1
	v1new.Image = "s:9"
	assert.Equal(t, "v1 image s:1 -> s:9; v2 removed", describeChange([]mlv1.VersionRecord{v1, v2}, []mlv1.VersionRecord{v1new}))
}

// The Progressing condition shows the rollout's step, pause or promotion.
func TestRolloutCondition(t *testing.T) {
	_, ok := rolloutCondition(nil, 3)
	assert.False(t, ok)
	_, ok = rolloutCondition(&mlv1.RolloutStatus{Phase: mlv1.RolloutPromoted}, 3)
	assert.False(t, ok, "a promoted rollout leaves Progressing to the versions")
	c, ok := rolloutCondition(&mlv1.RolloutStatus{Phase: mlv1.RolloutPaused, Message: "paused by annotation"}, 3)
	require.True(t, ok)
	assert.Equal(t, mlv1.ReasonRolloutPaused, c.Reason)
	assert.Equal(t, "paused by annotation", c.Message)
	assert.Equal(t, int64(3), c.ObservedGeneration)
	c, _ = rolloutCondition(&mlv1.RolloutStatus{Phase: mlv1.RolloutProgressing, Step: 1, StepWeight: 50}, 3)
	assert.Equal(t, mlv1.ReasonRolloutStep, c.Reason)
	assert.Equal(t, "step 1 (50%)", c.Message)
}
