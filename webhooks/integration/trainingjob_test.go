package integration_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/test/testutil"
)

const whileSuspended = "Forbidden: may only change while the job is suspended (spec.suspend: true)"

// The fields API.md lets change only while suspended: refused on a running
// job with the full message, accepted on a suspended one, and accepted
// together with resuming it.
func TestSuspendedOnlyFields(t *testing.T) {
	ctx := context.Background()
	ns := testutil.Namespace(t, k8s)
	cases := []struct {
		field  string
		mutate func(*mlv1.TrainingJob)
	}{
		{"image", func(j *mlv1.TrainingJob) { j.Spec.Image = "example.com/trainer:v2" }},
		{"command", func(j *mlv1.TrainingJob) { j.Spec.Command = []string{"torchrun", "train.py"} }},
		{"args", func(j *mlv1.TrainingJob) { j.Spec.Args = []string{"--epochs=20"} }},
		{"env", func(j *mlv1.TrainingJob) { j.Spec.Env = []corev1.EnvVar{{Name: "NCCL_DEBUG", Value: "INFO"}} }},
		{"gpusPerWorker", func(j *mlv1.TrainingJob) { j.Spec.GPUsPerWorker = ptr.To[int32](2) }},
		{"nprocPerNode", func(j *mlv1.TrainingJob) { j.Spec.NProcPerNode = ptr.To[int32](2) }},
		{"resources", func(j *mlv1.TrainingJob) {
			j.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}
		}},
		{"scheduling", func(j *mlv1.TrainingJob) { j.Spec.Scheduling.NodeSelector = map[string]string{"pool": "a100"} }},
		{"template", func(j *mlv1.TrainingJob) { j.Spec.Template.ServiceAccountName = "trainer" }},
	}
	for i, tc := range cases {
		t.Run(tc.field, func(t *testing.T) {
			running := testutil.TrainingJob(fmt.Sprintf("running-%d", i), ns).Obj()
			require.NoError(t, k8s.Create(ctx, running))
			tc.mutate(running)
			requireInvalid(t, k8s.Update(ctx, running), tjDenial(running.Name, "spec."+tc.field+": "+whileSuspended))

			suspended := testutil.TrainingJob(fmt.Sprintf("suspended-%d", i), ns).Suspend(true).Obj()
			require.NoError(t, k8s.Create(ctx, suspended))
			tc.mutate(suspended)
			require.NoError(t, k8s.Update(ctx, suspended), "a suspended job may change %s", tc.field)

			resumed := testutil.TrainingJob(fmt.Sprintf("resumed-%d", i), ns).Suspend(true).Obj()
			require.NoError(t, k8s.Create(ctx, resumed))
			tc.mutate(resumed)
			resumed.Spec.Suspend = ptr.To(false)
			require.NoError(t, k8s.Update(ctx, resumed), "a suspended job may change %s and resume at once", tc.field)
		})
	}
}

func TestNeverMutableFields(t *testing.T) {
	ctx := context.Background()
	ns := testutil.Namespace(t, k8s)
	cases := []struct {
		name   string
		mutate func(*mlv1.TrainingJob)
		cause  string
	}{
		{"model", func(j *mlv1.TrainingJob) { j.Spec.Model = "bert" }, `spec.model: Invalid value: "bert": field is immutable`},
		{"dataset", func(j *mlv1.TrainingJob) { j.Spec.Dataset = "" }, `spec.dataset: Invalid value: "": field is immutable`},
		{"gpuResourceName", func(j *mlv1.TrainingJob) { j.Spec.GPUResourceName = "amd.com/gpu" },
			`spec.gpuResourceName: Invalid value: "amd.com/gpu": field is immutable`},
		{"checkpoint.storage", func(j *mlv1.TrainingJob) { j.Spec.Checkpoint.Storage.Size = ptr.To(resource.MustParse("20Gi")) },
			`spec.checkpoint.storage: Forbidden: field is immutable`},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Suspended, so that only the never-mutable rule can answer.
			job := testutil.TrainingJob(fmt.Sprintf("never-%d", i), ns).Model("resnet50").Dataset("imagenet").Suspend(true).Obj()
			require.NoError(t, k8s.Create(ctx, job))
			tc.mutate(job)
			requireInvalid(t, k8s.Update(ctx, job), tjDenial(job.Name, tc.cause))
		})
	}
}

