package trainingjob_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/test/testutil"
)

// elasticJob is a CPU pytorch job of 3 ranks, elastic down to 2, that
// fails on its first counted restart (backoffLimit 0): a shrink that spent
// the retry budget would fail it.
func elasticJob(t *testing.T, name, ns string) *mlv1.TrainingJob {
	t.Helper()
	w := testutil.TrainingJob(name, ns).Workers(3).GPUs(0).BackoffLimit(0)
	w.Spec.Elastic = &mlv1.ElasticSpec{MinWorkers: 2, MaxWorkers: 3}
	return create(t, w)
}

// bind binds a rank's pod to a node, as the scheduler would.
func bind(t *testing.T, job *mlv1.TrainingJob, rank int32, node string) {
	t.Helper()
	require.NoError(t, testutil.BindPod(ctx, env.Client, job.Namespace, mlv1.WorkerPodName(job.Name, rank), node))
}

// setCheckpoint writes status.lastCheckpoint as a scrape of rank 0 would.
func setCheckpoint(t *testing.T, job *mlv1.TrainingJob, cp *mlv1.CheckpointStatus) {
	t.Helper()
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		j := get(t, job)
		j.Status.LastCheckpoint = cp
		return env.Client.Status().Update(ctx, j)
	}))
}

// finishAttempt confirms, as kubelets would, the termination of every pod
// of an attempt the operator deleted, until none is left.
func finishAttempt(t *testing.T, job *mlv1.TrainingJob, attempt string) {
	t.Helper()
	testutil.Eventually(t, func() bool {
		if err := testutil.FinishTerminatingPods(ctx, env.Client, job.Namespace, client.MatchingLabels{mlv1.LabelTrainingJob: job.Name}); err != nil {
			return false
		}
		for _, p := range pods(t, job) {
			if p.Labels[mlv1.LabelRestartAttempt] == attempt {
				return false
			}
		}
		return true
	}, "the pods of attempt "+attempt+" gone")
}

// waitShrunk places ranks 0 and 1 of the job's attempt on node and leaves
// rank 2 unschedulable; it checks that nothing happens just before the
// elastic grace (2m after the attempt's pods were created, on the injected
// clock) and that at it the gang shrinks to the 2 placed ranks: reason and
// event Resized, status.worldSize 2 of 3, a disruption, no restart.
func waitShrunk(t *testing.T, job *mlv1.TrainingJob, node string, disruptionsBefore int32) {
	t.Helper()
	for r := int32(0); r < 2; r++ {
		bind(t, job, r, node)
		setPhase(t, job, r, corev1.PodRunning)
	}
	setPhase(t, job, 2, corev1.PodPending, unschedulable)
	j := waitJob(t, job, "Running=False Unschedulable", func(j *mlv1.TrainingJob) bool {
		c := condition(j, mlv1.TrainingJobRunning)
		return c != nil && c.Reason == mlv1.ReasonUnschedulable && j.Status.PlacementStartTime != nil
	})
	start := j.Status.PlacementStartTime.Time

	clk.SetTime(start.Add(mlv1.ElasticShrinkGrace - time.Second))
	passes := reconcilePasses(t)
	poke(t, job)
	testutil.Eventually(t, func() bool { return reconcilePasses(t) > passes }, "a pass before the grace")
	j = get(t, job)
	assert.Equal(t, disruptionsBefore, j.Status.Disruptions, "shrunk before the grace")
	assert.Equal(t, &mlv1.WorldSize{Current: 3, Desired: 3}, j.Status.WorldSize)

	clk.SetTime(start.Add(mlv1.ElasticShrinkGrace))
	poke(t, job)
	j = waitJob(t, job, "Restarting=True Resized", func(j *mlv1.TrainingJob) bool {
		c := condition(j, mlv1.TrainingJobRestarting)
		return c != nil && c.Status == "True" && c.Reason == mlv1.ReasonResized
	})
	assert.Equal(t, disruptionsBefore+1, j.Status.Disruptions)
	assert.EqualValues(t, 0, j.Status.Restarts, "a shrink does not count against backoffLimit")
	assert.EqualValues(t, 0, j.Status.PlacementTimeouts, "shrunk, not released")
	assert.Equal(t, &mlv1.WorldSize{Current: 2, Desired: 3}, j.Status.WorldSize)
	assert.Contains(t, condition(j, mlv1.TrainingJobRestarting).Message, "rank 2 (pod "+job.Name+"-worker-2) still unschedulable 2m0s "+
		"after the gang's pods were created (elastic grace 2m0s)")
	assert.Contains(t, condition(j, mlv1.TrainingJobRestarting).Message,
		"resizing the gang from 3 to the 2 ranks that were placed (spec.elastic.minWorkers 2) from the latest checkpoint")
	waitEventNote(t, job, mlv1.ReasonResized, "a Resized event saying from 3 to 2 and why",
		"gang restart for a resize: ", "from 3 to the 2 ranks")
}

