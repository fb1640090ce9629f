package rules

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

func TestDefaultModelDeploymentUsesTheHelpers(t *testing.T) {
	md := &mlv1.ModelDeployment{Spec: mlv1.ModelDeploymentSpec{
		Port:     9000,
		Versions: []mlv1.ModelVersion{{Name: "v1"}},
		Scaling:  mlv1.ScalingSpec{MinReplicas: 3},
	}}
	DefaultModelDeployment(md, nil)
	s := md.Spec
	assert.Equal(t, s.RequestedWeights()["v1"], *s.Versions[0].Weight)
	assert.Equal(t, ptr.To[int32](100), s.Versions[0].Weight)
	assert.Equal(t, ptr.To[int32](9000), s.HealthCheck.Port, "healthCheck.port defaults to spec.port")
	assert.Equal(t, ptr.To[int32](3), s.Scaling.MaxReplicas, "maxReplicas defaults to max(minReplicas, 1)")
	assert.Nil(t, s.Storage, "no storage unless asked for")

	two := &mlv1.ModelDeployment{Spec: mlv1.ModelDeploymentSpec{Versions: []mlv1.ModelVersion{{Name: "a"}, {Name: "b"}}}}
	DefaultModelDeployment(two, nil)
	assert.Nil(t, two.Spec.Versions[0].Weight, "with two versions an unset weight stays unset (0)")
}

func TestValidateModelDeploymentRatchetsAndKeepsImmutability(t *testing.T) {
	old := &mlv1.ModelDeployment{ObjectMeta: metav1.ObjectMeta{Name: "m"}, Spec: mlv1.ModelDeploymentSpec{
		ModelName: "m", Framework: mlv1.ModelFrameworkONNX,
		Versions: []mlv1.ModelVersion{{Name: "a", Weight: ptr.To[int32](60)}, {Name: "b", Weight: ptr.To[int32](30)}},
	}}
	DefaultModelDeployment(old, nil)
	md := old.DeepCopy()
	md.Labels = map[string]string{"x": "y"}
	assert.Empty(t, ValidateModelDeployment(old, md), "a stored weight problem does not block other updates")

	md.Spec.Versions[1].Weight = ptr.To[int32](20)
	md.Spec.Framework = mlv1.ModelFrameworkPyTorch
	var got []string
	for _, e := range ValidateModelDeployment(old, md) {
		got = append(got, e.Error())
	}
	assert.Equal(t, []string{
		"spec.versions: Invalid value: 80: version weights must sum to 100, got 80",
		`spec.framework: Invalid value: "pytorch": field is immutable`,
	}, got)
}

// Defaulting fills only unset fields: explicit non-positive health and
// rollout values are left for the CRD schema's minimum to refuse.
func TestModelDeploymentDefaultingLeavesExplicitOutOfRangeValues(t *testing.T) {
	md := &mlv1.ModelDeployment{Spec: mlv1.ModelDeploymentSpec{
		HealthCheck: mlv1.HealthCheckSpec{IntervalSeconds: -1, FailureThreshold: -1},
		Rollout:     mlv1.RolloutSpec{ProgressDeadlineSeconds: -5},
	}}
	DefaultModelDeployment(md, nil)
	assert.Equal(t, int32(-1), md.Spec.HealthCheck.IntervalSeconds)
	assert.Equal(t, int32(-1), md.Spec.HealthCheck.FailureThreshold)
	assert.Equal(t, int32(-5), md.Spec.Rollout.ProgressDeadlineSeconds)

	unset := &mlv1.ModelDeployment{}
	DefaultModelDeployment(unset, nil)
	assert.Equal(t, int32(30), unset.Spec.HealthCheck.IntervalSeconds)
	assert.Equal(t, int32(3), unset.Spec.HealthCheck.FailureThreshold)
	assert.Equal(t, int32(600), unset.Spec.Rollout.ProgressDeadlineSeconds)
}

// rollout.analysis: preset custom brings a request-rate query and one that
// judges; the window is a Prometheus duration. Each error names the field.
func TestValidateAnalysis(t *testing.T) {
	p := field.NewPath("spec", "rollout", "analysis")
	msgs := func(a *mlv1.AnalysisSpec) []string {
		var out []string
		for _, e := range validateAnalysis(a, p) {
			out = append(out, e.Error())
		}
		return out
	}
	assert.Empty(t, msgs(nil))
	assert.Empty(t, msgs(&mlv1.AnalysisSpec{Preset: mlv1.AnalysisTriton, Window: "5m"}))
	assert.Empty(t, msgs(&mlv1.AnalysisSpec{Preset: mlv1.AnalysisCustom,
		Queries: &mlv1.AnalysisQueries{RequestRate: "sum(rate(x[$window]))", LatencyMs: "vector(1)"}}))
	assert.Equal(t, []string{
		"spec.rollout.analysis.queries.requestRate: Required value: preset custom needs a request-rate query",
		"spec.rollout.analysis.queries: Required value: preset custom needs queries.errorRate or queries.latencyMs",
	}, msgs(&mlv1.AnalysisSpec{Preset: mlv1.AnalysisCustom}))
	assert.Equal(t, []string{
		`spec.rollout.analysis.window: Invalid value: "90": must be a duration such as 30s, 1m or 5m`,
	}, msgs(&mlv1.AnalysisSpec{Window: "90"}))
}

