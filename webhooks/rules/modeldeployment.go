package rules

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

// DefaultModelDeployment fills the unset fields of md with the values the
// controller uses for them (the api/v1 helpers). old is the stored object on
// update and nil on create. It is idempotent.
//
// healthCheck.port (from spec.port) and scaling.maxReplicas (from
// minReplicas) follow their source on update while they still hold the value
// they were defaulted to.
func DefaultModelDeployment(md, old *mlv1.ModelDeployment) {
	s := &md.Spec
	if old != nil {
		o := &old.Spec
		bare := o.DeepCopy()
		bare.HealthCheck.Port = nil
		bare.Scaling.MaxReplicas = nil
		if o.HealthCheck.Port != nil && ptr.Equal(o.HealthCheck.Port, s.HealthCheck.Port) &&
			*o.HealthCheck.Port == bare.EffectiveHealthPort() {
			s.HealthCheck.Port = nil
		}
		if o.Scaling.MaxReplicas != nil && ptr.Equal(o.Scaling.MaxReplicas, s.Scaling.MaxReplicas) &&
			*o.Scaling.MaxReplicas == bare.EffectiveMaxReplicas() {
			s.Scaling.MaxReplicas = nil
		}
	}

	s.Port = s.EffectivePort()
	if len(s.Versions) == 1 && s.Versions[0].Weight == nil {
		s.Versions[0].Weight = ptr.To(s.RequestedWeights()[s.Versions[0].Name])
	}

	if s.Scaling.MinReplicas == 0 {
		s.Scaling.MinReplicas = 1
	}
	s.Scaling.MaxReplicas = ptr.To(s.EffectiveMaxReplicas())
	if s.Scaling.TargetCPUUtilization == 0 {
		s.Scaling.TargetCPUUtilization = s.EffectiveTargetCPUUtilization()
	}

	hc := &s.HealthCheck
	hc.Endpoint = s.EffectiveHealthEndpoint()
	hc.Port = ptr.To(s.EffectiveHealthPort())
	// Only unset (zero) values are filled: an explicit non-positive one is
	// left for the CRD schema's minimum to refuse, although the Effective*
	// helpers would read it as the default.
	if hc.IntervalSeconds == 0 {
		hc.IntervalSeconds = s.EffectiveIntervalSeconds()
	}
	if hc.TimeoutSeconds == 0 {
		hc.TimeoutSeconds = s.EffectiveHealthTimeoutSeconds()
	}
	if hc.FailureThreshold == 0 {
		hc.FailureThreshold = s.EffectiveFailureThreshold()
	}

	if s.Traffic.Router == "" {
		s.Traffic.Router = mlv1.RouterAuto
	}
	s.Rollout.AutoRollback = ptr.To(s.AutoRollback())
	s.Rollout.MaxErrorRate = ptr.To(s.EffectiveMaxErrorRate())
	if s.Rollout.ProgressDeadlineSeconds == 0 {
		s.Rollout.ProgressDeadlineSeconds = s.EffectiveProgressDeadlineSeconds()
	}
	s.Rollout.RollbackStrategy = s.EffectiveRollbackStrategy()
	for i := range s.Rollout.Steps {
		if a := s.Rollout.Steps[i].Analysis; a != nil && a.Checks == 0 {
			a.Checks = s.Rollout.Steps[i].EffectiveChecks()
		}
	}

	if st := s.Storage; st != nil {
		if st.Size == nil {
			st.Size = ptr.To(resource.MustParse(mlv1.DefaultModelCacheSize))
		}
		st.RetainOnDelete = ptr.To(s.RetainStorage())
	}
}

// Bounds checked here; the CRD schema repeats them for clusters without the webhooks.
const (
	MaxVersions = 10
	MaxWeight   = 100
)

// MaxConfigBytes bounds spec.config's values together: they become the data
// of one ConfigMap, which the API server refuses past 1 MiB.
const MaxConfigBytes = 1024 * 1024

