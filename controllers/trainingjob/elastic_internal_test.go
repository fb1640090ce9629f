package trainingjob

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

// elasticTestJob is a pytorch job of numWorkers ranks (2 GPUs, so
// nprocPerNode 2) with spec.elastic min..max, running attempt 4.
func elasticTestJob(numWorkers, minWorkers, maxWorkers int32) *mlv1.TrainingJob {
	job := testJob(mlv1.FrameworkPyTorch)
	job.Spec.NumWorkers = numWorkers
	job.Spec.Elastic = &mlv1.ElasticSpec{MinWorkers: minWorkers, MaxWorkers: maxWorkers}
	job.Status.Disruptions = 4
	return job
}

// attemptGang builds the current attempt's pods of job (AttemptWorkers of
// them), each bound to a node and running; opts apply to rank `rank` only.
func attemptGang(job *mlv1.TrainingJob, rank int32, opts ...podOpt) []*corev1.Pod {
	var pods []*corev1.Pod
	for r := int32(0); r < job.AttemptWorkers(); r++ {
		p := desiredWorkerPod(job, r, job.Status.Attempt(), &testCfg, false)
		p.Spec.NodeName, p.Status.Phase = "gpu-0", corev1.PodRunning
		if r == rank {
			for _, o := range opts {
				o(p)
			}
		}
		pods = append(pods, p)
	}
	return pods
}

// envMap is a container's env by name.
func envMap(p *corev1.Pod) map[string]string {
	m := map[string]string{}
	for _, e := range p.Spec.Containers[0].Env {
		m[e.Name] = e.Value
	}
	return m
}