func TestNumWorkersChangesAnyTime(t *testing.T) {
	ctx := context.Background()
	job := testutil.TrainingJob("rescale", testutil.Namespace(t, k8s)).Workers(2).Obj()
	job.Spec.Checkpoint.Storage.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}
	require.NoError(t, k8s.Create(ctx, job))
	job.Spec.NumWorkers = 8
	job.Spec.Checkpoint.Storage.AccessModes = nil
	require.NoError(t, k8s.Update(ctx, job))
	assert.Equal(t, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}, job.Spec.Checkpoint.Storage.AccessModes,
		"the checkpoint volume keeps the access mode it was created with")
}

// Resending the original manifest (kubectl replace, server-side apply)
// leaves out what the webhook defaulted; that is not a change.
func TestReplacingWithTheOriginalManifestIsNoChange(t *testing.T) {
	ctx := context.Background()
	ns := testutil.Namespace(t, k8s)
	manifest := &mlv1.TrainingJob{
		TypeMeta: testutil.TrainingJob("x", ns).TypeMeta,
	}
	manifest.Name, manifest.Namespace = "replaced", ns
	manifest.Spec.NumWorkers = 2
	require.NoError(t, k8s.Create(ctx, manifest.DeepCopy()))
	stored := &mlv1.TrainingJob{}
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(manifest), stored))
	require.Equal(t, images["pytorch"], stored.Spec.Image)

	again := manifest.DeepCopy()
	again.ResourceVersion = stored.ResourceVersion
	require.NoError(t, k8s.Update(ctx, again))
	assert.Equal(t, stored.Spec, again.Spec)
}

// A finished job accepts no spec change, but its metadata (labels,
// finalizers) still changes.
func TestFinishedJobsAcceptNoSpecChange(t *testing.T) {
	ctx := context.Background()
	ns := testutil.Namespace(t, k8s)
	for _, state := range []mlv1.TrainingJobState{mlv1.StateCompleted, mlv1.StateFailed} {
		t.Run(string(state), func(t *testing.T) {
			job := testutil.TrainingJob("finished-"+strings.ToLower(string(state)), ns).Suspend(true).Obj()
			require.NoError(t, k8s.Create(ctx, job))
			job.Status.State = state
			require.NoError(t, k8s.Status().Update(ctx, job))

			changed := job.DeepCopy()
			changed.Spec.NumWorkers = 4
			requireInvalid(t, k8s.Update(ctx, changed), tjDenial(job.Name,
				fmt.Sprintf("spec: Forbidden: the job has finished (%s) and accepts no spec change", state)))

			job.Labels = map[string]string{"team": "vision"}
			require.NoError(t, k8s.Update(ctx, job))
		})
	}
}

// The defaulting webhook writes what the controller computes.
func TestTrainingJobDefaults(t *testing.T) {
	ctx := context.Background()
	ns := testutil.Namespace(t, k8s)
	job := &mlv1.TrainingJob{TypeMeta: testutil.TrainingJob("x", ns).TypeMeta}
	job.Name, job.Namespace = "defaults", ns
	job.Spec.Framework = mlv1.FrameworkTensorFlow
	job.Spec.GPUsPerWorker = ptr.To[int32](4)
	job.Spec.DataVolume = &mlv1.DataVolumeSpec{ClaimName: "imagenet"}
	require.NoError(t, k8s.Create(ctx, job))
	got := &mlv1.TrainingJob{}
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(job), got))
	s := got.Spec
	assert.Equal(t, images["tensorflow"], s.Image)
	assert.Equal(t, ptr.To[int32](4), s.NProcPerNode, "nprocPerNode defaults to gpusPerWorker")
	assert.Equal(t, mlv1.BackendNCCL, s.Networking.Backend)
	assert.Empty(t, s.Checkpoint.Storage.AccessModes, "the controller chooses them from the claim's StorageClass")
	assert.Equal(t, "10Gi", s.Checkpoint.Storage.Size.String())
	assert.Equal(t, "/data", s.DataVolume.MountPath)
	assert.Equal(t, ptr.To(true), s.Checkpoint.RetainOnDelete)
	assert.Equal(t, int32(29500), s.Networking.MasterPort)
	assert.Equal(t, mlv1.CleanPodPolicyRunning, s.RunPolicy.CleanPodPolicy)

	// Suspend, drop to CPU: the dependent defaults follow.
	got.Spec.Suspend = ptr.To(true)
	require.NoError(t, k8s.Update(ctx, got))
	got.Spec.GPUsPerWorker = ptr.To[int32](0)
	require.NoError(t, k8s.Update(ctx, got))
	assert.Equal(t, ptr.To[int32](1), got.Spec.NProcPerNode)
	assert.Equal(t, mlv1.BackendGloo, got.Spec.Networking.Backend)
}
