package rules

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

var testImages = map[string]string{"pytorch": "torch:1", "tensorflow": "tf:1"}

func TestDefaultTrainingJobFillsWhatTheControllerUses(t *testing.T) {
	cases := []struct {
		name string
		spec mlv1.TrainingJobSpec
		want func(*mlv1.TrainingJobSpec)
	}{
		{"empty spec: one GPU worker", mlv1.TrainingJobSpec{}, func(s *mlv1.TrainingJobSpec) {}},
		{"four CPU workers", mlv1.TrainingJobSpec{NumWorkers: 4, GPUsPerWorker: ptr.To[int32](0)}, func(s *mlv1.TrainingJobSpec) {
			s.NumWorkers = 4
			s.GPUsPerWorker = ptr.To[int32](0)
			s.NProcPerNode = ptr.To[int32](1)
			s.Networking.Backend = mlv1.BackendGloo
		}},
		{"access modes as written", mlv1.TrainingJobSpec{NumWorkers: 2, Checkpoint: mlv1.CheckpointSpec{Storage: mlv1.CheckpointStorage{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}}}}, func(s *mlv1.TrainingJobSpec) {
			s.NumWorkers = 2
			s.Checkpoint.Storage.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}
		}},
		{"s3 checkpoints get no PVC settings", mlv1.TrainingJobSpec{Framework: mlv1.FrameworkTensorFlow,
			Checkpoint: mlv1.CheckpointSpec{Storage: mlv1.CheckpointStorage{Type: mlv1.StorageTypeS3, URI: "s3://b"}}},
			func(s *mlv1.TrainingJobSpec) {
				s.Framework = mlv1.FrameworkTensorFlow
				s.Image = "tf:1"
				s.Checkpoint.Storage = mlv1.CheckpointStorage{Type: mlv1.StorageTypeS3, URI: "s3://b"}
			}},
		{"jax has no default image here", mlv1.TrainingJobSpec{Framework: mlv1.FrameworkJAX}, func(s *mlv1.TrainingJobSpec) {
			s.Framework = mlv1.FrameworkJAX
			s.Image = ""
		}},
		{"data volume mounted at /data", mlv1.TrainingJobSpec{DataVolume: &mlv1.DataVolumeSpec{ClaimName: "d"}}, func(s *mlv1.TrainingJobSpec) {
			s.DataVolume = &mlv1.DataVolumeSpec{ClaimName: "d", MountPath: "/data"}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want := mlv1.TrainingJobSpec{
				Framework: mlv1.FrameworkPyTorch, Image: "torch:1", NumWorkers: 1,
				GPUsPerWorker: ptr.To[int32](1), GPUResourceName: "nvidia.com/gpu", NProcPerNode: ptr.To[int32](1),
				Checkpoint: mlv1.CheckpointSpec{
					Enabled: ptr.To(true), Frequency: 1, Path: "/checkpoints", RetainOnDelete: ptr.To(true), KeepLast: 3,
					// No accessModes: the controller chooses them from the
					// claim's StorageClass when it creates the claim.
					Storage: mlv1.CheckpointStorage{Type: mlv1.StorageTypePVC, Size: ptr.To(resource.MustParse("10Gi"))},
				},
				BackoffLimit: ptr.To[int32](3), RestartPolicy: mlv1.RestartPolicyOnFailure, Suspend: ptr.To(false),
				Networking: mlv1.NetworkingSpec{MasterPort: 29500, Backend: mlv1.BackendNCCL},
				RunPolicy:  mlv1.RunPolicy{CleanPodPolicy: mlv1.CleanPodPolicyRunning},
				Metrics:    mlv1.MetricsEndpointSpec{Port: 8000, Path: "/metrics"},
			}
			tc.want(&want)
			job := &mlv1.TrainingJob{Spec: tc.spec}
			DefaultTrainingJob(job, nil, testImages)
			assert.Empty(t, cmp.Diff(want, job.Spec))
		})
	}
}

