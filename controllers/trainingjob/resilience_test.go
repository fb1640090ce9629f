package trainingjob_test

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/test/testutil"
)

// restartCause is the reason and message of the last gang restart, whether
// it is still under way (Restarting=True) or done (GangRecreated).
func restartCause(j *mlv1.TrainingJob) string {
	c := condition(j, "Restarting")
	if c == nil {
		return ""
	}
	return c.Reason + ": " + c.Message
}

// runGang waits for n pods of an attempt and marks them running.
func runGang(t *testing.T, job *mlv1.TrainingJob, n int32, attempt int32, opts ...testutil.PodStatusOption) {
	t.Helper()
	waitPods(t, job, int(n), attempt)
	setAll(t, job, n, corev1.PodRunning, opts...)
	waitJob(t, job, "running attempt "+strconv.Itoa(int(attempt)), func(j *mlv1.TrainingJob) bool {
		return j.Status.State == mlv1.StateRunning && j.Status.Attempt() == attempt
	})
}

// A failed rank restarts the whole gang after the backoff, with the next
// attempt label; old and new pods never mix.
func TestGangRestartOnRankFailure(t *testing.T) {
	ns := testutil.Namespace(t, env.Client)
	job := create(t, testutil.TrainingJob("gang", ns).Workers(3).GPUs(0))
	runGang(t, job, 3, 0)

	setPhase(t, job, 1, corev1.PodFailed, testutil.WithExitCode("trainer", 1, "Error"))
	j := waitState(t, job, mlv1.StateRestarting)
	assert.Equal(t, int32(1), j.Status.Restarts)
	assert.Equal(t, int32(0), j.Status.Disruptions)
	require.NotNil(t, j.Status.LastRestartTime)
	c := condition(j, "Restarting")
	require.NotNil(t, c)
	assert.Equal(t, "True", c.Status)
	assert.Equal(t, "WorkerFailed", c.Reason)
	assert.Contains(t, c.Message, "rank 1 (pod gang-worker-1) failed: exit code 1 (Error)")
	ev := waitEvents(t, job, "WorkerFailed")
	assert.Contains(t, ev["WorkerFailed"], "backoff 10s")

	// Every pod of attempt 0 goes, including the healthy ranks.
	waitPods(t, job, 0, 0)

	// After the backoff on the injected clock, the full gang of attempt 1.
	step(t, job, 10*time.Second)
	got := waitPods(t, job, 3, 1)
	for _, p := range got {
		assert.Equal(t, "1", p.Labels[mlv1.LabelRestartAttempt])
	}
	j = waitState(t, job, mlv1.StateInitializing)
	assert.Equal(t, "GangRecreated", condition(j, "Restarting").Reason)
	assert.Equal(t, "False", condition(j, "Restarting").Status)
	runGang(t, job, 3, 1)
}

// A rank that keeps failing spends the backoff limit and the job fails.
func TestFlappingRankExhaustsBackoff(t *testing.T) {
	ns := testutil.Namespace(t, env.Client)
	job := create(t, testutil.TrainingJob("flap", ns).Workers(2).GPUs(0).BackoffLimit(2))
	for attempt := int32(0); attempt < 3; attempt++ {
		runGang(t, job, 2, attempt)
		setPhase(t, job, 0, corev1.PodFailed, testutil.WithExitCode("trainer", 2, "Error"))
		if attempt < 2 {
			waitJob(t, job, "restart", func(j *mlv1.TrainingJob) bool { return j.Status.Restarts == attempt+1 })
			waitPods(t, job, 0, 0)
			step(t, job, 5*time.Minute)
		}
	}
	j := waitState(t, job, mlv1.StateFailed)
	assert.Equal(t, int32(2), j.Status.Restarts)
	assert.Equal(t, "BackoffLimitExceeded", condition(j, "Failed").Reason)
	assert.Contains(t, condition(j, "Failed").Message, "rank 0")
	assert.Contains(t, condition(j, "Failed").Message, "backoffLimit 2")
}

// An eviction restarts the gang at once and spends no backoff.
func TestEvictionSpendsNoBackoff(t *testing.T) {
	ns := testutil.Namespace(t, env.Client)
	job := create(t, testutil.TrainingJob("evict", ns).Workers(2).GPUs(0).BackoffLimit(0))
	runGang(t, job, 2, 0)
	setPhase(t, job, 0, corev1.PodFailed, testutil.WithExitCode("trainer", 137, "Error"),
		testutil.WithPodCondition(corev1.DisruptionTarget, "EvictionByEvictionAPI"))
	// No clock step: a disruption waits for no backoff.
	waitPods(t, job, 2, 1)
	j := get(t, job)
	assert.Equal(t, int32(0), j.Status.Restarts)
	assert.Equal(t, int32(1), j.Status.Disruptions)
	assert.Contains(t, restartCause(j), "Evicted: rank 0")
	waitEvents(t, job, "Evicted")
	runGang(t, job, 2, 1)
}

