//go:build e2e_real

package e2ereal

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/internal/realnode"
)

// kubectl runs the repository's kubectl against the node, as a user or an
// upgrade tool would, and returns its combined output.
func kubectl(args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(binDir(mustAbs("../..")), "kubectl"), args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+node.Kubeconfig)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// stepCheckpoints reads the step-<S> checkpoints in dir that carry their
// completion marker: S -> the marker.
func stepCheckpoints(t *testing.T, dir string) map[int]map[string]any {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "step-*"))
	require.NoError(t, err)
	out := map[int]map[string]any{}
	for _, p := range paths {
		s, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(p), "step-"))
		if err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join(p, "COMPLETE"))
		if err != nil {
			continue
		}
		marker := map[string]any{}
		require.NoError(t, json.Unmarshal(data, &marker), "%s/COMPLETE", p)
		out[s] = marker
	}
	return out
}

// testDrainResumesFromTheStepSavedAtSIGTERM: a real two-rank DDP job on
// the trainer image, with template.terminationGracePeriodSeconds 60. In
// its second epoch (the first epoch's checkpoint is in the status) the
// node is drained as an upgrade does it: `kubectl cordon` first, which the
// operator acts on by ending the gang gracefully (Restarting reason
// NodeCordoned, a disruption), then `kubectl drain` (its Eviction API calls
// find the gang gone), then, this being the only node, `kubectl uncordon`
// for the next attempt. Rank 0 saved step-<S> at SIGTERM, with its
// completion marker; attempt 1 resumes from step S, not from the epoch-1
// checkpoint the operator had recorded, and the status shows that
// checkpoint with the step and the attempt that wrote it. It cordons the
// only node, so it runs alone, after the side-by-side workloads.
func testDrainResumesFromTheStepSavedAtSIGTERM(t *testing.T) {
	ctx := context.Background()
	pushTrainerImage(t, TrainerImage)
	ns := namespace(t)
	name := "drain"
	dir := checkpointVolume(t, ns, name)
	t.Cleanup(func() { _, _ = kubectl("uncordon", realnode.NodeName) })

	// 16 steps of 5 s an epoch: the drain lands early in epoch 2, and
	// attempt 1 has most of epoch 2 left to report the step it resumed
	// from (its first scrapes fail until torch is loaded).
	job := trainerJob(ns, name, 2, 80)
	job.Spec.Template.TerminationGracePeriodSeconds = ptr.To[int64](60)
	require.NoError(t, opClient.Create(ctx, job))
	began := time.Now()

	// Attempt 0 runs until the status shows epoch 1's checkpoint.
	got := &mlv1.TrainingJob{}
	err := poll(14*time.Minute, func() bool {
		if opClient.Get(ctx, client.ObjectKeyFromObject(job), got) != nil {
			return false
		}
		return got.Status.State == mlv1.StateFailed || got.Status.State == mlv1.StateCompleted ||
			(got.Status.State == mlv1.StateRunning && got.Status.LastCheckpoint != nil && got.Status.LastCheckpoint.Epoch >= 1)
	})
	require.NoError(t, err, "state %q, conditions %+v\n%s", got.Status.State, got.Status.Conditions, node.NamespaceDiagnostics(ctx, ns))
	require.Equal(t, mlv1.StateRunning, got.Status.State, "conditions %+v\n%s", got.Status.Conditions, node.NamespaceDiagnostics(ctx, ns))
	periodic := *got.Status.LastCheckpoint
	t.Logf("%s: status.lastCheckpoint %s", time.Since(began).Round(100*time.Millisecond), checkpointJSON(&periodic))
	rank0, err := node.PodLog(ctx, ns, name+"-worker-0")
	require.NoError(t, err)
	require.Contains(t, rank0, "epoch 2/2 started", "rank 0 is not in epoch 2 yet:\n%s", rank0)
	require.NotContains(t, rank0, "epoch 2/2 done", "rank 0 finished epoch 2 before the drain:\n%s", rank0)
	for rank := range int32(2) {
		pod := &corev1.Pod{}
		require.NoError(t, node.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: mlv1.WorkerPodName(name, rank)}, pod))
		require.Equal(t, ptr.To[int64](60), pod.Spec.TerminationGracePeriodSeconds, "%s: the job's grace period", pod.Name)
	}

	// At least one step (5 s) into epoch 2, so that the step saved at
	// SIGTERM is past the periodic checkpoint. Then cordon: the operator
	// ends the gang before any eviction.
	time.Sleep(6 * time.Second)
	out, err := kubectl("cordon", realnode.NodeName)
	require.NoError(t, err)
	cordoned := time.Now()
	t.Logf("$ kubectl cordon %s\n%s", realnode.NodeName, out)
	err = poll(2*time.Minute, func() bool {
		return opClient.Get(ctx, client.ObjectKeyFromObject(job), got) == nil && got.Status.Disruptions >= 1
	})
	require.NoError(t, err, "disruptions %d, conditions %+v\n%s", got.Status.Disruptions, got.Status.Conditions,
		node.NamespaceDiagnostics(ctx, ns))
	restarting := ""
	for _, c := range got.Status.Conditions {
		if c.Type == "Restarting" {
			restarting = c.Type + "=" + string(c.Status) + " " + c.Reason + ": " + c.Message
		}
	}
	t.Logf("%s after the cordon: disruptions %d, restarts %d, %s", time.Since(cordoned).Round(100*time.Millisecond),
		got.Status.Disruptions, got.Status.Restarts, restarting)
	require.Contains(t, restarting, "node "+realnode.NodeName+" is cordoned (spec.unschedulable) for a drain",
		"the gang was not ended for the cordon")
	require.Zero(t, got.Status.Restarts, "a drain spends no backoffLimit")
	// Rank 0's log until its pod of attempt 0 is gone: what it did at SIGTERM.
	var lastLog string
	_ = poll(90*time.Second, func() bool {
		pod := &corev1.Pod{}
		if node.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-worker-0"}, pod) != nil ||
			pod.Labels[mlv1.LabelRestartAttempt] != "0" {
			return true
		}
		if l, err := node.PodLog(ctx, ns, pod.Name); err == nil {
			lastLog = l
		}
		return false
	})
	for _, line := range strings.Split(strings.TrimSpace(lastLog), "\n") {
		if strings.Contains(line, "rank 0:") && (strings.Contains(line, "SIGTERM") || strings.Contains(line, "collective failed")) {
			t.Logf("attempt 0 rank 0 | %s", line)
		}
	}

	// The drain itself (it cordons again and evicts what is left on the
	// node through the Eviction API, then waits for it to be gone), and
	// the uncordon the single node needs for the next attempt.
	out, err = kubectl("drain", realnode.NodeName, "--pod-selector", mlv1.LabelTrainingJob+"="+name,
		"--ignore-daemonsets", "--delete-emptydir-data", "--timeout=3m")
	require.NoError(t, err)
	t.Logf("$ kubectl drain %s --pod-selector %s=%s --ignore-daemonsets --delete-emptydir-data --timeout=3m\n%s",
		realnode.NodeName, mlv1.LabelTrainingJob, name, out)
	out, err = kubectl("uncordon", realnode.NodeName)
	require.NoError(t, err)
	t.Logf("$ kubectl uncordon %s\n%s", realnode.NodeName, out)

	// What rank 0 saved at SIGTERM, with its marker: a step of epoch 2.
	steps := stepCheckpoints(t, dir)
	require.Len(t, steps, 1, "step checkpoints on the volume: %v", steps)
	var saved int
	for s, marker := range steps {
		saved = s
		t.Logf("step-%d/COMPLETE: %v", s, marker)
		require.EqualValues(t, 0, marker["attempt"], "written by attempt 0")
		require.EqualValues(t, s, marker["step"])
	}
	require.Greater(t, saved, 16, "the saved step is not in epoch 2")
	require.Less(t, saved, 32, "the saved step is not in epoch 2")

	// Attempt 1 resumes from it; the status shows it with its attempt.
	var shown *mlv1.CheckpointStatus
	err = poll(10*time.Minute, func() bool {
		if opClient.Get(ctx, client.ObjectKeyFromObject(job), got) != nil {
			return false
		}
		if c := got.Status.LastCheckpoint; c != nil && c.Step != nil && *c.Step == int64(saved) && shown == nil {
			shown = c.DeepCopy()
			t.Logf("while attempt 1 runs: kubectl get tj %s -o jsonpath={.status.lastCheckpoint}\n%s", name,
				kubectlGet("tj", name, "-n", ns, "-o", "jsonpath={.status.lastCheckpoint}"))
		}
		return got.Status.State == mlv1.StateCompleted || got.Status.State == mlv1.StateFailed
	})
	diag := node.NamespaceDiagnostics(ctx, ns)
	require.NoError(t, err, "state %q, conditions %+v\n%s", got.Status.State, got.Status.Conditions, diag)
	t.Logf("job %s %s after it started: restarts %d, disruptions %d, lastCheckpoint %s",
		got.Status.State, time.Since(began).Round(100*time.Millisecond), got.Status.Restarts, got.Status.Disruptions, checkpointJSON(got.Status.LastCheckpoint))
	require.Equal(t, mlv1.StateCompleted, got.Status.State, "conditions %+v\n%s", got.Status.Conditions, diag)
	require.Equal(t, int32(1), got.Status.Disruptions)
	require.Zero(t, got.Status.Restarts)

	pod0 := &corev1.Pod{}
	require.NoError(t, node.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-worker-0"}, pod0))
	require.Equal(t, "1", pod0.Labels[mlv1.LabelRestartAttempt])
	rank0, err = node.PodLog(ctx, ns, pod0.Name)
	require.NoError(t, err)
	want := fmt.Sprintf("resumed from checkpoint step-%d at step %d (epoch 1, written by attempt 0)", saved, saved)
	require.Contains(t, rank0, want, "attempt 1 did not resume from the step saved at SIGTERM (status had %s):\n%s", periodic.Path, rank0)
	require.Contains(t, rank0, fmt.Sprintf("epoch 2/2 started at step %d", saved), "attempt 1 did not go on mid-epoch:\n%s", rank0)
	require.NotContains(t, rank0, "epoch 1/2 started", "attempt 1 trained epoch 1 again:\n%s", rank0)
	for _, line := range strings.Split(strings.TrimSpace(rank0), "\n") {
		if regexp.MustCompile(`rank 0: (resumed|epoch)`).MatchString(line) {
			t.Logf("attempt 1 rank 0 | %s", line)
		}
	}

	require.NotNil(t, shown, "the status never showed the checkpoint saved at SIGTERM (step %d) while attempt 1 ran", saved)
	require.Equal(t, mlv1.CheckpointStatus{Epoch: 1, Step: ptr.To(int64(saved)), Attempt: ptr.To[int32](0),
		Path: fmt.Sprintf("/checkpoints/step-%d", saved), Time: shown.Time}, *shown)
}

// checkpointJSON is c as the API serves it, for the log.
func checkpointJSON(c *mlv1.CheckpointStatus) string {
	b, err := json.Marshal(c)
	if err != nil {
		return err.Error()
	}
	return string(b)
}