// A modelPath the storage initializer cannot fetch, or a credentials
// Secret it would not use, is refused naming the field path and the rule.
func TestValidateModelSource(t *testing.T) {
	p := field.NewPath("spec", "versions").Index(1)
	msgs := func(v mlv1.ModelVersion) []string {
		var out []string
		for _, e := range validateModelSource(v, p) {
			out = append(out, e.Error())
		}
		return out
	}
	for _, ok := range []mlv1.ModelVersion{
		{},
		{ModelPath: "pvc://models"},
		{ModelPath: "pvc://models/fraud/v1.json"},
		{ModelPath: "http://store.ns.svc/fraud-v1.json"},
		{ModelPath: "https://store.example.com/m?rev=2", ModelSecretName: "store-token"},
		{ModelPath: "s3://models/sentiment/v1/model.pt", ModelSecretName: "s3-credentials"},
		{ModelPath: "s3://models.eu-west-3/prefix/"},
	} {
		assert.Empty(t, msgs(ok), ok.ModelPath)
	}
	assert.Equal(t, []string{
		`spec.versions[1].modelPath: Invalid value: "hf://org/model": scheme hf:// is not supported: must be pvc://<claim>[/<path>], http(s)://<host>/<path> or s3://<bucket>[/<key>]`,
	}, msgs(mlv1.ModelVersion{ModelPath: "hf://org/model"}))
	assert.Equal(t, []string{
		`spec.versions[1].modelPath: Invalid value: "s3://ab/model": s3://<bucket>[/<key>]: "ab" is no S3 bucket name (3 to 63 lower-case letters, digits, dots and dashes)`,
	}, msgs(mlv1.ModelVersion{ModelPath: "s3://ab/model"}))
	assert.Equal(t, []string{
		`spec.versions[1].modelPath: Invalid value: "http:///model.json": http://<host>/<path>: the URL has no host`,
	}, msgs(mlv1.ModelVersion{ModelPath: "http:///model.json"}))
	assert.Equal(t, []string{
		`spec.versions[1].modelPath: Invalid value: "pvc://models/../etc": pvc://: the path may not contain ".."`,
	}, msgs(mlv1.ModelVersion{ModelPath: "pvc://models/../etc"}))
	assert.Equal(t, []string{
		`spec.versions[1].modelSecretName: Invalid value: "s3-credentials": needs a modelPath the storage initializer fetches (http://, https:// or s3://); a pvc:// claim is mounted, not fetched`,
	}, msgs(mlv1.ModelVersion{ModelPath: "pvc://models/m", ModelSecretName: "s3-credentials"}))
	assert.Len(t, msgs(mlv1.ModelVersion{ModelPath: "s3://models/m", ModelSecretName: "S3_Creds"}), 1)
}

// rollout.steps: each bad step is named by its index and field.
func TestValidateSteps(t *testing.T) {
	p := field.NewPath("spec", "rollout", "steps")
	msgs := func(steps ...mlv1.RolloutStep) []string {
		var out []string
		for _, e := range validateSteps(steps, p) {
			out = append(out, e.Error())
		}
		return out
	}
	assert.Empty(t, msgs(mlv1.RolloutStep{Weight: 10, Pause: "1m", Analysis: &mlv1.StepAnalysis{Checks: 2}}, mlv1.RolloutStep{Weight: 10}, mlv1.RolloutStep{Weight: 100}))
	assert.Equal(t, []string{
		"spec.rollout.steps[1].weight: Invalid value: 20: must be at least the weight of spec.rollout.steps[0] (50): a rollout never moves traffic back to the old versions",
		`spec.rollout.steps[1].pause: Invalid value: "90": must be a duration such as 30s, 5m or 1h`,
		"spec.rollout.steps[2].weight: Invalid value: 101: must be between 0 and 100",
		"spec.rollout.steps[2].analysis.checks: Invalid value: -1: must be at least 1",
	}, msgs(mlv1.RolloutStep{Weight: 50}, mlv1.RolloutStep{Weight: 20, Pause: "90"}, mlv1.RolloutStep{Weight: 101, Analysis: &mlv1.StepAnalysis{Checks: -1}}))
}