// A pod deleted by someone else (not the operator) is a disruption.
func TestPodDeletedByOthersIsDisruption(t *testing.T) {
	ns := testutil.Namespace(t, env.Client)
	job := create(t, testutil.TrainingJob("deld", ns).Workers(2).GPUs(0))
	runGang(t, job, 2, 0)
	p := &corev1.Pod{}
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "deld-worker-1"}, p))
	require.NoError(t, env.Client.Delete(ctx, p))
	waitPods(t, job, 2, 1)
	j := get(t, job)
	assert.Equal(t, int32(0), j.Status.Restarts)
	assert.Equal(t, int32(1), j.Status.Disruptions)
	assert.Contains(t, restartCause(j), "PodDeleted: rank 1")
}

// A node that stays NotReady past the grace period disrupts the gang; its
// pods, stuck Terminating without a kubelet, are force-deleted and the gang
// comes back.
func TestNodeLossForceDeletesStuckPods(t *testing.T) {
	ns := testutil.Namespace(t, env.Client)
	node, err := testutil.ReadyNode(ctx, env.Client, ns+"-node", nil)
	require.NoError(t, err)
	job := create(t, testutil.TrainingJob("lost", ns).Workers(2).GPUs(0))
	waitPods(t, job, 2, 0)
	for r := int32(0); r < 2; r++ {
		require.NoError(t, testutil.BindPod(ctx, env.Client, ns, mlv1.WorkerPodName("lost", r), node.Name))
	}
	setAll(t, job, 2, corev1.PodRunning, testutil.WithPodCondition(corev1.PodReady, ""))
	waitState(t, job, mlv1.StateRunning)

	// The node goes NotReady; the node lifecycle controller marks its pods unready.
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown,
		Reason: "NodeStatusUnknown", LastHeartbeatTime: metav1.NewTime(clk.Now()), LastTransitionTime: metav1.NewTime(clk.Now())}}
	require.NoError(t, env.Client.Status().Update(ctx, node))
	for r := int32(0); r < 2; r++ {
		p := &corev1.Pod{}
		require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: mlv1.WorkerPodName("lost", r)}, p))
		for i := range p.Status.Conditions {
			if p.Status.Conditions[i].Type == corev1.PodReady {
				p.Status.Conditions[i].Status = corev1.ConditionFalse
			}
		}
		require.NoError(t, env.Client.Status().Update(ctx, p))
	}

	// Inside the grace period (2 minutes) the job keeps running.
	step(t, job, time.Minute)
	j := waitJob(t, job, "still running", func(j *mlv1.TrainingJob) bool { return j.Status.State == mlv1.StateRunning })
	assert.Equal(t, int32(0), j.Status.Disruptions)

	step(t, job, 61*time.Second)
	j = waitJob(t, job, "node loss", func(j *mlv1.TrainingJob) bool { return j.Status.Disruptions == 1 })
	assert.Equal(t, int32(0), j.Status.Restarts)
	assert.Contains(t, restartCause(j), "NodeLost: rank 0")
	assert.Contains(t, restartCause(j), node.Name)

	// Bound, running pods are deleted gracefully and, with no kubelet, would
	// hang in Terminating: the operator force-deletes them once their own
	// grace period is over (the fake clock is past it), and only then does
	// the new gang, with the same pod names, come.
	step(t, job, time.Minute)
	waitPods(t, job, 2, 1)
	ev := waitEvents(t, job, "NodeLost", "ForceDeleted")
	assert.Contains(t, ev["ForceDeleted"], "stuck terminating on lost nodes")
	assert.Contains(t, ev["ForceDeleted"], "(node "+node.Name+")")
}

// A deleted Node disrupts the gang at once.
func TestDeletedNodeIsDisruption(t *testing.T) {
	ns := testutil.Namespace(t, env.Client)
	node, err := testutil.ReadyNode(ctx, env.Client, ns+"-gone", nil)
	require.NoError(t, err)
	job := create(t, testutil.TrainingJob("gone", ns).Workers(1).GPUs(0))
	waitPods(t, job, 1, 0)
	require.NoError(t, testutil.BindPod(ctx, env.Client, ns, "gone-worker-0", node.Name))
	setAll(t, job, 1, corev1.PodRunning)
	waitState(t, job, mlv1.StateRunning)
	require.NoError(t, env.Client.Delete(ctx, node))
	j := waitJob(t, job, "node gone", func(j *mlv1.TrainingJob) bool { return j.Status.Disruptions == 1 })
	assert.Contains(t, restartCause(j), "is gone")
	assert.Equal(t, int32(0), j.Status.Restarts)
}

