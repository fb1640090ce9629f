package trainingjob_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	mlv1alpha1 "github.com/ml-operator/ml-operator/api/v1alpha1"
	"github.com/ml-operator/ml-operator/test/testutil"
)

// storageClass creates a cluster-scoped StorageClass for the test.
func storageClass(t *testing.T, name, provisioner string, annotations map[string]string) {
	t.Helper()
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations}, Provisioner: provisioner}
	require.NoError(t, env.Client.Create(ctx, sc))
	t.Cleanup(func() { _ = env.Client.Delete(ctx, sc) })
}

// checkpointClaim reads a job's checkpoint PVC.
func checkpointClaim(t *testing.T, job *mlv1.TrainingJob) *corev1.PersistentVolumeClaim {
	t.Helper()
	pvc := &corev1.PersistentVolumeClaim{}
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Namespace: job.Namespace, Name: mlv1.CheckpointPVCName(job.Name)}, pvc))
	return pvc
}

// onRankZerosNode reports whether the pod requires rank 0's node.
func onRankZerosNode(p *corev1.Pod) bool {
	if p.Spec.Affinity == nil || p.Spec.Affinity.PodAffinity == nil {
		return false
	}
	for _, term := range p.Spec.Affinity.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
		if term.TopologyKey == corev1.LabelHostname && term.LabelSelector != nil &&
			term.LabelSelector.MatchLabels[mlv1.LabelRank] == "0" &&
			term.LabelSelector.MatchLabels[mlv1.LabelTrainingJob] == p.Labels[mlv1.LabelTrainingJob] &&
			term.LabelSelector.MatchLabels[mlv1.LabelRestartAttempt] == p.Labels[mlv1.LabelRestartAttempt] {
			return true
		}
	}
	return false
}

// A job that sets no access modes gets a checkpoint claim its StorageClass
// can give: ReadWriteMany from a shared file system's class (or one the
// admin marked), else ReadWriteOnce with every rank on rank 0's node, so
// the job runs on clusters whose only storage is block storage (kind's
// local-path, GCE PD). A job's own modes are kept as written.
func TestCheckpointClaimFollowsItsStorageClass(t *testing.T) {
	storageClass(t, "ckpt-nfs", "nfs.csi.k8s.io", nil)
	storageClass(t, "ckpt-pd", "pd.csi.storage.gke.io", nil)
	storageClass(t, "ckpt-marked", "example.com/shared", map[string]string{mlv1.AnnotationReadWriteMany: "true"})
	rwo := []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	rwx := []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}
	for _, tc := range []struct {
		name, class string
		workers     int32
		modes       []corev1.PersistentVolumeAccessMode
		want        []corev1.PersistentVolumeAccessMode
		shareNode   bool
	}{
		{name: "nfs", class: "ckpt-nfs", workers: 3, want: rwx},
		{name: "marked", class: "ckpt-marked", workers: 2, want: rwx},
		{name: "pd", class: "ckpt-pd", workers: 3, want: rwo, shareNode: true},
		{name: "missing", class: "no-such-class", workers: 2, want: rwo, shareNode: true},
		{name: "single", class: "ckpt-nfs", workers: 1, want: rwo},
		{name: "asked", class: "ckpt-pd", workers: 2, modes: rwx, want: rwx},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := testutil.Namespace(t, env.Client)
			w := testutil.TrainingJob(tc.name, ns).Workers(tc.workers).GPUs(0)
			w.Spec.Checkpoint.Storage.StorageClassName = &tc.class
			w.Spec.Checkpoint.Storage.AccessModes = tc.modes
			job := create(t, w)
			got := waitPods(t, job, int(tc.workers), 0)
			pvc := checkpointClaim(t, job)
			assert.Equal(t, tc.want, pvc.Spec.AccessModes)
			for i := range got {
				assert.Equal(t, tc.shareNode && i > 0, onRankZerosNode(&got[i]), "rank %d", i)
			}
		})
	}
}

// The users' CPU-only seed pytorch-mnist (two ranks, no storage settings),
// on a cluster whose only StorageClass is kind's local-path: its claim is
// ReadWriteOnce, which local-path can give, and rank 1 runs on rank 0's
// node, where that volume is. Before, the claim asked for ReadWriteMany,
// which no local-path volume provides, and the job stayed Pending.
func TestCPUSeedJobRunsWhereTheOnlyStorageIsReadWriteOnce(t *testing.T) {
	storageClass(t, "standard-local-path", "rancher.io/local-path",
		map[string]string{"storageclass.kubernetes.io/is-default-class": "true"})
	seed := seedV1Alpha1(t, "trainingjob-v1alpha1-pytorch-mnist.yaml")
	require.Nil(t, seed.Spec.Checkpoint.Storage.StorageClassName)
	require.Empty(t, seed.Spec.Checkpoint.Storage.AccessModes)
	seed.Namespace = testutil.Namespace(t, env.Client)
	require.NoError(t, env.Client.Create(ctx, seed))
	got := waitPods(t, seed, 2, 0)
	assert.Equal(t, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, checkpointClaim(t, seed).Spec.AccessModes)
	assert.False(t, onRankZerosNode(&got[0]), "rank 0 is placed freely")
	assert.True(t, onRankZerosNode(&got[1]), "rank 1 joins rank 0's node")

	// The same cluster with a shared file system as its default: the
	// claim is ReadWriteMany and the ranks spread.
	storageClass(t, "shared-default", "efs.csi.aws.com",
		map[string]string{"storageclass.kubernetes.io/is-default-class": "true"})
	spread := seedV1Alpha1(t, "trainingjob-v1alpha1-pytorch-mnist.yaml")
	spread.Namespace = testutil.Namespace(t, env.Client)
	require.NoError(t, env.Client.Create(ctx, spread))
	got = waitPods(t, spread, 2, 0)
	assert.Equal(t, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}, checkpointClaim(t, spread).Spec.AccessModes)
	assert.False(t, onRankZerosNode(&got[1]))
}

// seedV1Alpha1 reads a v1alpha1 seed manifest and converts it as the
// conversion webhook does (this suite serves no webhooks).
func seedV1Alpha1(t *testing.T, file string) *mlv1.TrainingJob {
	t.Helper()
	objs, err := testutil.ReadManifests(filepath.Join(testutil.SeedExamplesDir(), file))
	require.NoError(t, err)
	require.Len(t, objs, 1)
	old := &mlv1alpha1.TrainingJob{}
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(objs[0].Object, old))
	job := &mlv1.TrainingJob{}
	require.NoError(t, old.ConvertTo(job))
	job.ResourceVersion = ""
	return job
}
