package integration_test

import (
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	mlv1alpha1 "github.com/ml-operator/ml-operator/api/v1alpha1"
	"github.com/ml-operator/ml-operator/controllers/trainingjob"
	"github.com/ml-operator/ml-operator/internal/manager"
	"github.com/ml-operator/ml-operator/test/testutil"
)

// The Go operator lab's walkthrough, on its own sample (the seed
// pytorch-mnist, v1alpha1), with the conversion and admission webhooks
// served and the TrainingJob reconciler passing over the job:
//   - `kubectl get pods -l trainingjob.ml.example.com/worker` (and `kubectl
//     logs -l ...`) finds the job's worker pods: they carry the lab's label;
//   - `kubectl patch trainingjob pytorch-mnist --type=json -p '[{"op":
//     "replace", "path": "/spec/workers", "value": 4}]'` on the v1alpha1
//     resource changes numWorkers, and the running gang is re-formed at 4
//     ranks (Rescaled, a disruption, not a failure);
//   - a job carrying the lab's finalizer trainingjob.ml.example.com/finalizer
//     is deleted: the operator releases it.
func TestTheLabsNamesBehaveAsDocumented(t *testing.T) {
	ctx := t.Context()
	objs, err := testutil.ReadManifests(filepath.Join(testutil.SeedExamplesDir(), "trainingjob-v1alpha1-pytorch-mnist.yaml"))
	require.NoError(t, err)
	require.Len(t, objs, 1)
	lab := objs[0]
	require.Equal(t, mlv1alpha1.GroupVersion.String(), lab.GetAPIVersion())
	ns := testutil.Namespace(t, k8s)
	lab.SetNamespace(ns)
	// The lab's operator adds its finalizer to every job it sees.
	lab.SetFinalizers([]string{mlv1.LabFinalizer})
	require.NoError(t, k8s.Create(ctx, lab))
	key := client.ObjectKey{Namespace: ns, Name: lab.GetName()}

	c, err := client.NewWithWatch(cfg, client.Options{Scheme: manager.NewScheme()})
	require.NoError(t, err)
	r := trainingjob.NewReconciler(testutil.NewCacheView(t, cfg), c, events.NewFakeRecorder(1000), trainingjob.Config{DefaultImages: images})
	workers := func() []corev1.Pod {
		pods := &corev1.PodList{}
		require.NoError(t, k8s.List(ctx, pods, client.InNamespace(ns), client.HasLabels{mlv1.LabelLabWorker}))
		return pods.Items
	}
	// pass reconciles until cond holds.
	pass := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(testutil.Timeout)
		for !cond() {
			require.True(t, time.Now().Before(deadline), "%s: not within %s", what, testutil.Timeout)
			_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key})
			require.NoError(t, err)
			time.Sleep(50 * time.Millisecond)
		}
	}
	gang := func(n int) func() bool {
		return func() bool {
			pods := workers()
			if len(pods) != n {
				return false
			}
			for _, p := range pods {
				if p.Labels[mlv1.LabelNumWorkers] != strconv.Itoa(n) || p.DeletionTimestamp != nil {
					return false
				}
			}
			return true
		}
	}

	// The lab's selector finds the two workers, and only them.
	pass("two workers", gang(2))
	for _, p := range workers() {
		assert.Equal(t, key.Name, p.Labels[mlv1.LabelLabWorker], p.Name)
		assert.Equal(t, mlv1.ReplicaTypeWorker, p.Labels[mlv1.LabelReplicaType], p.Name)
	}
	named := &corev1.PodList{}
	require.NoError(t, k8s.List(ctx, named, client.InNamespace(ns), client.MatchingLabels{mlv1.LabelLabWorker: key.Name}))
	assert.Len(t, named.Items, 2)

	// The lab's patch, on the v1alpha1 resource, while the job runs.
	alpha := &mlv1alpha1.TrainingJob{}
	alpha.Name, alpha.Namespace = key.Name, key.Namespace
	require.NoError(t, k8s.Patch(ctx, alpha, client.RawPatch(types.JSONPatchType,
		[]byte(`[{"op": "replace", "path": "/spec/workers", "value": 4}]`))))
	assert.Equal(t, int32(4), alpha.Spec.Workers)
	v1 := &mlv1.TrainingJob{}
	require.NoError(t, k8s.Get(ctx, key, v1))
	assert.Equal(t, int32(4), v1.Spec.NumWorkers, "spec.workers is v1's numWorkers")
	pass("the gang re-formed at 4 ranks", gang(4))
	require.NoError(t, k8s.Get(ctx, key, v1))
	assert.Equal(t, int32(1), v1.Status.Disruptions, "a rescale is a disruption")
	assert.Zero(t, v1.Status.Restarts, "not a failure")
	restarting := meta.FindStatusCondition(v1.Status.Conditions, mlv1.TrainingJobRestarting)
	require.NotNil(t, restarting)
	assert.Contains(t, restarting.Message, "numWorkers changed from 2 to 4")
	require.NoError(t, k8s.Get(ctx, key, alpha))
	assert.Equal(t, int32(4), alpha.Spec.Workers)

	// kubectl delete: the lab's finalizer is released and the job goes.
	require.Contains(t, v1.Finalizers, mlv1.LabFinalizer, "the operator does not remove it from a live job")
	require.NoError(t, k8s.Delete(ctx, v1))
	pass("the job deleted", func() bool {
		return apierrors.IsNotFound(k8s.Get(ctx, key, &mlv1.TrainingJob{}))
	})
}
