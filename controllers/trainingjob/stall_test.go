package trainingjob_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/test/testutil"
)

// eventType is the type (Normal, Warning) of the job's event with the
// reason, empty when there is none.
func eventType(t *testing.T, job *mlv1.TrainingJob, reason string) string {
	t.Helper()
	var list eventsv1.EventList
	require.NoError(t, env.Client.List(ctx, &list, client.InNamespace(job.Namespace)))
	for _, e := range list.Items {
		if e.Regarding.Kind == "TrainingJob" && e.Regarding.Name == job.Name && e.Reason == reason {
			return e.Type
		}
	}
	return ""
}

// stallJob is a two-rank job whose rank 0 is served by ts, with a stall
// timeout of one minute and the given stall action.
func stallJob(t *testing.T, name string, ts *trainerServer, action mlv1.StallAction) *mlv1.TrainingJob {
	ns := testutil.Namespace(t, env.Client)
	w := testutil.TrainingJob(name, ns).Workers(2).GPUs(0).Hyperparameter("epochs", 10)
	w.Spec.Metrics.Port = ts.port(t)
	w.Spec.FailurePolicy = &mlv1.FailurePolicy{StallTimeout: &metav1.Duration{Duration: time.Minute}, StallAction: action}
	return create(t, w)
}

// scrapeEvery steps the injected clock by the scrape interval n times: each
// step is one scrape of rank 0.
func scrapeEvery(t *testing.T, job *mlv1.TrainingJob, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		step(t, job, 15*time.Second)
	}
}

// waitStalled waits for the job's Stalled condition with the status.
func waitStalled(t *testing.T, job *mlv1.TrainingJob, status string) *mlv1.TrainingJob {
	t.Helper()
	return waitJob(t, job, "Stalled="+status, func(j *mlv1.TrainingJob) bool {
		c := condition(j, "Stalled")
		return c != nil && c.Status == status
	})
}

// Rank 0's step moving keeps the job Running however long it runs; a step
// that stands still for stallTimeout (seen by the scrapes, on the injected
// clock) makes the job Stalled, with a Warning event, and restarts the gang
// from the latest checkpoint as a failure (reason Stalled, counted against
// backoffLimit, with the failure backoff). The next attempt's first
// progress clears Stalled.
func TestStalledGangRestartsFromTheLatestCheckpoint(t *testing.T) {
	ts := newTrainerServer(t, "training_step 40\ntraining_epoch 2\ntraining_checkpoint_epoch 2\n")
	job := stallJob(t, "hang", ts, "")
	waitPods(t, job, 2, 0)
	setAll(t, job, 2, corev1.PodRunning, testutil.WithPodIP("127.0.0.1"))
	j := waitStalled(t, job, "False")
	assert.Equal(t, "Progressing", condition(j, "Stalled").Reason)
	assert.Equal(t, "rank 0 reports training_step 40 (attempt 0); stallTimeout 1m0s", condition(j, "Stalled").Message)

	// Two minutes of a moving step: no stall. Each step's scrape is served
	// before the next step's body is set: a pass that scraped late would
	// read the next body at the earlier time.
	for s := 41; s <= 48; s++ {
		ts.body.Store("training_step " + strconv.Itoa(s) + "\ntraining_epoch 2\ntraining_checkpoint_epoch 2\n")
		served := ts.served.Load()
		scrapeEvery(t, job, 1)
		require.Eventually(t, func() bool { return ts.served.Load() > served }, testutil.Timeout, testutil.Interval,
			"no scrape of training_step %d", s)
	}
	j = get(t, job)
	assert.Equal(t, mlv1.StateRunning, j.Status.State)
	assert.Equal(t, int32(0), j.Status.Restarts)
	assert.Equal(t, "False", condition(j, "Stalled").Status)

	// The step stands still at 48: the scrape a minute after it first
	// showed 48 sees the stall.
	scrapeEvery(t, job, 3)
	assert.Equal(t, mlv1.StateRunning, get(t, job).Status.State, "45 s of the same step is no stall yet")
	scrapeEvery(t, job, 1)
	j = waitState(t, job, mlv1.StateRestarting)
	stalled := condition(j, "Stalled")
	require.NotNil(t, stalled)
	assert.Equal(t, "True", stalled.Status)
	assert.Equal(t, "Stalled", stalled.Reason)
	assert.Regexp(t, `^rank 0 \(pod hang-worker-0\) made no progress for 1m0s \(stallTimeout 1m0s\): training_step has been 48 since \S+Z$`, stalled.Message)
	assert.Equal(t, int32(1), j.Status.Restarts, "a stall counts against backoffLimit by default")
	assert.Equal(t, int32(0), j.Status.Disruptions)
	assert.Equal(t, "Stalled: "+stalled.Message, restartCause(j))
	ev := waitEvents(t, job, "Stalled")
	assert.Contains(t, ev["Stalled"], "gang restart for a failure: rank 0 (pod hang-worker-0) made no progress for 1m0s")
	assert.Contains(t, ev["Stalled"], "backoff 10s")
	assert.Equal(t, corev1.EventTypeWarning, eventType(t, job, "Stalled"))

	// Every pod of the hung attempt goes; after the failure backoff the next
	// attempt resumes from the latest checkpoint.
	waitPods(t, job, 0, 0)
	step(t, job, 10*time.Second)
	for _, p := range waitPods(t, job, 2, 1) {
		assert.Equal(t, "/checkpoints/epoch-2", testutil.EnvOf(&p)["RESUME_FROM_CHECKPOINT"], "pod %s", p.Name)
	}
	assert.Equal(t, "True", condition(get(t, job), "Stalled").Status, "Stalled stays until the next attempt reports progress")
	ts.body.Store("training_step 48\ntraining_epoch 2\ntraining_checkpoint_epoch 2\n")
	setAll(t, job, 2, corev1.PodRunning, testutil.WithPodIP("127.0.0.1"))
	scrapeEvery(t, job, 1)
	j = waitStalled(t, job, "False")
	assert.Equal(t, "rank 0 reports training_step 48 (attempt 1); stallTimeout 1m0s", condition(j, "Stalled").Message)
}

