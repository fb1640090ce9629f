package rules

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	mlv1alpha1 "github.com/ml-operator/ml-operator/api/v1alpha1"
)

// TrainingJobProblems is everything wrong with job, against the stored
// object old (nil on create). old is defaulted (with images) before the
// comparison, so that a default filled in now, for an object stored while
// the webhooks were away, never counts as a change.
func TrainingJobProblems(old, job *mlv1.TrainingJob, images map[string]string) field.ErrorList {
	var prev *mlv1.TrainingJob
	if old != nil {
		prev = old.DeepCopy()
		DefaultTrainingJob(prev, old, images)
	}
	return ValidateTrainingJob(prev, job)
}

// v1alpha1Detail rewrites the v1 field paths a message mentions into the
// v1alpha1 names of the conversion's rename table.
var v1alpha1Detail = func() *strings.Replacer {
	var pairs []string
	for _, n := range mlv1alpha1.SpecFieldRenames() {
		pairs = append(pairs, n.V1, n.V1Alpha1)
	}
	return strings.NewReplacer(pairs...)
}()

// InV1alpha1Terms rewrites the field paths of errs (and the paths their
// messages mention) from v1 to v1alpha1 names, for the refusal of a request
// made in v1alpha1: a user who wrote `workers: 101` reads `spec.workers`.
func InV1alpha1Terms(errs field.ErrorList) field.ErrorList {
	out := make(field.ErrorList, 0, len(errs))
	for _, e := range errs {
		c := *e
		for _, n := range mlv1alpha1.SpecFieldRenames() {
			if rest, ok := strings.CutPrefix(c.Field, n.V1); ok && (rest == "" || rest[0] == '.' || rest[0] == '[') {
				c.Field = n.V1Alpha1 + rest
				break
			}
		}
		c.Detail = v1alpha1Detail.Replace(c.Detail)
		out = append(out, &c)
	}
	return out
}

// DefaultTrainingJob fills the unset fields of job with the values the
// controller uses for them (the api/v1 Effective* helpers). old is the stored
// object on update and nil on create. It is idempotent.
//
// Defaults that depend on other fields (nprocPerNode and networking.backend
// on gpusPerWorker) follow those fields on update while they still hold the
// value they were defaulted to. checkpoint.storage is immutable, so its
// defaults are written on create only; an update that leaves them (or the
// image) out keeps the stored values, so `kubectl replace` and server-side
// apply of the original manifest are not mistaken for changes.
func DefaultTrainingJob(job, old *mlv1.TrainingJob, images map[string]string) {
	s := &job.Spec
	if old != nil {
		followDependentDefaults(&old.Spec, s)
		keepStoredValues(&old.Spec, s)
	}

	s.Framework = s.EffectiveFramework()
	s.Image = s.EffectiveImage(images)
	// Only unset fields (zero, nil) are filled: an explicit out-of-range
	// value, such as numWorkers: -1, is left for validation to refuse,
	// although the Effective* helpers would read it as the default.
	if s.NumWorkers == 0 {
		s.NumWorkers = s.EffectiveNumWorkers()
	}
	s.GPUsPerWorker = ptr.To(s.EffectiveGPUs())
	s.GPUResourceName = string(s.EffectiveGPUResourceName())
	if s.NProcPerNode == nil {
		s.NProcPerNode = ptr.To(s.EffectiveNProcPerNode())
	}

	cp := &s.Checkpoint
	cp.Enabled = ptr.To(s.CheckpointEnabled())
	if cp.Frequency == 0 {
		cp.Frequency = s.EffectiveCheckpointFrequency()
	}
	cp.Path = s.EffectiveCheckpointPath()
	cp.RetainOnDelete = ptr.To(s.RetainCheckpoints())
	if cp.KeepLast == 0 {
		cp.KeepLast = s.EffectiveCheckpointKeepLast()
	}
	if old == nil {
		cp.Storage.Type = s.EffectiveCheckpointStorageType()
		if cp.Storage.Type == mlv1.StorageTypePVC && cp.Storage.ExistingClaim == "" {
			if cp.Storage.Size == nil {
				cp.Storage.Size = ptr.To(resource.MustParse(mlv1.DefaultCheckpointSize))
			}
			// accessModes stay unset unless given: the controller
			// chooses them from the claim's StorageClass when it creates
			// the claim (mlv1.TrainingJobSpec.CheckpointAccessModes).
		}
	}
	if s.DataVolume != nil {
		s.DataVolume.MountPath = s.DataVolume.EffectiveDataMountPath()
	}

	s.BackoffLimit = ptr.To(s.EffectiveBackoffLimit())
	s.RestartPolicy = s.EffectiveRestartPolicy()
	s.Suspend = ptr.To(s.IsSuspended())
	s.Networking.MasterPort = s.EffectiveMasterPort()
	s.Networking.Backend = s.EffectiveBackend()
	s.RunPolicy.CleanPodPolicy = s.EffectiveCleanPodPolicy()
	s.Metrics.Port = s.EffectiveMetricsPort()
	s.Metrics.Path = s.EffectiveMetricsPath()
}