// nprocPerNode and the backend were defaulted from gpusPerWorker; changing the
// GPUs of a suspended job moves them along, unless the user set them.
func TestDependentDefaultsFollowTheirSource(t *testing.T) {
	old := &mlv1.TrainingJob{Spec: mlv1.TrainingJobSpec{GPUsPerWorker: ptr.To[int32](2), Suspend: ptr.To(true)}}
	DefaultTrainingJob(old, nil, testImages)
	require.Equal(t, ptr.To[int32](2), old.Spec.NProcPerNode)

	job := old.DeepCopy()
	job.Spec.GPUsPerWorker = ptr.To[int32](0)
	DefaultTrainingJob(job, old, testImages)
	assert.Equal(t, ptr.To[int32](1), job.Spec.NProcPerNode)
	assert.Equal(t, mlv1.BackendGloo, job.Spec.Networking.Backend)

	job = old.DeepCopy()
	job.Spec.GPUsPerWorker = ptr.To[int32](4)
	job.Spec.NProcPerNode = ptr.To[int32](3)
	DefaultTrainingJob(job, old, testImages)
	assert.Equal(t, ptr.To[int32](3), job.Spec.NProcPerNode, "a value set in this update stays")

	assert.Empty(t, ValidateTrainingJob(old, job), "a suspended job may change its GPUs")
}

func TestValidateTrainingJobMessages(t *testing.T) {
	valid := defaultedJob
	cases := []struct {
		name   string
		mutate func(*mlv1.TrainingJob)
		want   []string
	}{
		{"valid", func(*mlv1.TrainingJob) {}, nil},
		// torchrun, JAX, MLflow and xgboost read every variable of their
		// prefix; the ones the operator does not set are the user's.
		{"launcher options the operator does not set", func(j *mlv1.TrainingJob) {
			j.Spec.Env = []corev1.EnvVar{{Name: "PET_REDIRECTS", Value: "3"}, {Name: "PET_TEE", Value: "3"},
				{Name: "PET_MAX_RESTARTS", Value: "2"}, {Name: "JAX_PLATFORMS", Value: "cpu"},
				{Name: "MLFLOW_TRACKING_TOKEN", Value: "t"}, {Name: "DMLC_INTERFACE", Value: "eth0"}}
		}, nil},
		{"several errors at once", func(j *mlv1.TrainingJob) {
			j.Spec.GPUsPerWorker = ptr.To[int32](9)
			j.Spec.Env = []corev1.EnvVar{{Name: "RANK", Value: "3"}, {Name: "PET_NNODES", Value: "1"}, {Name: "NCCL_DEBUG", Value: "INFO"}}
			j.Spec.Hyperparameters = map[string]mlv1.HyperparameterValue{
				"learningRate": mlv1.NewHyperparameter(0.1), "learningrate": mlv1.NewHyperparameter(0.2),
				"layers": {Raw: []byte(`[1,2]`)}, "drop-out": mlv1.NewHyperparameter(0.5)}
		}, []string{
			"spec.gpusPerWorker: Invalid value: 9: must be between 0 and 8",
			`spec.env[0].name: Invalid value: "RANK": is set by the operator and cannot be overridden`,
			`spec.env[1].name: Invalid value: "PET_NNODES": is set by the operator and cannot be overridden`,
			`spec.hyperparameters[drop-out]: Invalid value: "drop-out": must consist of letters, digits and '_', so that HYPERPARAM_DROP-OUT is a valid environment variable name`,
			`spec.hyperparameters[layers]: Invalid value: [1,2]: must be a string, number or boolean`,
			`spec.hyperparameters[learningrate]: Invalid value: "learningrate": exports the same variable, HYPERPARAM_LEARNINGRATE, as key "learningRate"`,
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			j := valid()
			tc.mutate(j)
			assert.Equal(t, tc.want, validationErrors(nil, j))
		})
	}
}

// A job stored with a problem (before a rule existed, or while the webhooks
// were down) still takes updates that add no problem of their own.
func TestValidationRatchetsOnUpdate(t *testing.T) {
	old := &mlv1.TrainingJob{ObjectMeta: metav1.ObjectMeta{Name: "legacy"}}
	old.Spec.Env = []corev1.EnvVar{{Name: "RANK", Value: "0"}}
	DefaultTrainingJob(old, nil, testImages)
	require.NotEmpty(t, ValidateTrainingJob(nil, old), "the stored job breaks a rule")

	relabelled := old.DeepCopy()
	relabelled.Labels = map[string]string{"team": "vision"}
	relabelled.Finalizers = nil
	assert.Empty(t, ValidateTrainingJob(old, relabelled))

	rescaled := old.DeepCopy()
	rescaled.Spec.NumWorkers = 4
	assert.Empty(t, ValidateTrainingJob(old, rescaled))

	worse := old.DeepCopy()
	worse.Spec.Suspend = ptr.To(true)
	old.Spec.Suspend = ptr.To(true)
	worse.Spec.Env = append(worse.Spec.Env, corev1.EnvVar{Name: "WORLD_SIZE", Value: "2"})
	assert.Equal(t, []string{`spec.env[1].name: Invalid value: "WORLD_SIZE": is set by the operator and cannot be overridden`}, validationErrors(old, worse))
}

