//go:build e2e_real

package e2ereal

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/test/testutil"
)

// elasticSlot is the elastic test's own extended resource: one a rank, as
// many on the node as the test says. Taking one away is what a lost node
// or a preempted one does to a gang on a real cluster (the capacity its
// rank needs is gone), without touching the only node the other tests run
// on.
const elasticSlot corev1.ResourceName = "example.com/elastic-slot"

// resumedFrom is the example trainer's rank 0 line of a resume: the
// checkpoint, its step and the attempt that wrote it.
var resumedFrom = regexp.MustCompile(`rank 0: resumed from checkpoint (\S+) at step (\d+) \(epoch \d+, written by attempt (\d+)\)`)

// testElasticGangShrinksAndGrowsBack: a real three-rank torchrun job with
// spec.elastic {minWorkers 2, maxWorkers 3} (c10d rendezvous on rank 0's
// stable DNS name, from the operator's env alone), one elastic slot a
// rank, three slots on the node. In epoch 2 a slot goes away and rank 2's
// pod is deleted, as when its node is lost. The gang restarts (a
// disruption), its third rank cannot be placed, and at the placement
// timeout the gang goes on with the two it could place: event Resized,
// status.worldSize {2, 3}, torchrun forming a world of 2 and resuming from
// the latest checkpoint. The slot comes back: at the first checkpoint the
// shrunk gang writes it grows back to 3 (Resized again), torchrun forms a
// world of 3 resuming from that checkpoint, and the job Completes with
// restarts 0.
func testElasticGangShrinksAndGrowsBack(t *testing.T) {
	ctx := context.Background()
	pushTrainerImage(t, TrainerImage)
	ns := namespace(t)
	name := "elastic"
	checkpointVolume(t, ns, name)
	setSlots := advertiseResource(t, elasticSlot, 3)

	job := trainerJob(ns, name, 4, 40)
	job.Spec.NumWorkers = 3
	job.Spec.Elastic = &mlv1.ElasticSpec{MinWorkers: 2, MaxWorkers: 3}
	// Shorter than the 2-minute elastic grace: it is then the grace.
	job.Spec.Scheduling.PlacementTimeout = &metav1.Duration{Duration: 30 * time.Second}
	job.Spec.Resources = corev1.ResourceRequirements{Limits: corev1.ResourceList{elasticSlot: resource.MustParse("1")}}
	j := createTracked(t, job)
	got, since := j.got, j.since

	// Attempt 0: three ranks, a world of 3, epoch 1's checkpoint in the
	// status (rank 0 is in epoch 2).
	j.waitFor(t, 14*time.Minute, "attempt 0 running with a checkpoint", func() bool {
		return got.Status.Restarts > 0 ||
			got.Status.State == mlv1.StateRunning && got.Status.LastCheckpoint != nil && got.Status.LastCheckpoint.Epoch >= 1
	})
	require.Zero(t, got.Status.Restarts, "attempt 0 failed: conditions %+v\n%s", got.Status.Conditions, node.NamespaceDiagnostics(ctx, ns))
	require.Equal(t, mlv1.StateRunning, got.Status.State, "conditions %+v\n%s", got.Status.Conditions, node.NamespaceDiagnostics(ctx, ns))
	require.Equal(t, &mlv1.WorldSize{Current: 3, Desired: 3}, got.Status.WorldSize)
	pods := attemptPods(t, ns, name, 0, 3)
	for _, p := range pods {
		env := testutil.EnvOf(p)
		require.Equal(t, "3", env[mlv1.EnvWorldSize], "%s", p.Name)
		require.Equal(t, "2:3", env[mlv1.EnvPETNNodes], "%s", p.Name)
		require.Equal(t, mlv1.ElasticRendezvousBackend, env[mlv1.EnvPETRdzvBackend], "%s", p.Name)
	}
	rank0 := rankLog(t, ns, name, 0)
	require.Contains(t, rank0, "attempt 0, world size 3", "torchrun formed a world of 3:\n%s", rank0)
	t.Logf("%s: attempt 0 runs 3 ranks (torchrun world size 3); status.lastCheckpoint %s", since(), got.Status.LastCheckpoint.Path)

	// A slot goes, and with it rank 2's pod.
	setSlots(2)
	victim := pods[2]
	require.NoError(t, node.Client.Delete(ctx, victim))
	t.Logf("%s: the node has 2 %s left; deleted rank 2's pod %s", since(), elasticSlot, victim.Name)

	// The gang restarts; one rank stays unschedulable; at the placement
	// timeout the gang goes on with the 2 it could place.
	j.waitFor(t, 8*time.Minute, "the gang running shrunk to 2", func() bool {
		return got.Status.WorldSize != nil && got.Status.WorldSize.Current == 2 && got.Status.State == mlv1.StateRunning
	})
	require.Equal(t, &mlv1.WorldSize{Current: 2, Desired: 3}, got.Status.WorldSize)
	shrink := waitEventNote(t, ns, "TrainingJob", name, mlv1.ReasonResized,
		"resizing the gang from 3 to the 2 ranks that were placed (spec.elastic.minWorkers 2) from the latest checkpoint")
	t.Logf("%s: event Resized: %s", since(), shrink)
	require.Contains(t, shrink, "(placementTimeout 30s)")
	require.Contains(t, shrink, "Insufficient "+string(elasticSlot))
	shrunk := int(got.Status.Attempt())
	require.Zero(t, got.Status.Restarts, "a lost rank and a resize are disruptions, not failures")
	pods = attemptPods(t, ns, name, shrunk, 2)
	for _, p := range pods {
		require.Equal(t, "2", testutil.EnvOf(p)[mlv1.EnvWorldSize], "%s", p.Name)
		require.Equal(t, "2", p.Labels[mlv1.LabelNumWorkers], "%s", p.Name)
	}
	require.Error(t, node.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: mlv1.WorkerPodName(name, 2)}, &corev1.Pod{}),
		"the shrunk attempt has no rank 2")
	var log0 string
	require.NoError(t, poll(5*time.Minute, func() bool {
		log0 = rankLog(t, ns, name, 0)
		return strings.Contains(log0, "epoch ") && strings.Contains(log0, "started at step")
	}), "the shrunk attempt's rank 0 never started an epoch:\n%s", log0)
	require.Contains(t, log0, fmt.Sprintf("attempt %d, world size 2", shrunk), "torchrun formed a world of 2:\n%s", log0)
	resumed := resumedFrom.FindStringSubmatch(log0)
	require.NotNil(t, resumed, "the shrunk attempt did not resume from a checkpoint:\n%s", log0)
	shrunkFrom, _ := strconv.Atoi(resumed[2])
	t.Logf("%s: attempt %d runs 2 ranks (torchrun world size 2), resumed from %s at step %d", since(), shrunk, resumed[1], shrunkFrom)

	// The slot comes back: at the shrunk gang's first checkpoint it grows
	// back to 3.
	setSlots(3)
	j.waitFor(t, 8*time.Minute, "the gang running grown back to 3", func() bool {
		return got.Status.WorldSize != nil && got.Status.WorldSize.Current == 3 &&
			int(got.Status.Attempt()) > shrunk && got.Status.State == mlv1.StateRunning
	})
	grow := waitEventNote(t, ns, "TrainingJob", name, mlv1.ReasonResized, "growing it back to 3 ranks (numWorkers)")
	t.Logf("%s: event Resized: %s", since(), grow)
	grown := int(got.Status.Attempt())
	pods = attemptPods(t, ns, name, grown, 3)
	for _, p := range pods {
		require.Equal(t, "3", testutil.EnvOf(p)[mlv1.EnvWorldSize], "%s", p.Name)
	}

	j.requireCompleted(t, 10*time.Minute)
	require.Zero(t, got.Status.Restarts, "restarts")
	require.Zero(t, got.Status.PlacementTimeouts, "the gang shrank at its placement timeout instead of being released")
	require.Equal(t, &mlv1.WorldSize{Current: 3, Desired: 3}, got.Status.WorldSize)
	log0 = rankLog(t, ns, name, 0)
	require.Contains(t, log0, fmt.Sprintf("attempt %d, world size 3", grown), "torchrun formed a world of 3 again:\n%s", log0)
	resumed = resumedFrom.FindStringSubmatch(log0)
	require.NotNil(t, resumed, "the grown attempt did not resume from a checkpoint:\n%s", log0)
	grewFrom, _ := strconv.Atoi(resumed[2])
	require.Equal(t, strconv.Itoa(shrunk), resumed[3], "the grown attempt resumed from a checkpoint the shrunk one wrote:\n%s", log0)
	require.Greater(t, grewFrom, shrunkFrom, "the shrunk attempt trained on")
	require.Contains(t, log0, "rank 0: training complete epochs=4 steps=64")
	t.Logf("%s: job Completed; attempt %d ran 3 ranks again from %s (step %d, written by attempt %d); disruptions %d, restarts %d",
		since(), grown, resumed[1], grewFrom, shrunk, got.Status.Disruptions, got.Status.Restarts)
	for _, line := range strings.Split(strings.TrimSpace(log0), "\n") {
		// torchrun's --tee prefixes each line with its local rank.
		if strings.Contains(line, "rank 0:") {
			t.Logf("attempt %d rank 0 | %s", grown, line)
		}
	}
	t.Logf("kubectl get tj:\n%s", kubectlGet("tj", "-n", ns))
}