// followDependentDefaults clears, for recomputation from the new spec, each
// dependent default that still holds, unchanged by this update, the value it
// was defaulted to from old.
func followDependentDefaults(old, s *mlv1.TrainingJobSpec) {
	bare := old.DeepCopy()
	bare.NProcPerNode = nil
	bare.Networking.Backend = ""
	// nprocPerNode only follows on a suspended job: on a running one the
	// gpusPerWorker change is refused anyway, and a second error about a
	// field the user did not touch would only confuse.
	if old.IsSuspended() && old.NProcPerNode != nil && ptr.Equal(old.NProcPerNode, s.NProcPerNode) &&
		*old.NProcPerNode == bare.EffectiveNProcPerNode() {
		s.NProcPerNode = nil
	}
	if old.Networking.Backend != "" && old.Networking.Backend == s.Networking.Backend &&
		old.Networking.Backend == bare.EffectiveBackend() {
		s.Networking.Backend = ""
	}
}

// keepStoredValues fills what an update leaves out of the image and
// checkpoint.storage from the stored spec: both were defaulted at creation
// from settings that may have changed since (the admin's default images,
// numWorkers).
//
// An update without any checkpoint.storage keeps the stored one whole: a
// v1alpha1 object replaced without the v1-spec annotation (kubectl replace)
// cannot carry it, and the API server does not apply the v1 schema's
// defaults (type pvc) to the object converted for this webhook. Otherwise
// each defaulted field (type, size, accessModes) left out keeps its stored
// value.
func keepStoredValues(old, s *mlv1.TrainingJobSpec) {
	if s.Image == "" {
		s.Image = old.Image
	}
	st, ost := &s.Checkpoint.Storage, &old.Checkpoint.Storage
	if equality.Semantic.DeepEqual(*st, mlv1.CheckpointStorage{}) {
		ost.DeepCopyInto(st)
		return
	}
	if st.Type == "" {
		st.Type = ost.Type
	}
	if st.Size == nil && ost.Size != nil {
		st.Size = ptr.To(ost.Size.DeepCopy())
	}
	if len(st.AccessModes) == 0 {
		st.AccessModes = slices.Clone(ost.AccessModes)
	}
}

// hyperparameterKey is a key whose mlv1.HyperparameterEnvName is a valid
// environment variable name.
var hyperparameterKey = regexp.MustCompile(`^[A-Za-z0-9_]+$`)

// ValidateTrainingJob returns everything wrong with job; old is the stored
// object (already defaulted) on update and nil on create.
func ValidateTrainingJob(old, job *mlv1.TrainingJob) field.ErrorList {
	spec := field.NewPath("spec")
	if old != nil && old.Status.State.IsFinished() && !equality.Semantic.DeepEqual(old.Spec, job.Spec) {
		return field.ErrorList{field.Forbidden(spec, fmt.Sprintf(
			"the job has finished (%s) and accepts no spec change", old.Status.State))}
	}

	if old == nil {
		return append(validateTrainingJobName(job.Name), validateTrainingJobSpec(&job.Spec, spec)...)
	}
	errs := newProblems(validateTrainingJobSpec(&old.Spec, spec), validateTrainingJobSpec(&job.Spec, spec))
	return append(errs, validateTrainingJobUpdate(&old.Spec, &job.Spec, spec)...)
}

