package trainingjob_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/test/testutil"
)

// A gang whose last rank the scheduler cannot place, without a gang
// scheduler: until spec.scheduling.placementTimeout (on the injected clock)
// the placed ranks wait; at it, the whole gang is released (its pods
// deleted, no GPU held), with a Warning event and Restarting=True
// PlacementTimeout, and recreated as the next attempt after the backoff.
// None of it counts against backoffLimit: restarts stays 0.
func TestPlacementTimeoutReleasesTheGang(t *testing.T) {
	ns := testutil.Namespace(t, env.Client)
	node := ns + "-gpu"
	_, err := testutil.ReadyNode(ctx, env.Client, node, gpuNS)
	require.NoError(t, err)
	w := testutil.TrainingJob("stuck", ns).Workers(3).GPUs(8).BackoffLimit(0)
	w.Spec.Scheduling.PlacementTimeout = &metav1.Duration{Duration: 2 * time.Minute}
	job := create(t, w)
	waitPods(t, job, 3, 0)

	// The scheduler places ranks 0 and 1, which hold 16 GPUs, and not rank 2.
	for r := int32(0); r < 2; r++ {
		require.NoError(t, testutil.BindPod(ctx, env.Client, ns, mlv1.WorkerPodName("stuck", r), node))
		setPhase(t, job, r, corev1.PodRunning)
	}
	setPhase(t, job, 2, corev1.PodPending, unschedulable)
	j := waitJob(t, job, "Running=False Unschedulable", func(j *mlv1.TrainingJob) bool {
		c := condition(j, mlv1.TrainingJobRunning)
		return c != nil && c.Reason == mlv1.ReasonUnschedulable && j.Status.AllocatedGPUs == 16
	})
	assert.Equal(t, mlv1.GangPlacementTimeout, j.Status.GangPlacement)
	require.NotNil(t, j.Status.PlacementStartTime)
	start := j.Status.PlacementStartTime.Time

	// Just before the timeout, nothing is released.
	clk.SetTime(start.Add(2*time.Minute - time.Second))
	passes := reconcilePasses(t)
	poke(t, job)
	testutil.Eventually(t, func() bool { return reconcilePasses(t) > passes }, "a pass before the timeout")
	j = get(t, job)
	assert.EqualValues(t, 0, j.Status.PlacementTimeouts, "released before the timeout")
	assert.Len(t, pods(t, job), 3)

	// At the timeout, the gang is released.
	clk.SetTime(start.Add(2 * time.Minute))
	poke(t, job)
	j = waitJob(t, job, "Restarting=True PlacementTimeout", func(j *mlv1.TrainingJob) bool {
		c := condition(j, mlv1.TrainingJobRestarting)
		return c != nil && c.Status == "True" && c.Reason == mlv1.ReasonPlacementTimeout
	})
	assert.EqualValues(t, 1, j.Status.PlacementTimeouts)
	assert.EqualValues(t, 0, j.Status.Restarts, "a placement timeout does not count against backoffLimit")
	assert.EqualValues(t, 0, j.Status.Disruptions)
	assert.EqualValues(t, 0, j.Status.AllocatedGPUs)
	assert.Nil(t, j.Status.PlacementStartTime)
	assert.Equal(t, mlv1.StateRestarting, j.Status.State)
	msg := condition(j, mlv1.TrainingJobRestarting).Message
	assert.Contains(t, msg, "rank 2 (pod stuck-worker-2) still unschedulable 2m0s after the gang's pods were created (placementTimeout 2m0s)")
	assert.Contains(t, msg, "4 Insufficient nvidia.com/gpu")
	assert.Contains(t, msg, "2 pods placed")
	note := waitEvents(t, job, mlv1.ReasonPlacementTimeout)[mlv1.ReasonPlacementTimeout]
	assert.Contains(t, note, "gang restart for a placement timeout")
	assert.Contains(t, note, "placement timeouts 1; next attempt 1), backoff 10s")

	// Every pod of attempt 0 is deleted: the unplaced one at once, the
	// placed ones once their kubelet (here, the test) confirms.
	testutil.Eventually(t, func() bool {
		for _, p := range pods(t, job) {
			if p.DeletionTimestamp == nil {
				return false
			}
		}
		return true
	}, "every pod of attempt 0 deleted")
	require.NoError(t, testutil.FinishTerminatingPods(ctx, env.Client, ns, client.MatchingLabels{mlv1.LabelTrainingJob: "stuck"}))
	testutil.Eventually(t, func() bool { return len(pods(t, job)) == 0 }, "attempt 0's pods gone")

	// The next attempt waits for the backoff (10s for the first timeout).
	passes = reconcilePasses(t)
	poke(t, job)
	testutil.Eventually(t, func() bool { return reconcilePasses(t) > passes }, "a pass inside the backoff")
	assert.Empty(t, pods(t, job), "the gang came back inside the backoff")
	step(t, job, 10*time.Second)
	waitPods(t, job, 3, 1)
	j = waitJob(t, job, "attempt 1 recorded", func(j *mlv1.TrainingJob) bool {
		c := condition(j, mlv1.TrainingJobRestarting)
		return c != nil && c.Status == "False" && j.Status.PlacementStartTime != nil
	})
	assert.EqualValues(t, 0, j.Status.Restarts)
	assert.EqualValues(t, 1, j.Status.PlacementTimeouts)
	assert.EqualValues(t, 1, j.Status.Attempt())
	assert.Contains(t, condition(j, mlv1.TrainingJobRestarting).Message, "(and 1 placement timeouts)")
	assert.Equal(t, clk.Now().UTC(), j.Status.PlacementStartTime.UTC(), "the new attempt's placement clock starts when its pods are created")
}