// trackedJob follows a TrainingJob a test created: its latest read (got)
// and the time since its creation.
type trackedJob struct {
	key   client.ObjectKey
	began time.Time
	got   *mlv1.TrainingJob
}

// createTracked creates job through the operator's webhooks and follows it.
func createTracked(t *testing.T, job *mlv1.TrainingJob) *trackedJob {
	t.Helper()
	require.NoError(t, opClient.Create(context.Background(), job))
	return &trackedJob{key: client.ObjectKeyFromObject(job), began: time.Now(), got: &mlv1.TrainingJob{}}
}

// get reads the job into got; false when the read failed.
func (j *trackedJob) get() bool { return opClient.Get(context.Background(), j.key, j.got) == nil }

// ended reports whether the last read showed the job Completed or Failed.
func (j *trackedJob) ended() bool {
	return j.got.Status.State == mlv1.StateFailed || j.got.Status.State == mlv1.StateCompleted
}

// since is the time since the job was created, to the second.
func (j *trackedJob) since() time.Duration { return time.Since(j.began).Round(time.Second) }

// waitFor polls the job until cond holds on a fresh read or the job ends,
// and fails the test after timeout with what describe says (read only
// then).
func (j *trackedJob) waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if err := poll(timeout, func() bool { return j.get() && (j.ended() || cond()) }); err != nil {
		t.Fatalf("%s: %v\n%s", what, err, j.describe())
	}
}

