package webhooks

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

// +kubebuilder:webhook:path=/mutate-ml-example-com-v1-modeldeployment,mutating=true,failurePolicy=fail,sideEffects=None,groups=ml.example.com,resources=modeldeployments,verbs=create;update,versions=v1,name=mmodeldeployment.ml.example.com,admissionReviewVersions=v1,matchPolicy=Equivalent
// +kubebuilder:webhook:path=/validate-ml-example-com-v1-modeldeployment,mutating=false,failurePolicy=fail,sideEffects=None,groups=ml.example.com,resources=modeldeployments,verbs=create;update,versions=v1,name=vmodeldeployment.ml.example.com,admissionReviewVersions=v1,matchPolicy=Equivalent

// ModelDeploymentWebhook defaults and validates ModelDeployments. Like
// TrainingJobWebhook, its defaulting webhook already refuses invalid objects,
// so users see these messages rather than the CRD schema's.
type ModelDeploymentWebhook struct{}

var (
	_ admission.Defaulter[*mlv1.ModelDeployment] = &ModelDeploymentWebhook{}
	_ admission.Validator[*mlv1.ModelDeployment] = &ModelDeploymentWebhook{}
)

var modelDeploymentKind = mlv1.GroupVersion.WithKind("ModelDeployment").GroupKind()

// Default fills every unset field with the value the controller would use,
// then refuses the object if it is invalid.
func (w *ModelDeploymentWebhook) Default(ctx context.Context, md *mlv1.ModelDeployment) error {
	old, err := oldObject[mlv1.ModelDeployment](ctx)
	if err != nil {
		return apierrors.NewBadRequest(err.Error())
	}
	zeros := explicitZeros(ctx, modelDeploymentZeroDefaulted)
	DefaultModelDeployment(md, old)
	return admitModelDeployment(old, md, zeros...)
}

// ValidateCreate refuses an invalid new ModelDeployment.
func (w *ModelDeploymentWebhook) ValidateCreate(_ context.Context, md *mlv1.ModelDeployment) (admission.Warnings, error) {
	return nil, admitModelDeployment(nil, md)
}

// ValidateUpdate refuses an invalid ModelDeployment and changes to immutable fields.
func (w *ModelDeploymentWebhook) ValidateUpdate(_ context.Context, old, md *mlv1.ModelDeployment) (admission.Warnings, error) {
	return nil, admitModelDeployment(old, md)
}

// ValidateDelete allows every delete.
func (w *ModelDeploymentWebhook) ValidateDelete(context.Context, *mlv1.ModelDeployment) (admission.Warnings, error) {
	return nil, nil
}

// admitModelDeployment refuses md if found (problems found before
// defaulting) or its validation against old has any problem.
func admitModelDeployment(old, md *mlv1.ModelDeployment, found ...*field.Error) error {
	if errs := append(field.ErrorList(found), validateModelDeployment(old, md)...); len(errs) > 0 {
		return apierrors.NewInvalid(modelDeploymentKind, md.Name, errs)
	}
	return nil
}

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

// validateModelDeployment returns everything wrong with md; old is the stored
// object on update and nil on create.
func validateModelDeployment(old, md *mlv1.ModelDeployment) field.ErrorList {
	spec := field.NewPath("spec")
	if old == nil {
		var errs field.ErrorList
		for _, msg := range validation.IsDNS1035Label(md.Name) {
			errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), md.Name,
				msg+" (it names the ModelDeployment's Service)"))
		}
		return append(errs, validateModelDeploymentSpec(md.Name, &md.Spec, spec)...)
	}
	errs := newProblems(validateModelDeploymentSpec(old.Name, &old.Spec, spec), validateModelDeploymentSpec(md.Name, &md.Spec, spec))
	if md.Spec.ModelName != old.Spec.ModelName {
		errs = append(errs, field.Invalid(spec.Child("modelName"), md.Spec.ModelName, "field is immutable"))
	}
	if md.Spec.Framework != old.Spec.Framework {
		errs = append(errs, field.Invalid(spec.Child("framework"), string(md.Spec.Framework), "field is immutable"))
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
