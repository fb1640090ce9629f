//go:build e2e_real

package e2ereal

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

// testStalledGangRestarts: a real two-rank torchrun job whose rank 1, in
// attempt 0, blocks forever inside all_reduce at step 20 (epoch 2; the
// example trainer's hangRank and hangAtStep): rank 0 blocks in its next
// gradient all_reduce, both processes stay alive and the pods Running. With
// spec.failurePolicy.stallTimeout 30s the operator sees rank 0's
// training_step stand still, sets Stalled=True with what it saw, emits a
// Warning event Stalled and restarts the gang as a failure (restarts 1);
// attempt 1 resumes from the latest checkpoint, does not hang, and the job
// Completes with Stalled back to False.
func testStalledGangRestarts(t *testing.T) {
	ctx := context.Background()
	pushTrainerImage(t, TrainerImage)
	ns := namespace(t)
	name := "hang"
	checkpointVolume(t, ns, name)

	job := trainerJob(ns, name, 4, 20)
	job.Spec.Hyperparameters["hangRank"] = mlv1.HyperparameterValue{Raw: []byte("1")}
	job.Spec.Hyperparameters["hangAtStep"] = mlv1.HyperparameterValue{Raw: []byte("20")}
	job.Spec.FailurePolicy = &mlv1.FailurePolicy{StallTimeout: &metav1.Duration{Duration: 30 * time.Second}}
	// The hung processes ignore SIGTERM (their handler waits for a step
	// boundary that never comes): the kubelet kills them after this.
	job.Spec.Template.TerminationGracePeriodSeconds = ptr.To[int64](5)
	j := createTracked(t, job)
	got, get, ended, since := j.got, j.get, j.ended, j.since

	// Attempt 0's rank 1 hangs; its pod and rank 0's keep running.
	var log1 string
	require.NoError(t, poll(14*time.Minute, func() bool {
		log1 = rankLog(t, ns, name, 1)
		return strings.Contains(log1, "rank 1: hanging in all_reduce at step 20") || get() && (ended() || got.Status.Attempt() > 0)
	}), "rank 1 never hung; its log:\n%s\n%s", log1, node.NamespaceDiagnostics(ctx, ns))
	require.Contains(t, log1, "rank 1: hanging in all_reduce at step 20", "state %q, conditions %+v\n%s", got.Status.State, got.Status.Conditions, node.NamespaceDiagnostics(ctx, ns))
	t.Logf("%s: attempt 0's rank 1 logged: rank 1: hanging in all_reduce at step 20", since())

	// The stall: condition, event, a restart counted as a failure.
	var stalled *metav1.Condition
	j.waitFor(t, 3*time.Minute, "no Stalled=True", func() bool {
		stalled = meta.FindStatusCondition(got.Status.Conditions, mlv1.TrainingJobStalled)
		return stalled != nil && stalled.Status == metav1.ConditionTrue
	})
	require.NotNil(t, stalled, "state %q", got.Status.State)
	require.Equal(t, mlv1.ReasonStalled, stalled.Reason)
	require.Regexp(t, `^rank 0 \(pod hang-worker-0\) made no progress for \d+s \(stallTimeout 30s\): training_step has been 20 since \S+Z$`, stalled.Message)
	t.Logf("%s: Stalled=True %s: %s", since(), stalled.Reason, stalled.Message)
	note := waitEventNote(t, ns, "TrainingJob", name, mlv1.ReasonStalled, "gang restart for a failure: rank 0 (pod hang-worker-0) made no progress for ")
	t.Logf("%s: event Stalled: %s", since(), note)

	// Attempt 1 resumes and completes.
	j.requireCompleted(t, 10*time.Minute)
	require.Equal(t, int32(1), got.Status.Restarts, "a stall is a failure (stallAction Restart)")
	require.Zero(t, got.Status.Disruptions, "disruptions")
	stalled = meta.FindStatusCondition(got.Status.Conditions, mlv1.TrainingJobStalled)
	require.NotNil(t, stalled)
	require.Equal(t, metav1.ConditionFalse, stalled.Status, "Stalled after attempt 1 moved: %+v", stalled)
	log0 := rankLog(t, ns, name, 0)
	m := regexp.MustCompile(`rank 0: resumed from checkpoint (epoch-1|step-20) at step (\d+) \(epoch \d+, written by attempt 0\)`).FindStringSubmatch(log0)
	require.NotNil(t, m, "attempt 1 did not resume from attempt 0's checkpoint:\n%s", log0)
	step, _ := strconv.Atoi(m[2])
	require.GreaterOrEqual(t, step, 16)
	require.Contains(t, log0, "attempt 1, world size 2")
	require.NotContains(t, log0, "hanging in all_reduce", "attempt 1 hung")
	require.NotContains(t, log0, "epoch 1/4 started", "attempt 1 trained epoch 1 again")
	require.Contains(t, log0, "rank 0: training complete epochs=4 steps=64")
	t.Logf("%s: Completed: restarts %d; attempt 1 resumed from %s at step %d; Stalled=%s %s: %s",
		since(), got.Status.Restarts, m[1], step, stalled.Status, stalled.Reason, stalled.Message)
	t.Logf("kubectl get tj:\n%s", kubectlGet("tj", "-n", ns))
}
