package trainingjob_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/controllers/namespaces"
	"github.com/ml-operator/ml-operator/internal/integrations/mlflow"
	"github.com/ml-operator/ml-operator/internal/integrations/mlflow/mlflowtest"
	"github.com/ml-operator/ml-operator/test/testutil"
)

// Deleting a namespace with running jobs: the namespace controller deletes
// the jobs' pods, Services, ConfigMaps and PVCs, then the jobs. The operator
// must not read the deleted pods as a disruption and create them again (the
// API server refuses every create there): it creates nothing, emits no
// event, counts no error and writes no status, while a tracked job's
// MLflow run is still ended when the job itself is deleted. envtest has no
// namespace controller: the test plays it, once the operator's cache has
// seen the deletion (as the namespace controller acts once its own informer
// has).
func TestNamespaceDeletionCreatesNothing(t *testing.T) {
	f := mlflowtest.NewServer(t)
	ns := testutil.Namespace(t, env.Client)
	plain := create(t, testutil.TrainingJob("plain", ns).Workers(3).GPUs(0))
	tracked := testutil.TrainingJob("tracked", ns).Workers(2).GPUs(0)
	tracked.Spec.Tracking = &mlv1.TrackingSpec{MLflow: &mlv1.MLflowSpec{TrackingURI: f.URL, ExperimentName: "bert"}}
	jobs := []*mlv1.TrainingJob{plain, create(t, tracked)}
	runGang(t, jobs[0], 3, 0)
	runGang(t, jobs[1], 2, 0)
	j := waitJob(t, jobs[1], "run id and finalizer", func(j *mlv1.TrainingJob) bool {
		return j.Status.MLflowRunID != "" && controllerutil.ContainsFinalizer(j, mlv1.MLflowRunFinalizer)
	})
	runID := j.Status.MLflowRunID
	// Events follow their pass's status write: wait for the last ones.
	testutil.Eventually(t, func() bool {
		return writes.inNamespace(ns, "event Running") == 2 && writes.inNamespace(ns, "event MLflowRunCreated") == 1
	}, "the Running and MLflowRunCreated events")
	running := map[string]mlv1.TrainingJobStatus{}
	for _, job := range jobs {
		running[job.Name] = get(t, job).Status
	}

	require.NoError(t, env.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	waitNamespaceTerminatingInCache(t, ns)
	creates, events, errs := writes.inNamespace(ns, "create"), writes.inNamespace(ns, "event"), reconcileErrorsIn(t, ns)

	seen := passes(jobs...)
	deleteChildren(t, ns, &corev1.PodList{}, &corev1.ServiceList{}, &corev1.ConfigMapList{}, &corev1.PersistentVolumeClaimList{})
	waitPasses(t, seen)
	// And one more pass each, after a change to the job.
	seen = passes(jobs...)
	for _, job := range jobs {
		poke(t, job)
	}
	waitPasses(t, seen)
	for _, job := range jobs {
		assert.Equal(t, running[job.Name], get(t, job).Status, "job %s: no status written", job.Name)
	}
	assert.Empty(t, pods(t, jobs[0]), "no pod created again")

	for _, job := range jobs {
		require.NoError(t, env.Client.Delete(ctx, job))
	}
	for _, job := range jobs {
		waitGone(t, job, "job gone once its finalizer work is done")
	}
	run, ok := f.Run(runID)
	require.True(t, ok)
	assert.Equal(t, mlflow.RunKilled, run.Status, "the MLflow run is ended although the namespace is being deleted")

	assert.Zero(t, writes.inNamespace(ns, "create")-creates, "creates (pods, Services, ConfigMaps, PVCs) after the namespace's deletion")
	assert.Zero(t, writes.inNamespace(ns, "event")-events, "events after the namespace's deletion")
	assert.Zero(t, reconcileErrorsIn(t, ns)-errs, "trainingjob_operator_errors_total for the namespace")
}

// A job being deleted (held here by someone else's finalizer, as during a
// foreground deletion) whose pods the garbage collector deletes creates
// nothing: it only does its finalizer work.
func TestDeletedJobCreatesNothing(t *testing.T) {
	ns := testutil.Namespace(t, env.Client)
	w := testutil.TrainingJob("held", ns).Workers(2).GPUs(0)
	w.Finalizers = []string{"test.ml.example.com/hold"}
	job := create(t, w)
	runGang(t, job, 2, 0)

	seen := passes(job)
	require.NoError(t, env.Client.Delete(ctx, job))
	waitPasses(t, seen)
	creates, events, errs := writes.inNamespace(ns, "create"), writes.inNamespace(ns, "event"), reconcileErrorsIn(t, ns)

	seen = passes(job)
	deleteChildren(t, ns, &corev1.PodList{}, &corev1.ServiceList{}, &corev1.ConfigMapList{})
	waitPasses(t, seen)
	seen = passes(job)
	poke(t, job)
	waitPasses(t, seen)

	assert.Empty(t, pods(t, job), "no pod created again")
	assert.Zero(t, writes.inNamespace(ns, "create")-creates, "creates after the job's deletion")
	assert.Zero(t, writes.inNamespace(ns, "event")-events, "events after the job's deletion")
	assert.Zero(t, reconcileErrorsIn(t, ns)-errs, "trainingjob_operator_errors_total for the namespace")

	update(t, job, func(j *mlv1.TrainingJob) { j.Finalizers = nil })
	waitGone(t, job, "job gone once released")
}

// waitNamespaceTerminatingInCache waits until the reconciler's cache has seen
// the namespace's deletion.
func waitNamespaceTerminatingInCache(t *testing.T, ns string) {
	t.Helper()
	testutil.Eventually(t, func() bool {
		terminating, err := namespaces.Terminating(ctx, managerCache, ns)
		return err == nil && terminating
	}, "the operator's cache sees namespace", ns, "terminating")
}

// passes counts the passes so far over each job (each pass reads its job).
func passes(jobs ...*mlv1.TrainingJob) map[*mlv1.TrainingJob]int {
	out := map[*mlv1.TrainingJob]int{}
	for _, job := range jobs {
		out[job] = writes.get(job, "get job")
	}
	return out
}

// waitPasses waits until every job had a pass after the count seen.
func waitPasses(t *testing.T, seen map[*mlv1.TrainingJob]int) {
	t.Helper()
	for job, n := range seen {
		testutil.Eventually(t, func() bool { return writes.get(job, "get job") > n }, "a pass over job", job.Name)
	}
}

// deleteChildren deletes every object of the lists' kinds in the namespace
// at once, as the namespace controller does.
func deleteChildren(t *testing.T, ns string, lists ...client.ObjectList) {
	t.Helper()
	for _, list := range lists {
		require.NoError(t, env.Client.List(ctx, list, client.InNamespace(ns)))
		require.NoError(t, meta.EachListItem(list, func(o runtime.Object) error {
			return client.IgnoreNotFound(env.Client.Delete(ctx, o.(client.Object), client.GracePeriodSeconds(0)))
		}))
	}
}

// reconcileErrorsIn reads trainingjob_operator_errors_total for a namespace,
// summed over error_type.
func reconcileErrorsIn(t *testing.T, ns string) float64 {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	require.NoError(t, err)
	total := 0.0
	for _, f := range families {
		if f.GetName() != "trainingjob_operator_errors_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "namespace" && l.GetValue() == ns {
					total += m.GetCounter().GetValue() // one series per error_type
				}
			}
		}
	}
	return total
}