// validateServerConfig refuses what the API server would refuse in the
// ConfigMap spec.config becomes (keys that are no ConfigMap keys, over 1 MiB
// of data), so the user sees it now, not as a controller error later.
func validateServerConfig(config map[string]string, p *field.Path) field.ErrorList {
	keys := make([]string, 0, len(config))
	for k := range config {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var errs field.ErrorList
	total := 0
	for _, k := range keys {
		total += len(config[k])
		for _, msg := range validation.IsConfigMapKey(k) {
			errs = append(errs, field.Invalid(p.Key(k), k, msg))
		}
	}
	if total > MaxConfigBytes {
		errs = append(errs, field.TooLong(p, "", MaxConfigBytes))
	}
	return errs
}

// ValidateModelDeployment returns everything wrong with md; old is the stored
// object on update and nil on create.
func ValidateModelDeployment(old, md *mlv1.ModelDeployment) field.ErrorList {
	spec := field.NewPath("spec")
	if old == nil {
		var errs field.ErrorList
		for _, msg := range validation.IsDNS1035Label(md.Name) {
			errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), md.Name,
				msg+" (it names the ModelDeployment's Service)"))
		}
		errs = append(errs, validateModelDeploymentSpec(md.Name, &md.Spec, spec)...)
		return append(errs, validateRollbackTo(md.Spec.Rollout.RollbackTo, md.Spec.Versions, nil, spec.Child("rollout", "rollbackTo"))...)
	}
	errs := newProblems(validateModelDeploymentSpec(old.Name, &old.Spec, spec), validateModelDeploymentSpec(md.Name, &md.Spec, spec))
	if md.Spec.ModelName != old.Spec.ModelName {
		errs = append(errs, field.Invalid(spec.Child("modelName"), md.Spec.ModelName, "field is immutable"))
	}
	if md.Spec.Framework != old.Spec.Framework {
		errs = append(errs, field.Invalid(spec.Child("framework"), string(md.Spec.Framework), "field is immutable"))
	}
	errs = append(errs, validateServingRemoval(old, md, spec.Child("versions"))...)
	if md.Spec.Rollout.RollbackTo != old.Spec.Rollout.RollbackTo {
		errs = append(errs, validateRollbackTo(md.Spec.Rollout.RollbackTo, md.Spec.Versions, old.Status.History, spec.Child("rollout", "rollbackTo"))...)
	}
	return errs
}

func validateModelDeploymentSpec(name string, s *mlv1.ModelDeploymentSpec, spec *field.Path) field.ErrorList {
	errs := validateVersions(name, s, spec.Child("versions"))

	sc := spec.Child("scaling")
	if s.Scaling.MinReplicas < 1 {
		errs = append(errs, field.Invalid(sc.Child("minReplicas"), s.Scaling.MinReplicas, "must be at least 1"))
	}
	if maxR := s.EffectiveMaxReplicas(); maxR < 1 {
		errs = append(errs, field.Invalid(sc.Child("maxReplicas"), maxR, "must be at least 1"))
	} else if s.Scaling.MinReplicas > maxR {
		errs = append(errs, field.Invalid(sc.Child("minReplicas"), s.Scaling.MinReplicas, fmt.Sprintf(
			"must be less than or equal to spec.scaling.maxReplicas (%d)", maxR)))
	}
	if t := s.Scaling.TargetCPUUtilization; t != 0 && (t < 1 || t > 100) {
		errs = append(errs, field.Invalid(sc.Child("targetCPUUtilization"), t, "must be between 1 and 100"))
	}

	if s.Storage != nil {
		if err := validatePositiveSize(s.Storage.Size, spec.Child("storage", "size")); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, validateServerConfig(s.Config, spec.Child("config"))...)

	errs = append(errs, validateAnalysis(s.Rollout.Analysis, spec.Child("rollout", "analysis"))...)
	errs = append(errs, validateSteps(s.Rollout.Steps, spec.Child("rollout", "steps"))...)
	errs = append(errs, validateCanaryHeader(s.Traffic.CanaryHeader, spec.Child("traffic", "canaryHeader"))...)

	timeout := s.EffectiveHealthTimeoutSeconds()
	if interval := s.EffectiveIntervalSeconds(); timeout >= interval {
		errs = append(errs, field.Invalid(spec.Child("healthCheck", "timeoutSeconds"), timeout, fmt.Sprintf(
			"must be less than spec.healthCheck.intervalSeconds (%d)", interval)))
	}
	return errs
}