// A 3-rank elastic job (min 2) loses the node of rank 2. The gang restarts
// (a disruption), and the new attempt's rank 2 stays unschedulable: at the
// elastic grace the gang goes on with the 2 ranks that were placed, from the
// latest checkpoint, with WORLD_SIZE, NUM_WORKERS and torchrun's --nnodes
// to match; status.worldSize says 2 of 3, event Resized says why, and the
// retry budget (backoffLimit 0) is untouched.
func TestElasticGangShrinksAfterNodeLoss(t *testing.T) {
	ns := testutil.Namespace(t, env.Client)
	keep, err := testutil.ReadyNode(ctx, env.Client, ns+"-keep", nil)
	require.NoError(t, err)
	lost, err := testutil.ReadyNode(ctx, env.Client, ns+"-lost", nil)
	require.NoError(t, err)
	job := elasticJob(t, "shrink", ns)

	waitPods(t, job, 3, 0)
	bind(t, job, 0, keep.Name)
	bind(t, job, 1, keep.Name)
	bind(t, job, 2, lost.Name)
	setAll(t, job, 3, corev1.PodRunning)
	j := waitState(t, job, mlv1.StateRunning)
	assert.Equal(t, &mlv1.WorldSize{Current: 3, Desired: 3}, j.Status.WorldSize)
	setCheckpoint(t, job, &mlv1.CheckpointStatus{Epoch: 5, Path: "/checkpoints/epoch-5"})

	// Rank 2's node is taken away: a disruption, the whole gang restarts.
	require.NoError(t, env.Client.Delete(ctx, lost))
	j = waitJob(t, job, "node lost", func(j *mlv1.TrainingJob) bool { return j.Status.Disruptions == 1 })
	assert.Contains(t, restartCause(j), "NodeLost: rank 2")
	finishAttempt(t, job, "0")

	// Attempt 1 asks for 3 ranks again; only 2 fit.
	waitPods(t, job, 3, 1)
	waitShrunk(t, job, keep.Name, 1)
	finishAttempt(t, job, "1")

	// Attempt 2 has 2 ranks, resumes from the checkpoint, and says so.
	got := waitPods(t, job, 2, 2)
	for _, p := range got {
		e := testutil.EnvOf(&p)
		assert.Equal(t, "2", e["WORLD_SIZE"], p.Name)
		assert.Equal(t, "2", e["NUM_WORKERS"], p.Name)
		assert.Equal(t, "2:3", e["PET_NNODES"], p.Name)
		assert.Equal(t, "c10d", e["PET_RDZV_BACKEND"], p.Name)
		assert.Equal(t, "shrink-worker-0.shrink-workers."+ns+".svc:29500", e["PET_RDZV_ENDPOINT"], p.Name)
		assert.Equal(t, string(j.UID), e["PET_RDZV_ID"], p.Name)
		assert.Equal(t, "0", e["PET_MAX_RESTARTS"], p.Name)
		assert.Equal(t, "/checkpoints/epoch-5", e["RESUME_FROM_CHECKPOINT"], p.Name)
		assert.Equal(t, "2", p.Labels[mlv1.LabelNumWorkers], p.Name)
	}
	runGang(t, job, 2, 2)
	j = get(t, job)
	assert.Equal(t, &mlv1.WorldSize{Current: 2, Desired: 3}, j.Status.WorldSize)
	assert.EqualValues(t, 0, j.Status.Restarts)
	assert.Equal(t, mlv1.StateRunning, j.Status.State)
	assert.Contains(t, condition(j, mlv1.TrainingJobRunning).Message, "all 2 ranks are running (attempt 2)")
}

// A shrunk elastic gang grows back to numWorkers once rank 0 reports a
// checkpoint its attempt wrote, and resumes from it at full size. (Here
// the gang shrank at its first placement: only 2 of 3 ranks fit.)
func TestElasticGangGrowsBackAtACheckpoint(t *testing.T) {
	ns := testutil.Namespace(t, env.Client)
	node, err := testutil.ReadyNode(ctx, env.Client, ns+"-node", nil)
	require.NoError(t, err)
	job := elasticJob(t, "grow", ns)
	waitPods(t, job, 3, 0)
	waitShrunk(t, job, node.Name, 0)
	finishAttempt(t, job, "0")
	runGang(t, job, 2, 1)

	// The checkpoint the shrunk attempt resumed from (none here) or one an
	// earlier attempt wrote does not grow it.
	setCheckpoint(t, job, &mlv1.CheckpointStatus{Epoch: 2, Attempt: ptr.To[int32](0), Path: "/checkpoints/epoch-2"})
	passes := reconcilePasses(t)
	poke(t, job)
	testutil.Eventually(t, func() bool { return reconcilePasses(t) > passes }, "a pass after an old checkpoint")
	assert.EqualValues(t, 1, get(t, job).Status.Disruptions, "grown from a checkpoint of an earlier attempt")

	setCheckpoint(t, job, &mlv1.CheckpointStatus{Epoch: 3, Attempt: ptr.To[int32](1), Path: "/checkpoints/epoch-3"})
	j := waitJob(t, job, "grown", func(j *mlv1.TrainingJob) bool { return j.Status.Disruptions == 2 })
	// The shrunk attempt's pods were never bound, so they go at once and
	// the new gang may exist already: restartCause reads the cause either
	// way (Restarting=True, or GangRecreated keeping the last cause).
	assert.Contains(t, restartCause(j),
		"Resized: rank 0 saved a checkpoint (epoch 3) since the gang shrank to 2 ranks; growing it back to 3 ranks (numWorkers)")
	assert.Equal(t, &mlv1.WorldSize{Current: 3, Desired: 3}, j.Status.WorldSize)
	assert.EqualValues(t, 0, j.Status.Restarts)
	finishAttempt(t, job, "1")

	got := waitPods(t, job, 3, 2)
	for _, p := range got {
		e := testutil.EnvOf(&p)
		assert.Equal(t, "3", e["WORLD_SIZE"], p.Name)
		assert.Equal(t, "2:3", e["PET_NNODES"], p.Name)
		assert.Equal(t, "/checkpoints/epoch-3", e["RESUME_FROM_CHECKPOINT"], p.Name)
	}
	runGang(t, job, 3, 2)
	waitEventNote(t, job, mlv1.ReasonResized, "a Resized event for the grow, besides the shrink's",
		"gang restart for a resize: rank 0 saved a checkpoint (epoch 3) since the gang shrank to 2 ranks; growing it back to 3 ranks")
}
