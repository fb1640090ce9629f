package reliability_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/controllers/trainingjob"
	"github.com/ml-operator/ml-operator/test/testutil"
)

// pass runs one reconcile pass and returns its result.
func pass(t *testing.T, r *trainingjob.Reconciler, key client.ObjectKey) ctrl.Result {
	t.Helper()
	res, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key})
	require.NoError(t, err)
	return res
}

// passSettled passes until a pass writes nothing new (the job's
// resourceVersion stays), and returns that pass's result: what the
// controller asks of the work queue once it has nothing left to do now.
func passSettled(t *testing.T, r *trainingjob.Reconciler, key client.ObjectKey) ctrl.Result {
	t.Helper()
	for i := 0; i < maxPasses; i++ {
		before := getJob(t, key).ResourceVersion
		res := pass(t, r, key)
		if getJob(t, key).ResourceVersion == before {
			return res
		}
	}
	t.Fatalf("job %s never settled", key)
	return ctrl.Result{}
}

// setPods writes phase (envtest has no kubelet) into every pod of the job.
func setPods(t *testing.T, key client.ObjectKey, phase corev1.PodPhase, opts ...testutil.PodStatusOption) {
	t.Helper()
	for _, name := range jobPods(t, key) {
		require.NoError(t, testutil.SetPodPhase(ctx, k8s, key.Namespace, name, phase, opts...))
	}
}

// Timed work is scheduled with RequeueAfter on the injected clock, never by
// polling: the gang restart's backoff (10 s, then 20 s) holds the new gang
// back until it is up and asks to be woken exactly then.
func TestBackoffIsARequeueAndHoldsTheGangBack(t *testing.T) {
	ns := testutil.Namespace(t, k8s)
	key := client.ObjectKey{Namespace: ns, Name: "backoff"}
	r, clk := newJobReconcilerWithClock(t, interceptor.Funcs{})
	require.NoError(t, k8s.Create(ctx, testutil.TrainingJob(key.Name, ns).Workers(2).GPUs(0).BackoffLimit(3).Obj()))

	for attempt, backoff := range []time.Duration{10 * time.Second, 20 * time.Second} {
		passSettled(t, r, key)
		require.Len(t, jobPods(t, key), 2, "attempt %d", attempt)
		setPods(t, key, corev1.PodRunning)
		passSettled(t, r, key)
		require.Equal(t, mlv1.StateRunning, getJob(t, key).Status.State)

		require.NoError(t, testutil.SetPodPhase(ctx, k8s, ns, "backoff-worker-1", corev1.PodFailed,
			testutil.WithExitCode("trainer", 1, "Error")))
		passSettled(t, r, key)
		job := getJob(t, key)
		require.Equal(t, mlv1.StateRestarting, job.Status.State)
		require.Equal(t, int32(attempt+1), job.Status.Restarts)
		require.Empty(t, jobPods(t, key), "the old gang is deleted")
		// The pass the old pods' deletion events trigger asks to be woken
		// when the backoff is up.
		res := pass(t, r, key)
		assert.Empty(t, jobPods(t, key), "no new gang inside the backoff")
		assert.Equal(t, backoff, res.RequeueAfter, "woken when the backoff is up (restart %d)", attempt+1)

		clk.Step(backoff - time.Second)
		res = passSettled(t, r, key)
		assert.Empty(t, jobPods(t, key), "no new gang inside the backoff")
		assert.Equal(t, time.Second, res.RequeueAfter, "the rest of the backoff")
		clk.Step(time.Second)
	}
	passSettled(t, r, key)
	assert.Len(t, jobPods(t, key), 2, "the third attempt's gang once its backoff is up")
}

// activeDeadlineSeconds and ttlSecondsAfterFinished are requeues for the
// moment they fall due.
func TestDeadlineAndTTLAreRequeues(t *testing.T) {
	ns := testutil.Namespace(t, k8s)
	key := client.ObjectKey{Namespace: ns, Name: "deadline"}
	r, clk := newJobReconcilerWithClock(t, interceptor.Funcs{})
	require.NoError(t, k8s.Create(ctx, testutil.TrainingJob(key.Name, ns).Workers(1).GPUs(0).
		ActiveDeadlineSeconds(100).TTLSecondsAfterFinished(30).Obj()))
	passSettled(t, r, key)
	setPods(t, key, corev1.PodRunning)
	res := passSettled(t, r, key)
	require.Equal(t, mlv1.StateRunning, getJob(t, key).Status.State)
	assert.Equal(t, 100*time.Second, res.RequeueAfter, "woken at the deadline")

	clk.Step(60 * time.Second)
	assert.Equal(t, 40*time.Second, passSettled(t, r, key).RequeueAfter)
	clk.Step(40 * time.Second)
	res = passSettled(t, r, key)
	job := getJob(t, key)
	require.Equal(t, mlv1.StateFailed, job.Status.State)
	assert.Equal(t, mlv1.ReasonDeadlineExceeded, job.Status.Conditions[len(job.Status.Conditions)-1].Reason)
	assert.Equal(t, 30*time.Second, res.RequeueAfter, "woken when the TTL is up")

	clk.Step(30 * time.Second)
	pass(t, r, key)
	err := k8s.Get(ctx, key, &mlv1.TrainingJob{})
	assert.True(t, apierrors.IsNotFound(err), "deleted after its TTL: %v", err)
}
