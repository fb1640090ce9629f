package trainingjob_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/test/testutil"
)

// A retained checkpoint PVC carries the job's labels but no owner
// reference, so neither background nor foreground deletion of the job can
// collect it; every other child is owned by the job (the garbage collector,
// absent in envtest, follows those). No finalizer is needed.
func TestDeletionRetainsCheckpointPVC(t *testing.T) {
	ns := testutil.Namespace(t, env.Client)
	job := create(t, testutil.TrainingJob("keep", ns).Workers(2).GPUs(0))
	waitPods(t, job, 2, 0)
	j := waitState(t, job, mlv1.StateInitializing)
	assert.Empty(t, j.Finalizers)
	pvc := &corev1.PersistentVolumeClaim{}
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "keep-checkpoints"}, pvc))
	assert.Empty(t, pvc.OwnerReferences, "a retained PVC must not be collectable with its job")
	assert.Equal(t, "keep", pvc.Labels[mlv1.LabelTrainingJob])
	for _, p := range pods(t, job) {
		ownedBy(t, &p, j)
	}
	svc := &corev1.Service{}
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "keep-workers"}, svc))
	ownedBy(t, svc, j)

	// Told to drop the data: the job takes ownership, so the PVC goes with it.
	update(t, job, func(j *mlv1.TrainingJob) { j.Spec.Checkpoint.RetainOnDelete = ptrTo(false) })
	testutil.Eventually(t, func() bool {
		require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "keep-checkpoints"}, pvc))
		return len(pvc.OwnerReferences) == 1
	}, "PVC owned after retainOnDelete=false")
	ownedBy(t, pvc, j)
	// And back: released again.
	update(t, job, func(j *mlv1.TrainingJob) { j.Spec.Checkpoint.RetainOnDelete = ptrTo(true) })
	testutil.Eventually(t, func() bool {
		require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "keep-checkpoints"}, pvc))
		return len(pvc.OwnerReferences) == 0
	}, "PVC released after retainOnDelete=true")

	require.NoError(t, env.Client.Delete(ctx, get(t, job), client.PropagationPolicy(metav1.DeletePropagationForeground)))
	testutil.Eventually(t, func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(job), &mlv1.TrainingJob{})) ||
			get(t, job).DeletionTimestamp != nil
	}, "job deleting")
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "keep-checkpoints"}, pvc))
	assert.Empty(t, pvc.OwnerReferences)
}

// With retainOnDelete false, the PVC is owned by the job and no finalizer is held.
func TestDeletionWithoutRetainHoldsNoFinalizer(t *testing.T) {
	ns := testutil.Namespace(t, env.Client)
	job := create(t, testutil.TrainingJob("drop", ns).Workers(1).GPUs(0).RetainCheckpoints(false))
	waitPods(t, job, 1, 0)
	j := waitState(t, job, mlv1.StateInitializing)
	assert.Empty(t, j.Finalizers)
	pvc := &corev1.PersistentVolumeClaim{}
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "drop-checkpoints"}, pvc))
	ownedBy(t, pvc, j)
	require.NoError(t, env.Client.Delete(ctx, j))
	testutil.Eventually(t, func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(job), &mlv1.TrainingJob{}))
	}, "job gone at once")
}

// A job still carrying the cleanup finalizer (from an earlier operator
// version) is not left hanging in deletion.
func TestLeftoverFinalizerIsReleased(t *testing.T) {
	ns := testutil.Namespace(t, env.Client)
	w := testutil.TrainingJob("old", ns).GPUs(0)
	w.Finalizers = []string{mlv1.TrainingJobFinalizer}
	job := create(t, w)
	waitPods(t, job, 1, 0)
	require.NoError(t, env.Client.Delete(ctx, get(t, job)))
	testutil.Eventually(t, func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(job), &mlv1.TrainingJob{}))
	}, "job gone")
}