// newProblems ratchets validation on update: it drops from errs every error
// the stored object already had. An object stored before a rule existed (or
// while the webhooks were down) can then still get its labels and
// finalizers changed, and be deleted; only an update that brings a problem
// of its own is refused.
func newProblems(old, errs field.ErrorList) field.ErrorList {
	had := make(map[string]bool, len(old))
	for _, e := range old {
		had[e.Error()] = true
	}
	var out field.ErrorList
	for _, e := range errs {
		if !had[e.Error()] {
			out = append(out, e)
		}
	}
	return out
}

func validateTrainingJobName(name string) field.ErrorList {
	p := field.NewPath("metadata", "name")
	if len(name) > mlv1.MaxNameLength {
		return field.ErrorList{field.Invalid(p, name, fmt.Sprintf(
			"must be at most %d characters, so that every child name (%s, %s, ...) is a valid DNS label",
			mlv1.MaxNameLength, mlv1.WorkerPodName("<name>", 99), mlv1.WorkersServiceName("<name>")))}
	}
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1035Label(name) {
		errs = append(errs, field.Invalid(p, name, msg+" (it names the job's Service "+mlv1.WorkersServiceName(name)+")"))
	}
	return errs
}

func validateTrainingJobSpec(s *mlv1.TrainingJobSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.Image == "" {
		errs = append(errs, field.Required(p.Child("image"), fmt.Sprintf(
			"no image is given and no default image is configured for framework %q", s.EffectiveFramework())))
	}
	if n := s.NumWorkers; n < mlv1.MinNumWorkers || n > mlv1.MaxNumWorkers {
		errs = append(errs, field.Invalid(p.Child("numWorkers"), n, fmt.Sprintf("must be between %d and %d", mlv1.MinNumWorkers, mlv1.MaxNumWorkers)))
	}
	gpus := s.EffectiveGPUs()
	if gpus < 0 || gpus > mlv1.MaxGPUsPerWorker {
		errs = append(errs, field.Invalid(p.Child("gpusPerWorker"), gpus, fmt.Sprintf("must be between 0 and %d", mlv1.MaxGPUsPerWorker)))
	}
	errs = append(errs, validateGPUResources(s, p.Child("resources"))...)
	for i, e := range s.Env {
		if s.ReservesEnvName(e.Name) {
			errs = append(errs, field.Invalid(p.Child("env").Index(i).Child("name"), e.Name,
				"is set by the operator and cannot be overridden"))
		}
	}
	errs = append(errs, validateHyperparameters(s.Hyperparameters, p.Child("hyperparameters"))...)
	errs = append(errs, validateCheckpointStorage(&s.Checkpoint.Storage, p.Child("checkpoint", "storage"))...)
	if s.DataVolume != nil && s.DataVolume.ClaimName == "" {
		errs = append(errs, field.Required(p.Child("dataVolume", "claimName"), "the PersistentVolumeClaim with the training data"))
	}
	if s.ParameterServers > 0 && s.EffectiveFramework() != mlv1.FrameworkTensorFlow {
		errs = append(errs, field.Invalid(p.Child("parameterServers"), s.ParameterServers,
			"only supported with framework tensorflow"))
	}
	errs = append(errs, s.ValidateElastic(p)...)
	if err := validatePlacementTimeout(s.Scheduling.PlacementTimeout, p.Child("scheduling", "placementTimeout")); err != nil {
		errs = append(errs, err)
	}
	if s.FailurePolicy != nil {
		errs = append(errs, validateFailurePolicy(s.FailurePolicy, p.Child("failurePolicy"))...)
	}
	if g := s.Template.TerminationGracePeriodSeconds; g != nil && (*g < 0 || *g > mlv1.MaxTerminationGracePeriodSeconds) {
		errs = append(errs, field.Invalid(p.Child("template", "terminationGracePeriodSeconds"), *g,
			fmt.Sprintf("must be between 0 and %d", mlv1.MaxTerminationGracePeriodSeconds)))
	}
	return errs
}

