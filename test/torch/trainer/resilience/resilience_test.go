// Package resilience runs the example trainer (../train.py) under real
// torchrun through what the operator does when a gang is disrupted or hangs:
// the checkpoint saved at SIGTERM and the resume from it, and a rank blocked
// forever in all_reduce seen as a stall. A package of its own, so these
// tests get their own time budget beside the trainer's.
package resilience

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/ptr"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/controllers/trainingjob"
	"github.com/ml-operator/ml-operator/internal/integrations/progress"
	"github.com/ml-operator/ml-operator/test/testutil"
	"github.com/ml-operator/ml-operator/test/torch/launcher"
)

// alive reports a process that exists and has not exited (a zombie has).
func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) state ...: the state follows the last ')'.
	i := bytes.LastIndexByte(stat, ')')
	return i > 0 && i+2 < len(stat) && stat[i+2] != 'Z'
}

// scrapeUntil applies rank 0's progress to job, the way the operator does,
// until done holds; it fails the test after three minutes (importing torch
// alone can take a minute on a loaded 2-core machine).
func scrapeUntil(t *testing.T, ctx context.Context, job *mlv1.TrainingJob, port int, out *launcher.Output, what string, done func(progress.Report) bool) {
	t.Helper()
	scraper := progress.NewHTTPScraper()
	url := "http://127.0.0.1:" + strconv.Itoa(port) + "/metrics"
	deadline := time.Now().Add(3 * time.Minute)
	for {
		require.True(t, time.Now().Before(deadline), "%s: not seen; trainer output:\n%s", what, out.String())
		if p, err := scraper.Scrape(ctx, url); err == nil {
			progress.Apply(job, p, time.Now())
			if done(p) {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// The trainer, sent SIGTERM mid-epoch (as the kubelet does when the
// operator ends the gang, or a drain evicts the pod), saves the step it
// reached with its completion marker; the next attempt, whose
// RESUME_FROM_CHECKPOINT still names the last epoch checkpoint the
// operator saw, resumes from that step instead, ignores a newer checkpoint
// torn by a kill mid-write (no marker), and reports the checkpoint in use,
// which the operator records with its step and the attempt that wrote it.
func TestTrainerSavesAtSIGTERMAndResumesFromThatStep(t *testing.T) {
	testutil.NeedTool(t, launcher.Torchrun, "python3-torch", testutil.TorchInstall)
	ckptDir := t.TempDir()
	w := testutil.TrainingJob("preempt", "ml-team").Workers(1).GPUs(0).
		Hyperparameter("epochs", 4).Hyperparameter("epochSeconds", 4)
	ports := testutil.FreePorts(t, 4)
	w.Spec.Networking.MasterPort = int32(ports[0])
	w.Spec.Checkpoint.Path = ckptDir
	job := w.Obj()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()

	// Attempt 0 runs until the operator has seen epoch 1's checkpoint and
	// rank 0 is a few steps into epoch 2 (16 steps an epoch).
	cmd, out := launcher.StartRank0(t, ctx, "../train.py", job, 0, ports[1])
	scrapeUntil(t, ctx, job, ports[1], out, "epoch 1's checkpoint and step 20", func(p progress.Report) bool {
		return job.Status.LastCheckpoint != nil && p.Step != nil && *p.Step >= 20
	})
	require.Equal(t, filepath.Join(ckptDir, "epoch-1"), job.Status.LastCheckpoint.Path)
	// SIGTERM to torchrun alone, as the kubelet sends it to the container's
	// first process; torchrun passes it to the trainer.
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	_ = cmd.Wait()
	// The checkpoint saved at SIGTERM, on the volume.
	found, err := filepath.Glob(filepath.Join(ckptDir, "step-*"))
	require.NoError(t, err)
	require.Len(t, found, 1, "one checkpoint saved at SIGTERM; trainer output:\n%s", out.String())
	m := regexp.MustCompile(`^step-(\d+)$`).FindStringSubmatch(filepath.Base(found[0]))
	require.NotNil(t, m, found[0])
	m = []string{"", found[0], m[1]}
	saved, _ := strconv.Atoi(m[2])
	require.Greater(t, saved, 16, "saved in epoch 2")
	require.Less(t, saved, 32, "saved in epoch 2")
	marker, err := os.ReadFile(filepath.Join(m[1], "COMPLETE"))
	require.NoError(t, err, "the completion marker")
	assert.JSONEq(t, fmt.Sprintf(`{"epoch": 1, "step": %d, "attempt": 0}`, saved), string(marker))

	// A newer checkpoint torn by a kill mid-write: state, no marker.
	torn := filepath.Join(ckptDir, "step-999")
	require.NoError(t, os.MkdirAll(torn, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(torn, "state.pt"), []byte("half a checkpoint"), 0o644))

	// Attempt 1: the operator never saw the SIGTERM checkpoint (its pod
	// was gone before the next scrape), so RESUME_FROM_CHECKPOINT is epoch 1's.
	job.Spec.Networking.MasterPort = int32(ports[2])
	next := trainingjob.DesiredWorkerPod(job, 0, 1, trainingjob.Config{})
	env, err := launcher.PodEnv(job, next, t.TempDir())
	require.NoError(t, err)
	assert.Contains(t, env, "RESUME_FROM_CHECKPOINT="+filepath.Join(ckptDir, "epoch-1"))
	assert.Contains(t, env, "CHECKPOINT_ATTEMPT=1")
	cmd, out = launcher.StartRank0(t, ctx, "../train.py", job, 1, ports[3])
	scrapeUntil(t, ctx, job, ports[3], out, "the checkpoint in use", func(progress.Report) bool {
		return job.Status.LastCheckpoint.Step != nil
	})
	step, attempt := int64(saved), int32(0)
	assert.Equal(t, &mlv1.CheckpointStatus{Epoch: 1, Step: &step, Attempt: &attempt, Path: filepath.Join(ckptDir, "step-"+m[2])},
		job.Status.LastCheckpoint, "status: the checkpoint in use, with the step and the attempt that wrote it")
	require.NoError(t, cmd.Wait(), "resumed trainer failed:\n%s", out.String())
	log := out.String()
	assert.Contains(t, log, fmt.Sprintf("resumed from checkpoint step-%d at step %d (epoch 1, written by attempt 0)", saved, saved))
	assert.Contains(t, log, fmt.Sprintf("epoch 2/4 started at step %d", saved), "goes on mid-epoch")
	assert.NotContains(t, log, "epoch 1/4 started")
	assert.NotContains(t, log, "step-999", "the torn checkpoint is never used")
	assert.Contains(t, log, "training complete epochs=4 steps=64")
}

// A rank that blocks forever inside all_reduce (hangRank, hangAtStep) hangs
// the whole gang: every process stays alive, and rank 0's training_step,
// read by the operator's scraper, stops moving. The operator's stall watch
// (the one the controller keeps, fed scrape by scrape) sees the step move
// before the hang and then calls the attempt stalled once the step has
// stood still for the stall timeout.
func TestTrainerHangIsSeenAsAStall(t *testing.T) {
	testutil.NeedTool(t, launcher.Torchrun, "python3-torch", testutil.TorchInstall)
	w := testutil.TrainingJob("hang", "ml-team").Workers(1).GPUs(0).
		Hyperparameter("epochs", 3).Hyperparameter("epochSeconds", 2).
		Hyperparameter("hangRank", 1).Hyperparameter("hangAtStep", 20)
	ports := testutil.FreePorts(t, 2)
	w.Spec.Networking.MasterPort = int32(ports[0])
	w.Spec.NProcPerNode = ptr.To(int32(2)) // ranks 0 and 1 under one torchrun
	w.Spec.Checkpoint.Path = t.TempDir()
	job := w.Obj()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd, out := launcher.StartRank0(t, ctx, "../train.py", job, 0, ports[1])
	defer func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }()

	// A short timeout: the bounds (30s..24h) are the API's; the watch is
	// the same function either way.
	const timeout = 5 * time.Second
	var watch trainingjob.StallWatch
	seen := map[float64]bool{}
	scrapeUntil(t, ctx, job, ports[1], out, "a stall", func(p progress.Report) bool {
		watch, _ = trainingjob.WatchProgress(watch, 0, p, time.Now())
		if p.Step != nil {
			seen[*p.Step] = true
		}
		return trainingjob.Stalled(watch, 0, timeout)
	})
	assert.Equal(t, "training_step", watch.Metric)
	assert.Equal(t, 20.0, watch.Value, "rank 0 finished 20 steps, then blocked in step 21's all_reduce")
	assert.Greater(t, len(seen), 1, "the step moved before the hang")
	assert.GreaterOrEqual(t, watch.Unchanged(), timeout)
	assert.True(t, alive(cmd.Process.Pid), "the hung trainer is still running: nothing but the step says it hangs")
	assert.Contains(t, out.String(), "rank 1: hanging in all_reduce at step 20")
	assert.NotContains(t, out.String(), "epoch 2/3 done")
	t.Logf("stall seen: %s %v unchanged for %s", watch.Metric, watch.Value, watch.Unchanged().Round(time.Millisecond))
}