// describe is the job's last read state and its namespace's pods and
// events, for a failure message.
func (j *trackedJob) describe() string {
	st := &j.got.Status
	return fmt.Sprintf("state %q, worldSize %+v, conditions %+v\n%s", st.State, st.WorldSize, st.Conditions,
		node.NamespaceDiagnostics(context.Background(), j.key.Namespace))
}

// requireCompleted waits up to timeout for the job to end and requires it
// Completed, with its namespace's state when it is not.
func (j *trackedJob) requireCompleted(t *testing.T, timeout time.Duration) {
	t.Helper()
	j.waitFor(t, timeout, "the job never ended", func() bool { return false })
	if j.got.Status.State != mlv1.StateCompleted {
		t.Fatalf("the job ended %s, not Completed: %s", j.got.Status.State, j.describe())
	}
}

// attemptPods waits until the n ranks of attempt run, and returns their
// pods by rank.
func attemptPods(t *testing.T, ns, name string, attempt, n int) []*corev1.Pod {
	t.Helper()
	ctx := context.Background()
	pods := make([]*corev1.Pod, n)
	require.NoError(t, poll(5*time.Minute, func() bool {
		for rank := range n {
			p := &corev1.Pod{}
			if node.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: mlv1.WorkerPodName(name, int32(rank))}, p) != nil ||
				p.Labels[mlv1.LabelRestartAttempt] != strconv.Itoa(attempt) || p.Status.Phase != corev1.PodRunning {
				return false
			}
			pods[rank] = p
		}
		return true
	}), "attempt %d's %d ranks never all ran\n%s", attempt, n, node.NamespaceDiagnostics(ctx, ns))
	return pods
}

// rankLog is the log of the pod of the given rank ("" while it has none).
func rankLog(t *testing.T, ns, name string, rank int32) string {
	t.Helper()
	log, err := node.PodLog(context.Background(), ns, mlv1.WorkerPodName(name, rank))
	if err != nil {
		return ""
	}
	return log
}

// waitEventNote waits for an event about kind/name with the reason whose
// note contains part, and returns the note.
func waitEventNote(t *testing.T, ns, kind, name, reason, part string) string {
	t.Helper()
	var notes []string
	found := ""
	require.NoError(t, poll(time.Minute, func() bool {
		events, err := testutil.EventsAbout(context.Background(), node.Client, ns, kind, name)
		if err != nil {
			return false
		}
		notes = notes[:0]
		for _, e := range events {
			if e.Reason == reason {
				notes = append(notes, e.Note)
				if strings.Contains(e.Note, part) {
					found = e.Note
				}
			}
		}
		return found != ""
	}), "no %s event about %s %s saying %q; its %s notes: %q", reason, kind, name, part, reason, notes)
	return found
}