// An elastic job's pods get torchrun's elastic rendezvous (c10d on rank
// 0's stable name, the job's UID, no torchrun restarts, --nnodes min:max),
// and the size of the current attempt: a shrunk gang of 2 of 3 ranks says
// 2 ranks everywhere the static contract does. A fixed-size job gets none
// of the rendezvous variables.
func TestElasticEnv(t *testing.T) {
	job := elasticTestJob(3, 2, 3)
	job.Status.WorldSize = &mlv1.WorldSize{Current: 2, Desired: 3}
	if diff := cmp.Diff([]corev1.EnvVar{
		{Name: "PET_RDZV_BACKEND", Value: "c10d"},
		{Name: "PET_RDZV_ENDPOINT", Value: "bert-worker-0.bert-workers.team-a.svc:29500"},
		{Name: "PET_RDZV_ID", Value: "uid-1"},
		{Name: "PET_RDZV_CONF", Value: "is_host=true"},
		{Name: "PET_MAX_RESTARTS", Value: "0"},
	}, elasticEnv(job, 0)); diff != "" {
		t.Errorf("elasticEnv (-want +got):\n%s", diff)
	}

	pod := desiredWorkerPod(job, 1, job.Status.Attempt(), &testCfg, false)
	got := envMap(pod)
	want := map[string]string{"WORLD_SIZE": "4", "NUM_WORKERS": "2", "PET_NNODES": "2:3", "PET_NPROC_PER_NODE": "2",
		"RANK": "1", "PET_RDZV_BACKEND": "c10d", "PET_RDZV_ENDPOINT": "bert-worker-0.bert-workers.team-a.svc:29500",
		"PET_RDZV_ID": "uid-1", "PET_RDZV_CONF": "is_host=false", "PET_MAX_RESTARTS": "0"}
	for name := range got {
		if _, ok := want[name]; !ok {
			delete(got, name)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("a shrunk elastic rank's env (-want +got):\n%s", diff)
	}
	assert.Equal(t, "2", pod.Labels[mlv1.LabelNumWorkers], "the pod is labelled with the attempt's size")

	fixed := testJob(mlv1.FrameworkPyTorch)
	fixed.Spec.NumWorkers = 3
	assert.Nil(t, elasticEnv(fixed, 0))
	env := envMap(desiredWorkerPod(fixed, 0, 0, &testCfg, false))
	assert.Equal(t, "3", env["PET_NNODES"])
	for _, name := range mlv1.ElasticEnvNames {
		assert.NotContains(t, env, name)
	}
}

// shrinkOf: ranks 0 and 1 placed, rank 2 unschedulable. An elastic job
// (min 2) shrinks to 2 at placementStartTime + 2m, or at a shorter
// placement timeout; before that decide asks for a look at that time.
// With min 3, or without spec.elastic, it never shrinks (the placement
// timeout applies as before).
func TestShrinkOf(t *testing.T) {
	state := func(job *mlv1.TrainingJob, now time.Time, timeout time.Duration) gangState {
		job.Status.GangPlacement = mlv1.GangPlacementTimeout
		job.Status.PlacementStartTime = &metav1.Time{Time: t0}
		return gangState{job: job, pods: attemptGang(job, 2, unschedulablePod), now: now, placementTimeout: timeout}
	}

	g := state(elasticTestJob(3, 2, 3), t0.Add(time.Minute), 10*time.Minute)
	assert.Equal(t, decision{kind: keepGoing, recheckAt: t0.Add(2 * time.Minute)}, decide(g))

	g.now = t0.Add(2 * time.Minute)
	assert.Equal(t, decision{kind: restartForDisruption, reason: mlv1.ReasonResized, workers: 2,
		message: "rank 2 (pod bert-worker-2) still unschedulable 2m0s after the gang's pods were created (elastic grace 2m0s): " +
			"0/6 nodes are available: 4 Insufficient nvidia.com/gpu.; resizing the gang from 3 to the 2 ranks that were placed " +
			"(spec.elastic.minWorkers 2) from the latest checkpoint"}, decide(g))

	short := state(elasticTestJob(3, 2, 3), t0.Add(time.Minute), time.Minute)
	d := decide(short)
	assert.Equal(t, restartForDisruption, d.kind, "the placement timeout is shorter: shrink at it, not release")
	assert.Contains(t, d.message, "(placementTimeout 1m0s)")

	atMin := state(elasticTestJob(3, 3, 3), t0.Add(10*time.Minute), 10*time.Minute)
	assert.Equal(t, restartForPlacement, decide(atMin).kind, "below minWorkers: released at the placement timeout as before")

	fixed := testJob(mlv1.FrameworkPyTorch)
	fixed.Spec.NumWorkers = 3
	_, _, ok := shrinkOf(state(fixed, t0.Add(time.Hour), 0))
	assert.False(t, ok, "a fixed-size job never shrinks")

	// Under a gang scheduler no rank is bound until all fit: none placed.
	none := state(elasticTestJob(3, 1, 3), t0.Add(time.Hour), 0)
	for _, p := range none.pods {
		unschedulablePod(p)
	}
	_, _, ok = shrinkOf(none)
	assert.False(t, ok, "no rank placed")
}

// growOf: a gang running shrunk (2 of 3) grows back to numWorkers once
// rank 0 reports a checkpoint this attempt wrote (by its attempt, or by
// its time after the attempt's pods were created); not for the checkpoint
// it resumed from, nor while a rank is not running.
func TestGrowOf(t *testing.T) {
	state := func(cp *mlv1.CheckpointStatus, opts ...podOpt) gangState {
		job := elasticTestJob(3, 2, 3)
		job.Status.WorldSize = &mlv1.WorldSize{Current: 2, Desired: 3}
		job.Status.PlacementStartTime = &metav1.Time{Time: t0}
		job.Status.LastCheckpoint = cp
		return gangState{job: job, pods: attemptGang(job, 1, opts...), now: t0.Add(time.Hour)}
	}
	this, earlier := ptr.To[int32](4), ptr.To[int32](3)
	after, before := &metav1.Time{Time: t0.Add(time.Minute)}, &metav1.Time{Time: t0.Add(-time.Minute)}

	d := decide(state(&mlv1.CheckpointStatus{Epoch: 7, Attempt: this}))
	assert.Equal(t, decision{kind: restartForDisruption, reason: mlv1.ReasonResized, workers: 3,
		message: "rank 0 saved a checkpoint (epoch 7) since the gang shrank to 2 ranks; growing it back to 3 ranks (numWorkers) " +
			"from that checkpoint, and shrinking again if ranks stay unschedulable"}, d)
	assert.Equal(t, restartForDisruption, decide(state(&mlv1.CheckpointStatus{Epoch: 7, Time: after})).kind, "written after the pods")

	for name, s := range map[string]gangState{
		"no checkpoint":                  state(nil),
		"the checkpoint it resumed from": state(&mlv1.CheckpointStatus{Epoch: 6, Attempt: earlier, Time: after}),
		"written before the pods":        state(&mlv1.CheckpointStatus{Epoch: 6, Time: before}),
		"no attempt, no time":            state(&mlv1.CheckpointStatus{Epoch: 7}),
		"a rank not running":             state(&mlv1.CheckpointStatus{Epoch: 7, Attempt: this}, phase(corev1.PodPending)),
	} {
		_, ok := growOf(s)
		assert.False(t, ok, name)
	}

	full := state(&mlv1.CheckpointStatus{Epoch: 7, Attempt: this})
	full.job.Status.WorldSize = &mlv1.WorldSize{Current: 3, Desired: 3}
	full.pods = attemptGang(full.job, -1)
	_, ok := growOf(full)
	assert.False(t, ok, "not shrunk")
}