// An update that leaves checkpoint.storage out, or only its defaulted
// fields, keeps the stored values; one that sets a different value is a
// change.
func TestUpdateKeepsStoredCheckpointStorage(t *testing.T) {
	old := &mlv1.TrainingJob{Spec: mlv1.TrainingJobSpec{NumWorkers: 2,
		Checkpoint: mlv1.CheckpointSpec{Storage: mlv1.CheckpointStorage{StorageClassName: ptr.To("fast")}}}}
	DefaultTrainingJob(old, nil, testImages)
	require.Equal(t, mlv1.StorageTypePVC, old.Spec.Checkpoint.Storage.Type)

	leftOut := &mlv1.TrainingJob{Spec: mlv1.TrainingJobSpec{NumWorkers: 5}}
	DefaultTrainingJob(leftOut, old, testImages)
	assert.Equal(t, old.Spec.Checkpoint.Storage, leftOut.Spec.Checkpoint.Storage)
	assert.Empty(t, TrainingJobProblems(old, leftOut, testImages))

	typeLeftOut := &mlv1.TrainingJob{Spec: mlv1.TrainingJobSpec{NumWorkers: 5,
		Checkpoint: mlv1.CheckpointSpec{Storage: mlv1.CheckpointStorage{StorageClassName: ptr.To("fast")}}}}
	DefaultTrainingJob(typeLeftOut, old, testImages)
	assert.Empty(t, TrainingJobProblems(old, typeLeftOut, testImages))

	changed := &mlv1.TrainingJob{Spec: mlv1.TrainingJobSpec{NumWorkers: 5,
		Checkpoint: mlv1.CheckpointSpec{Storage: mlv1.CheckpointStorage{StorageClassName: ptr.To("slow")}}}}
	DefaultTrainingJob(changed, old, testImages)
	assert.Equal(t, []string{"spec.checkpoint.storage: Forbidden: field is immutable"}, problemStrings(TrainingJobProblems(old, changed, testImages)))
}

// Defaulting fills only unset fields: an explicit out-of-range value is
// left as written, for validation to refuse, even where the Effective*
// helpers would read it as the default.
func TestDefaultingLeavesExplicitOutOfRangeValues(t *testing.T) {
	job := &mlv1.TrainingJob{ObjectMeta: metav1.ObjectMeta{Name: "j"}, Spec: mlv1.TrainingJobSpec{NumWorkers: -1, NProcPerNode: ptr.To[int32](0),
		Checkpoint: mlv1.CheckpointSpec{Frequency: -1, KeepLast: -3}}}
	DefaultTrainingJob(job, nil, testImages)
	assert.Equal(t, int32(-1), job.Spec.NumWorkers)
	assert.Equal(t, ptr.To[int32](0), job.Spec.NProcPerNode)
	assert.Equal(t, int32(-1), job.Spec.Checkpoint.Frequency)
	assert.Equal(t, int32(-3), job.Spec.Checkpoint.KeepLast)
	assert.Equal(t, []string{"spec.numWorkers: Invalid value: -1: must be between 1 and 100"},
		problemStrings(TrainingJobProblems(nil, job, testImages)))
}

// defaultedJob is a job named "job" as the defaulting webhook leaves it.
func defaultedJob() *mlv1.TrainingJob {
	j := &mlv1.TrainingJob{ObjectMeta: metav1.ObjectMeta{Name: "job"}}
	DefaultTrainingJob(j, nil, testImages)
	return j
}

// validationErrors is ValidateTrainingJob's answer as strings.
func validationErrors(old, job *mlv1.TrainingJob) []string {
	return problemStrings(ValidateTrainingJob(old, job))
}

// problemStrings is errs as strings, nil when there are none.
func problemStrings(errs field.ErrorList) []string {
	var got []string
	for _, e := range errs {
		got = append(got, e.Error())
	}
	return got
}

// assertRefusal checks that job is refused with exactly want, or accepted
// when want is "".
func assertRefusal(t *testing.T, job *mlv1.TrainingJob, want string, msg any) {
	t.Helper()
	got := validationErrors(nil, job)
	if want == "" {
		assert.Empty(t, got, msg)
	} else {
		assert.Equal(t, []string{want}, got, msg)
	}
}