// validateFailurePolicy refuses a stall timeout that is neither 0s (off)
// nor within mlv1.MinStallTimeout..MaxStallTimeout, and an unknown stall
// action.
func validateFailurePolicy(fp *mlv1.FailurePolicy, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if t := fp.StallTimeout; t != nil && t.Duration != 0 && (t.Duration < mlv1.MinStallTimeout || t.Duration > mlv1.MaxStallTimeout) {
		errs = append(errs, field.Invalid(p.Child("stallTimeout"), t.Duration.String(), fmt.Sprintf("must be 0s (off) or between %s and %s",
			shortDuration(mlv1.MinStallTimeout), shortDuration(mlv1.MaxStallTimeout))))
	}
	switch fp.StallAction {
	case "", mlv1.StallActionRestart, mlv1.StallActionRestartUncounted, mlv1.StallActionFail:
	default:
		errs = append(errs, field.NotSupported(p.Child("stallAction"), fp.StallAction,
			[]mlv1.StallAction{mlv1.StallActionRestart, mlv1.StallActionRestartUncounted, mlv1.StallActionFail}))
	}
	return errs
}

// validatePlacementTimeout refuses a placement timeout that is neither 0s
// (never) nor within mlv1.MinPlacementTimeout..MaxPlacementTimeout.
func validatePlacementTimeout(t *metav1.Duration, p *field.Path) *field.Error {
	if t == nil || t.Duration == 0 || (t.Duration >= mlv1.MinPlacementTimeout && t.Duration <= mlv1.MaxPlacementTimeout) {
		return nil
	}
	return field.Invalid(p, t.Duration.String(), fmt.Sprintf("must be 0s (never) or between %s and %s",
		shortDuration(mlv1.MinPlacementTimeout), shortDuration(mlv1.MaxPlacementTimeout)))
}

// shortDuration writes whole minutes and hours without their zero parts
// ("24h", not "24h0m0s"), as the CRD's CEL message does.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// validateGPUResources refuses GPU entries in resources that disagree with
// gpusPerWorker: the operator sets requests = limits = gpusPerWorker of
// gpuResourceName itself.
func validateGPUResources(s *mlv1.TrainingJobSpec, p *field.Path) field.ErrorList {
	gpuName := s.EffectiveGPUResourceName()
	gpus := s.EffectiveGPUs()
	var errs field.ErrorList
	for _, list := range []struct {
		name string
		rl   corev1.ResourceList
	}{{"limits", s.Resources.Limits}, {"requests", s.Resources.Requests}} {
		for _, name := range sortedResourceNames(list.rl) {
			q := list.rl[name]
			fp := p.Child(list.name).Key(string(name))
			switch {
			case name == gpuName && q.Cmp(*resource.NewQuantity(int64(gpus), resource.DecimalSI)) != 0:
				errs = append(errs, field.Invalid(fp, q.String(), fmt.Sprintf(
					"must equal spec.gpusPerWorker (%d), or be left out: the operator sets it", gpus)))
			case name != gpuName && strings.HasSuffix(string(name), "/gpu"):
				errs = append(errs, field.Invalid(fp, q.String(), fmt.Sprintf(
					"GPUs are requested with spec.gpusPerWorker of spec.gpuResourceName (%s)", gpuName)))
			}
		}
	}
	return errs
}