// traffic.canaryHeader needs an HTTP header name and a value.
func TestValidateCanaryHeader(t *testing.T) {
	p := field.NewPath("spec", "traffic", "canaryHeader")
	assert.Empty(t, validateCanaryHeader(nil, p))
	assert.Empty(t, validateCanaryHeader(&mlv1.CanaryHeader{Name: "X-Canary", Value: "always"}, p))
	var got []string
	for _, e := range validateCanaryHeader(&mlv1.CanaryHeader{Name: "X Canary"}, p) {
		got = append(got, e.Error())
	}
	assert.Equal(t, []string{
		`spec.traffic.canaryHeader.name: Invalid value: "X Canary": must be an HTTP header name (letters, digits and !#$%&'*+-.^_|~, at most 256)`,
		"spec.traffic.canaryHeader.value: Required value: the value requests must carry",
	}, got)
}

// rollout.rollbackTo names a version of the spec or of the stored history,
// and is only checked when it changes.
func TestValidateRollbackTo(t *testing.T) {
	old := &mlv1.ModelDeployment{ObjectMeta: metav1.ObjectMeta{Name: "m"}, Spec: mlv1.ModelDeploymentSpec{
		ModelName: "m", Framework: mlv1.ModelFrameworkONNX, Image: "s:1",
		Versions: []mlv1.ModelVersion{{Name: "v2"}},
	}}
	DefaultModelDeployment(old, nil)
	old.Status.History = []mlv1.HistoryEntry{{Versions: []mlv1.VersionRecord{{Name: "v2"}}}, {Versions: []mlv1.VersionRecord{{Name: "v1"}}}}

	md := old.DeepCopy()
	md.Spec.Rollout.RollbackTo = "v1"
	assert.Empty(t, ValidateModelDeployment(old, md), "a version from history")
	md.Spec.Rollout.RollbackTo = "v0"
	errs := ValidateModelDeployment(old, md)
	require.Len(t, errs, 1)
	assert.Equal(t, `spec.rollout.rollbackTo: Invalid value: "v0": must name a version of spec.versions or status.history: v1, v2`, errs[0].Error())

	created := old.DeepCopy()
	created.Spec.Rollout.RollbackTo = "v1"
	errs = ValidateModelDeployment(nil, created)
	require.Len(t, errs, 1, "on create there is no history yet")

	// Once set, history moving on never blocks other updates.
	stored := old.DeepCopy()
	stored.Spec.Rollout.RollbackTo = "v1"
	stored.Status.History = nil
	again := stored.DeepCopy()
	again.Labels = map[string]string{"a": "b"}
	assert.Empty(t, ValidateModelDeployment(stored, again))
}

// With steps, a version that still takes traffic cannot leave the spec
// (it would drain before the new one is promoted).
func TestServingVersionStaysDuringSteppedRollout(t *testing.T) {
	old := &mlv1.ModelDeployment{ObjectMeta: metav1.ObjectMeta{Name: "m"}, Spec: mlv1.ModelDeploymentSpec{
		ModelName: "m", Framework: mlv1.ModelFrameworkONNX, Image: "s:1",
		Versions: []mlv1.ModelVersion{{Name: "v1"}},
		Rollout:  mlv1.RolloutSpec{Steps: []mlv1.RolloutStep{{Weight: 10}}},
	}}
	DefaultModelDeployment(old, nil)
	old.Status.ActiveVersions = []mlv1.VersionStatus{{Name: "v1", Weight: 100}}
	md := old.DeepCopy()
	md.Spec.Versions = []mlv1.ModelVersion{{Name: "v2", Weight: ptr.To[int32](100)}}
	errs := ValidateModelDeployment(old, md)
	require.Len(t, errs, 1)
	assert.Equal(t, "spec.versions: Forbidden: version v1 still takes 100% of the traffic: with spec.rollout.steps keep it (at weight 0) until the new versions are promoted, then remove it", errs[0].Error())

	md.Spec.Versions = []mlv1.ModelVersion{{Name: "v1", Weight: ptr.To[int32](0)}, {Name: "v2", Weight: ptr.To[int32](100)}}
	assert.Empty(t, ValidateModelDeployment(old, md), "kept at weight 0")

	old.Status.ActiveVersions[0].Weight = 0
	md.Spec.Versions = []mlv1.ModelVersion{{Name: "v2", Weight: ptr.To[int32](100)}}
	assert.Empty(t, ValidateModelDeployment(old, md), "a version without traffic may go")

	old.Status.ActiveVersions[0].Weight = 100
	md.Spec.Rollout.Steps = nil
	assert.Empty(t, ValidateModelDeployment(old, md), "without steps, removal drains as before")
}