// restartPolicy ExitCode: 1..127 fails at once, 128+ is retried.
func TestExitCodePolicy(t *testing.T) {
	ns := testutil.Namespace(t, env.Client)
	perm := create(t, testutil.TrainingJob("perm", ns).Workers(2).GPUs(0).RestartPolicy(mlv1.RestartPolicyExitCode))
	retry := create(t, testutil.TrainingJob("retry", ns).Workers(2).GPUs(0).RestartPolicy(mlv1.RestartPolicyExitCode))
	runGang(t, perm, 2, 0)
	runGang(t, retry, 2, 0)

	setPhase(t, perm, 1, corev1.PodFailed, testutil.WithExitCode("trainer", 3, "Error"))
	setPhase(t, retry, 1, corev1.PodFailed, testutil.WithExitCode("trainer", 137, "OOMKilled"))

	j := waitState(t, perm, mlv1.StateFailed)
	assert.Equal(t, "PermanentExitCode", condition(j, "Failed").Reason)
	assert.Contains(t, condition(j, "Failed").Message, "rank 1 (pod perm-worker-1) failed: exit code 3")
	assert.Equal(t, int32(0), j.Status.Restarts)

	j = waitState(t, retry, mlv1.StateRestarting)
	assert.Equal(t, int32(1), j.Status.Restarts)
	assert.Contains(t, restartCause(j), "exit code 137 (OOMKilled)")
	step(t, retry, 10*time.Second)
	runGang(t, retry, 2, 1)
}

// Changing numWorkers on a running job re-forms the gang at the new size (a
// disruption); on a suspended job it takes effect on resume.
func TestRescale(t *testing.T) {
	ns := testutil.Namespace(t, env.Client)
	job := create(t, testutil.TrainingJob("scale", ns).Workers(2).GPUs(0).Framework(mlv1.FrameworkTensorFlow))
	runGang(t, job, 2, 0)
	// Rank 0 reported a checkpoint (as a scrape records it): the re-formed
	// gang resumes from it.
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		j := get(t, job)
		j.Status.LastCheckpoint = &mlv1.CheckpointStatus{Epoch: 5, Path: "/checkpoints/epoch-5"}
		return env.Client.Status().Update(ctx, j)
	}))

	update(t, job, func(j *mlv1.TrainingJob) { j.Spec.NumWorkers = 4 })
	got := waitPods(t, job, 4, 1)
	j := get(t, job)
	assert.Equal(t, int32(1), j.Status.Disruptions)
	assert.Equal(t, int32(0), j.Status.Restarts)
	assert.Contains(t, restartCause(j), "Rescaled: numWorkers changed from 2 to 4")
	for _, p := range got {
		e := testutil.EnvOf(&p)
		assert.Equal(t, "4", e["WORLD_SIZE"])
		assert.Equal(t, "4", e["NUM_WORKERS"])
		assert.Contains(t, e["TF_CONFIG"], "scale-worker-3.scale-workers")
		assert.Equal(t, "/checkpoints/epoch-5", e["RESUME_FROM_CHECKPOINT"], p.Name)
	}
	runGang(t, job, 4, 1)

	// Suspended: the new size waits for resume and costs no disruption.
	update(t, job, func(j *mlv1.TrainingJob) { j.Spec.Suspend = ptrTo(true) })
	waitState(t, job, mlv1.StateSuspended)
	waitPods(t, job, 0, 1)
	update(t, job, func(j *mlv1.TrainingJob) { j.Spec.NumWorkers = 3 })
	update(t, job, func(j *mlv1.TrainingJob) { j.Spec.Suspend = ptrTo(false) })
	got = waitPods(t, job, 3, 1)
	assert.Equal(t, "3", testutil.EnvOf(&got[0])["WORLD_SIZE"])
	assert.Equal(t, int32(1), get(t, job).Status.Disruptions)
}

// trainerServer serves the progress contract like rank 0 would.
type trainerServer struct {
	srv  *httptest.Server
	fail atomic.Bool
	body atomic.Value
	// served counts the /metrics bodies served.
	served atomic.Int64
}