func sortedResourceNames(rl corev1.ResourceList) []corev1.ResourceName {
	names := make([]corev1.ResourceName, 0, len(rl))
	for n := range rl {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// validateHyperparameters refuses values that are not scalars (the CRD cannot
// check this), keys that do not form an environment variable name, or form
// the same one as another key, and maps past the worker contract's bounds
// (mlv1.MaxHyperparameters and the byte limits).
func validateHyperparameters(hp map[string]mlv1.HyperparameterValue, p *field.Path) field.ErrorList {
	keys := make([]string, 0, len(hp))
	for k := range hp {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var errs field.ErrorList
	if len(hp) > mlv1.MaxHyperparameters {
		errs = append(errs, field.TooMany(p, len(hp), mlv1.MaxHyperparameters))
	}
	total := 0
	for _, k := range keys {
		total += len(k) + len(hp[k].Raw)
	}
	if total > mlv1.MaxHyperparametersBytes {
		errs = append(errs, field.TooLong(p, "", mlv1.MaxHyperparametersBytes))
	}
	seen := map[string]string{}
	for _, k := range keys {
		if n := len(hp[k].Raw); n > mlv1.MaxHyperparameterValueBytes {
			errs = append(errs, field.TooLong(p.Key(k), "", mlv1.MaxHyperparameterValueBytes))
		}
		fp := p.Key(k)
		env := mlv1.HyperparameterEnvName(k)
		switch {
		case !hyperparameterKey.MatchString(k):
			errs = append(errs, field.Invalid(fp, k, fmt.Sprintf(
				"must consist of letters, digits and '_', so that %s is a valid environment variable name", env)))
		case seen[env] != "":
			errs = append(errs, field.Invalid(fp, k, fmt.Sprintf(
				"exports the same variable, %s, as key %q", env, seen[env])))
		default:
			seen[env] = k
		}
		if v := hp[k]; !v.IsScalar() {
			errs = append(errs, field.Invalid(fp, rawValue(v.Raw), "must be a string, number or boolean"))
		}
	}
	return errs
}

// rawValue prints as the JSON it holds in an error message.
func rawValue(raw []byte) any {
	if !json.Valid(raw) {
		return string(raw)
	}
	return json.RawMessage(raw)
}

var storageURIScheme = map[mlv1.StorageType]string{mlv1.StorageTypeS3: "s3://", mlv1.StorageTypeGCS: "gs://"}

func validateCheckpointStorage(st *mlv1.CheckpointStorage, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if err := validatePositiveSize(st.Size, p.Child("size")); err != nil {
		errs = append(errs, err)
	}
	scheme, ok := storageURIScheme[st.Type]
	switch {
	case !ok:
	case st.URI == "":
		errs = append(errs, field.Required(p.Child("uri"), fmt.Sprintf("required when spec.checkpoint.storage.type is %s", st.Type)))
	case !strings.HasPrefix(st.URI, scheme) || len(st.URI) == len(scheme):
		errs = append(errs, field.Invalid(p.Child("uri"), st.URI, fmt.Sprintf(
			"must be %s<bucket>[/<prefix>] when spec.checkpoint.storage.type is %s", scheme, st.Type)))
	}
	return errs
}

// validatePositiveSize refuses a storage size of zero or less, which no
// volume can be provisioned with.
func validatePositiveSize(q *resource.Quantity, p *field.Path) *field.Error {
	if q == nil || q.Sign() > 0 {
		return nil
	}
	return field.Invalid(p, q.String(), "must be greater than zero")
}

// validateTrainingJobUpdate applies API.md's immutability table; old is defaulted.
func validateTrainingJobUpdate(old, s *mlv1.TrainingJobSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	immutable := func(name string, o, n any) {
		if !equality.Semantic.DeepEqual(o, n) {
			errs = append(errs, field.Invalid(p.Child(name), n, "field is immutable"))
		}
	}
	immutable("framework", old.Framework, s.Framework)
	immutable("model", old.Model, s.Model)
	immutable("dataset", old.Dataset, s.Dataset)
	immutable("gpuResourceName", old.GPUResourceName, s.GPUResourceName)
	if !equality.Semantic.DeepEqual(old.Checkpoint.Storage, s.Checkpoint.Storage) {
		errs = append(errs, field.Forbidden(p.Child("checkpoint", "storage"), "field is immutable"))
	}

	if old.IsSuspended() {
		return errs
	}
	// Suspended jobs may be tuned (by Kueue or an admin) and resumed in the
	// same update, so it is the stored object's suspend that counts.
	for _, f := range []struct {
		name     string
		old, new any
	}{
		{"image", old.Image, s.Image},
		{"command", old.Command, s.Command},
		{"args", old.Args, s.Args},
		{"env", old.Env, s.Env},
		{"gpusPerWorker", old.GPUsPerWorker, s.GPUsPerWorker},
		{"nprocPerNode", old.NProcPerNode, s.NProcPerNode},
		{"elastic", old.Elastic, s.Elastic},
		{"resources", old.Resources, s.Resources},
		// placementTimeout may change at any time: it only bounds a wait.
		{"scheduling", withoutPlacementTimeout(old.Scheduling), withoutPlacementTimeout(s.Scheduling)},
		{"template", old.Template, s.Template},
	} {
		if !equality.Semantic.DeepEqual(f.old, f.new) {
			errs = append(errs, field.Forbidden(p.Child(f.name), "may only change while the job is suspended (spec.suspend: true)"))
		}
	}
	return errs
}

// withoutPlacementTimeout is a scheduling spec without its placementTimeout,
// the one scheduling field that may change while the job runs.
func withoutPlacementTimeout(s mlv1.SchedulingSpec) mlv1.SchedulingSpec {
	s.PlacementTimeout = nil
	return s
}