// stallAction RestartUncounted restarts the gang as a disruption (no
// backoffLimit spent, no backoff); Fail fails the job, reason Stalled.
func TestStallActions(t *testing.T) {
	t.Run("RestartUncounted", func(t *testing.T) {
		ts := newTrainerServer(t, "training_epoch 3\n")
		job := stallJob(t, "uncounted", ts, mlv1.StallActionRestartUncounted)
		waitPods(t, job, 2, 0)
		setAll(t, job, 2, corev1.PodRunning, testutil.WithPodIP("127.0.0.1"))
		waitStalled(t, job, "False")
		scrapeEvery(t, job, 4)
		j := waitJob(t, job, "attempt 1", func(j *mlv1.TrainingJob) bool { return j.Status.Attempt() == 1 })
		assert.Equal(t, int32(0), j.Status.Restarts)
		assert.Equal(t, int32(1), j.Status.Disruptions)
		assert.Contains(t, condition(j, "Stalled").Message, "training_epoch has been 3 since", "without a step counter the epoch is watched")
		assert.Equal(t, corev1.EventTypeWarning, eventType(t, job, "Stalled"))
		// No backoff: the next gang comes without stepping the clock.
		waitPods(t, job, 2, 1)
	})
	t.Run("Fail", func(t *testing.T) {
		ts := newTrainerServer(t, "training_step 7\n")
		job := stallJob(t, "fail", ts, mlv1.StallActionFail)
		waitPods(t, job, 2, 0)
		setAll(t, job, 2, corev1.PodRunning, testutil.WithPodIP("127.0.0.1"))
		waitStalled(t, job, "False")
		scrapeEvery(t, job, 4)
		j := waitState(t, job, mlv1.StateFailed)
		assert.Equal(t, "Stalled", condition(j, "Failed").Reason)
		assert.Contains(t, condition(j, "Failed").Message, "training_step has been 7 since")
		assert.Contains(t, condition(j, "Failed").Message, "; stallAction is Fail")
		assert.Equal(t, "True", condition(j, "Stalled").Status)
		assert.Equal(t, int32(0), j.Status.Restarts)
	})
}

// Without a stall timeout nothing watches: a step that never moves leaves
// the job Running, with no Stalled condition.
func TestNoStallTimeoutNoStall(t *testing.T) {
	ts := newTrainerServer(t, "training_step 5\n")
	ns := testutil.Namespace(t, env.Client)
	w := testutil.TrainingJob("nostall", ns).Workers(1).GPUs(0)
	w.Spec.Metrics.Port = ts.port(t)
	job := create(t, w)
	waitPods(t, job, 1, 0)
	setAll(t, job, 1, corev1.PodRunning, testutil.WithPodIP("127.0.0.1"))
	waitJob(t, job, "scraped", func(j *mlv1.TrainingJob) bool { return condition(j, "ProgressAvailable") != nil })
	scrapeEvery(t, job, 8)
	j := get(t, job)
	assert.Equal(t, mlv1.StateRunning, j.Status.State)
	assert.Nil(t, condition(j, "Stalled"))
}