func validateVersions(name string, s *mlv1.ModelDeploymentSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch n := len(s.Versions); {
	case n == 0:
		return field.ErrorList{field.Required(p, fmt.Sprintf("between 1 and %d versions are required", MaxVersions))}
	case n > MaxVersions:
		errs = append(errs, field.TooMany(p, n, MaxVersions))
	}
	seen := map[string]bool{}
	for i, v := range s.Versions {
		vp := p.Index(i)
		for _, msg := range validation.IsDNS1123Label(v.Name) {
			errs = append(errs, field.Invalid(vp.Child("name"), v.Name, msg))
		}
		if seen[v.Name] {
			errs = append(errs, field.Duplicate(vp.Child("name"), v.Name))
		}
		seen[v.Name] = true
		if child := mlv1.VersionResourceName(name, v.Name); len(child) > validation.DNS1035LabelMaxLength {
			errs = append(errs, field.Invalid(vp.Child("name"), v.Name, fmt.Sprintf(
				"makes the child name %q longer than %d characters", child, validation.DNS1035LabelMaxLength)))
		}
		if v.Weight != nil && (*v.Weight < 0 || *v.Weight > MaxWeight) {
			errs = append(errs, field.Invalid(vp.Child("weight"), *v.Weight, fmt.Sprintf("must be between 0 and %d", MaxWeight)))
		}
		errs = append(errs, validateModelSource(v, vp)...)
	}
	var sum int32
	for _, w := range s.RequestedWeights() {
		sum += w
	}
	if sum != 100 && len(seen) == len(s.Versions) {
		errs = append(errs, field.Invalid(p, sum, fmt.Sprintf("version weights must sum to 100, got %d", sum)))
	}
	return errs
}

// validateModelSource refuses a modelPath the storage initializer cannot
// fetch (or a pvc:// that names no claim), and a modelSecretName with no
// fetched modelPath to use it for. The CRD schema repeats the scheme rule
// and the secret rule.
func validateModelSource(v mlv1.ModelVersion, vp *field.Path) field.ErrorList {
	var errs field.ErrorList
	var src mlv1.ModelSource
	if v.ModelPath != "" {
		var err error
		if src, err = mlv1.ParseModelPath(v.ModelPath); err != nil {
			errs = append(errs, field.Invalid(vp.Child("modelPath"), v.ModelPath, err.Error()))
		}
	}
	if v.ModelSecretName == "" {
		return errs
	}
	for _, msg := range validation.IsDNS1123Subdomain(v.ModelSecretName) {
		errs = append(errs, field.Invalid(vp.Child("modelSecretName"), v.ModelSecretName, msg))
	}
	if v.ModelPath == "" || strings.HasPrefix(v.ModelPath, "pvc://") || (src.Scheme != "" && !src.Fetched()) {
		errs = append(errs, field.Invalid(vp.Child("modelSecretName"), v.ModelSecretName,
			"needs a modelPath the storage initializer fetches (http://, https:// or s3://); a pvc:// claim is mounted, not fetched"))
	}
	return errs
}

// analysisWindow is a Prometheus duration in whole seconds, minutes or hours.
var analysisWindow = regexp.MustCompile(`^[1-9][0-9]*(s|m|h)$`)

// validateAnalysis checks rollout.analysis: preset custom brings its own
// request-rate query and at least one judging query, and the window is a
// Prometheus duration. The CRD schema repeats both rules.
func validateAnalysis(a *mlv1.AnalysisSpec, p *field.Path) field.ErrorList {
	if a == nil {
		return nil
	}
	var errs field.ErrorList
	if a.Window != "" && !analysisWindow.MatchString(a.Window) {
		errs = append(errs, field.Invalid(p.Child("window"), a.Window, "must be a duration such as 30s, 1m or 5m"))
	}
	if a.Interval != "" && !analysisWindow.MatchString(a.Interval) {
		errs = append(errs, field.Invalid(p.Child("interval"), a.Interval, "must be a duration such as 30s, 1m or 5m"))
	}
	if a.Preset != mlv1.AnalysisCustom {
		return errs
	}
	q := a.Queries
	if q == nil {
		q = &mlv1.AnalysisQueries{}
	}
	qp := p.Child("queries")
	if strings.TrimSpace(q.RequestRate) == "" {
		errs = append(errs, field.Required(qp.Child("requestRate"), "preset custom needs a request-rate query"))
	}
	if strings.TrimSpace(q.ErrorRate) == "" && strings.TrimSpace(q.LatencyMs) == "" {
		errs = append(errs, field.Required(qp, "preset custom needs queries.errorRate or queries.latencyMs"))
	}
	return errs
}

// MaxSteps bounds rollout.steps; the CRD schema repeats it.
const MaxSteps = 20

