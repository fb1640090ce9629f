package v1

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
)

func TestCheckpointAccessModesFollowTheClass(t *testing.T) {
	rwo := []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	rwx := []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}
	one := &TrainingJobSpec{NumWorkers: 1}
	two := &TrainingJobSpec{NumWorkers: 2}
	ps := &TrainingJobSpec{NumWorkers: 1, Framework: FrameworkTensorFlow, ParameterServers: 1}
	asked := &TrainingJobSpec{NumWorkers: 2, Checkpoint: CheckpointSpec{Storage: CheckpointStorage{AccessModes: rwo}}}

	assert.Equal(t, rwo, one.CheckpointAccessModes(true), "one pod needs no shared volume")
	assert.Equal(t, rwx, two.CheckpointAccessModes(true))
	assert.Equal(t, rwx, ps.CheckpointAccessModes(true), "a parameter server is a second pod")
	assert.Equal(t, rwo, two.CheckpointAccessModes(false), "a class without shared volumes")
	assert.Equal(t, rwo, asked.CheckpointAccessModes(true), "the job's own modes win")

	assert.False(t, one.RanksShareANode(rwo))
	assert.True(t, two.RanksShareANode(rwo))
	assert.True(t, ps.RanksShareANode([]corev1.PersistentVolumeAccessMode{corev1.ReadWriteOncePod}))
	assert.False(t, two.RanksShareANode(rwx))
	assert.False(t, two.RanksShareANode([]corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce, corev1.ReadOnlyMany}))
	assert.False(t, two.RanksShareANode(nil), "no claim of the operator's")
}

func TestStorageClassReadWriteMany(t *testing.T) {
	assert.True(t, StorageClassReadWriteMany("efs.csi.aws.com", nil))
	assert.True(t, StorageClassReadWriteMany("nfs.csi.k8s.io", nil))
	for _, block := range []string{"rancher.io/local-path", "pd.csi.storage.gke.io", "kubernetes.io/gce-pd", "ebs.csi.aws.com", "disk.csi.azure.com"} {
		assert.False(t, StorageClassReadWriteMany(block, nil), block)
	}
	assert.True(t, StorageClassReadWriteMany("rancher.io/local-path", map[string]string{AnnotationReadWriteMany: "true"}), "the admin's word wins")
	assert.False(t, StorageClassReadWriteMany("efs.csi.aws.com", map[string]string{AnnotationReadWriteMany: "false"}), "the admin's word wins")
}