// A gang that is placed in time is never released, however long it runs
// afterwards; with placementTimeout 0s there is no timeout at all, and
// status says so.
func TestPlacedGangIsNotReleased(t *testing.T) {
	ns := testutil.Namespace(t, env.Client)
	w := testutil.TrainingJob("placed", ns).Workers(2).GPUs(0)
	w.Spec.Scheduling.PlacementTimeout = &metav1.Duration{Duration: time.Minute}
	job := create(t, w)
	waitPods(t, job, 2, 0)
	setAll(t, job, 2, corev1.PodRunning)
	j := waitState(t, job, mlv1.StateRunning)
	assert.Equal(t, mlv1.GangPlacementTimeout, j.Status.GangPlacement)
	step(t, job, time.Hour)
	passes := reconcilePasses(t)
	poke(t, job)
	testutil.Eventually(t, func() bool { return reconcilePasses(t) > passes }, "a pass an hour later")
	j = get(t, job)
	assert.EqualValues(t, 0, j.Status.PlacementTimeouts)
	assert.Equal(t, mlv1.StateRunning, j.Status.State)

	never := testutil.TrainingJob("never", ns).Workers(2).GPUs(0)
	never.Spec.Scheduling.PlacementTimeout = &metav1.Duration{}
	job = create(t, never)
	waitPods(t, job, 2, 0)
	setPhase(t, job, 0, corev1.PodRunning)
	setPhase(t, job, 1, corev1.PodPending, unschedulable)
	j = waitJob(t, job, "Running=False Unschedulable", func(j *mlv1.TrainingJob) bool {
		c := condition(j, mlv1.TrainingJobRunning)
		return c != nil && c.Reason == mlv1.ReasonUnschedulable
	})
	assert.Equal(t, mlv1.GangPlacementNone, j.Status.GangPlacement)
	step(t, job, 24*time.Hour)
	passes = reconcilePasses(t)
	poke(t, job)
	testutil.Eventually(t, func() bool { return reconcilePasses(t) > passes }, "a pass a day later")
	assert.EqualValues(t, 0, get(t, job).Status.PlacementTimeouts)
}

// Kueue admits the pod group as one: status shows it, and no timeout applies.
func TestGangPlacementShowsKueue(t *testing.T) {
	ns := testutil.Namespace(t, env.Client)
	w := testutil.TrainingJob("queued", ns).Workers(2).GPUs(0)
	w.Spec.Scheduling.QueueName = "team-a"
	w.Spec.Scheduling.PlacementTimeout = &metav1.Duration{Duration: time.Minute}
	job := create(t, w)
	waitPods(t, job, 2, 0)
	waitGangPlacement(t, job, mlv1.GangPlacementKueue)
	assert.NotNil(t, get(t, job).Status.PlacementStartTime)
}

// waitGangPlacement waits until status.gangPlacement shows want.
func waitGangPlacement(t *testing.T, job *mlv1.TrainingJob, want mlv1.GangPlacement) {
	t.Helper()
	waitJob(t, job, "gangPlacement "+string(want), func(j *mlv1.TrainingJob) bool { return j.Status.GangPlacement == want })
}