func newTrainerServer(t *testing.T, body string) *trainerServer {
	ts := &trainerServer{}
	ts.body.Store(body)
	ts.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ts.fail.Load() || r.URL.Path != "/metrics" {
			http.Error(w, "trainer busy", http.StatusInternalServerError)
			return
		}
		_, _ = w.Write([]byte(ts.body.Load().(string)))
		ts.served.Add(1)
	}))
	t.Cleanup(ts.srv.Close)
	return ts
}

func (ts *trainerServer) port(t *testing.T) int32 {
	_, p, err := net.SplitHostPort(ts.srv.Listener.Addr().String())
	require.NoError(t, err)
	n, _ := strconv.Atoi(p)
	return int32(n)
}

// The operator reads rank 0's progress into status; scrape failures set a
// condition and never fail the job; the next attempt resumes from the
// checkpoint rank 0 reported.
func TestProgressScrapeAndResumeFromCheckpoint(t *testing.T) {
	ns := testutil.Namespace(t, env.Client)
	ts := newTrainerServer(t, "training_epoch 4\ntraining_loss 0.5\ntraining_accuracy 0.8\n"+
		"training_throughput_samples_per_second 100\ntraining_checkpoint_epoch 3\ntraining_checkpoint_timestamp_seconds 1767000000\n")
	w := testutil.TrainingJob("prog", ns).Workers(2).GPUs(0).Hyperparameter("epochs", 10)
	w.Spec.Metrics.Port = ts.port(t)
	job := create(t, w)

	first := waitPods(t, job, 2, 0)
	_, hasResume := testutil.EnvOf(&first[0])["RESUME_FROM_CHECKPOINT"]
	assert.False(t, hasResume, "attempt 0 has no checkpoint to resume from")
	setAll(t, job, 2, corev1.PodRunning, testutil.WithPodIP("127.0.0.1"))

	j := waitJob(t, job, "progress", func(j *mlv1.TrainingJob) bool { return j.Status.Progress == "40%" })
	assert.Equal(t, int32(4), j.Status.CurrentEpoch)
	assert.Equal(t, int32(10), j.Status.TotalEpochs)
	require.NotNil(t, j.Status.Metrics)
	assert.Equal(t, 0.5, *j.Status.Metrics.Loss)
	assert.Equal(t, 0.8, *j.Status.Metrics.Accuracy)
	assert.Equal(t, 100.0, *j.Status.Metrics.Throughput)
	require.NotNil(t, j.Status.LastCheckpoint)
	assert.Equal(t, int32(3), j.Status.LastCheckpoint.Epoch)
	assert.Equal(t, "/checkpoints/epoch-3", j.Status.LastCheckpoint.Path)
	assert.Equal(t, int64(1767000000), j.Status.LastCheckpoint.Time.Unix())
	assert.Equal(t, "True", condition(j, "ProgressAvailable").Status)

	// The next scrape, 15 s later, moves the progress.
	ts.body.Store("training_epoch 5\ntraining_checkpoint_epoch 4\n")
	step(t, job, 15*time.Second)
	j = waitJob(t, job, "progress 50%", func(j *mlv1.TrainingJob) bool { return j.Status.Progress == "50%" })
	assert.Equal(t, int32(4), j.Status.LastCheckpoint.Epoch)

	// A failing endpoint sets a condition; the job keeps running.
	ts.fail.Store(true)
	step(t, job, 15*time.Second)
	j = waitJob(t, job, "scrape failure", func(j *mlv1.TrainingJob) bool {
		c := condition(j, "ProgressAvailable")
		return c != nil && c.Status == "False"
	})
	assert.Equal(t, "ScrapeFailed", condition(j, "ProgressAvailable").Reason)
	assert.Contains(t, condition(j, "ProgressAvailable").Message, "500")
	assert.Equal(t, mlv1.StateRunning, j.Status.State)
	assert.Equal(t, "50%", j.Status.Progress, "a failed scrape keeps the last progress")

	// Rank 1 fails: attempt 1 resumes from epoch 4's checkpoint.
	setPhase(t, job, 1, corev1.PodFailed, testutil.WithExitCode("trainer", 1, "Error"))
	waitState(t, job, mlv1.StateRestarting)
	waitPods(t, job, 0, 0)
	step(t, job, 10*time.Second)
	for _, p := range waitPods(t, job, 2, 1) {
		e := testutil.EnvOf(&p)
		assert.Equal(t, "/checkpoints/epoch-4", e["RESUME_FROM_CHECKPOINT"], "pod %s", p.Name)
		assert.Equal(t, "/checkpoints", e["CHECKPOINT_DIR"])
	}
}