// validateSteps checks rollout.steps one by one, naming the bad step: a
// weight in 0..100 that never goes down from the step before, a pause that
// is a duration, and at least one analysis check. The CRD schema repeats
// the bounds and the pause pattern; the order of the weights is checked
// here only.
func validateSteps(steps []mlv1.RolloutStep, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(steps) > MaxSteps {
		errs = append(errs, field.TooMany(p, len(steps), MaxSteps))
	}
	for i, st := range steps {
		sp := p.Index(i)
		switch {
		case st.Weight < 0 || st.Weight > MaxWeight:
			errs = append(errs, field.Invalid(sp.Child("weight"), st.Weight, fmt.Sprintf("must be between 0 and %d", MaxWeight)))
		case i > 0 && st.Weight < steps[i-1].Weight:
			errs = append(errs, field.Invalid(sp.Child("weight"), st.Weight, fmt.Sprintf(
				"must be at least the weight of spec.rollout.steps[%d] (%d): a rollout never moves traffic back to the old versions", i-1, steps[i-1].Weight)))
		}
		if st.Pause != "" && !analysisWindow.MatchString(st.Pause) {
			errs = append(errs, field.Invalid(sp.Child("pause"), st.Pause, "must be a duration such as 30s, 5m or 1h"))
		}
		if a := st.Analysis; a != nil && a.Checks < 0 {
			errs = append(errs, field.Invalid(sp.Child("analysis", "checks"), a.Checks, "must be at least 1"))
		}
	}
	return errs
}

// headerName is an HTTP header name (RFC 9110 token), as the Gateway API
// spells it.
var headerName = regexp.MustCompile(`^[A-Za-z0-9!#$%&'*+\-.^_|~]+$`)

// validateCanaryHeader checks traffic.canaryHeader: a header name and a
// non-empty value. The CRD schema repeats both.
func validateCanaryHeader(h *mlv1.CanaryHeader, p *field.Path) field.ErrorList {
	if h == nil {
		return nil
	}
	var errs field.ErrorList
	switch {
	case h.Name == "":
		errs = append(errs, field.Required(p.Child("name"), "the header name"))
	case len(h.Name) > 256 || !headerName.MatchString(h.Name):
		errs = append(errs, field.Invalid(p.Child("name"), h.Name, "must be an HTTP header name (letters, digits and !#$%&'*+-.^_|~, at most 256)"))
	}
	switch {
	case h.Value == "":
		errs = append(errs, field.Required(p.Child("value"), "the value requests must carry"))
	case len(h.Value) > 4096:
		errs = append(errs, field.TooLong(p.Child("value"), "", 4096))
	}
	return errs
}

// validateRollbackTo checks that rollout.rollbackTo names a version of
// spec.versions or of status.history (history is the stored status; nil
// on create). It is checked when it is set or changed, so history moving on
// never blocks other updates.
func validateRollbackTo(name string, versions []mlv1.ModelVersion, history []mlv1.HistoryEntry, p *field.Path) field.ErrorList {
	if name == "" {
		return nil
	}
	known := map[string]bool{}
	for _, v := range versions {
		known[v.Name] = true
	}
	for _, h := range history {
		for _, v := range h.Versions {
			known[v.Name] = true
		}
	}
	if known[name] {
		return nil
	}
	names := make([]string, 0, len(known))
	for n := range known {
		names = append(names, n)
	}
	slices.Sort(names)
	return field.ErrorList{field.Invalid(p, name, "must name a version of spec.versions or status.history: "+strings.Join(names, ", "))}
}

// validateServingRemoval refuses, when rollout.steps is set, an update that
// removes from spec.versions a version the stored status shows taking
// traffic: a removed version drains at once, so the old version would give
// up its traffic and capacity before the new one is promoted.
func validateServingRemoval(old, md *mlv1.ModelDeployment, p *field.Path) field.ErrorList {
	if len(md.Spec.Rollout.Steps) == 0 {
		return nil
	}
	in := func(vs []mlv1.ModelVersion, name string) bool {
		return slices.ContainsFunc(vs, func(v mlv1.ModelVersion) bool { return v.Name == name })
	}
	var errs field.ErrorList
	for _, v := range old.Status.ActiveVersions {
		if v.Weight > 0 && in(old.Spec.Versions, v.Name) && !in(md.Spec.Versions, v.Name) {
			errs = append(errs, field.Forbidden(p, fmt.Sprintf(
				"version %s still takes %d%% of the traffic: with spec.rollout.steps keep it (at weight 0) until the new versions are promoted, then remove it", v.Name, v.Weight)))
		}
	}
	return errs
}
