// Package trainer tests the example trainer (train.py) against the
// operator's contract: it runs under torchrun with the env the operator
// generates, serves the progress gauges, and resumes from the checkpoint the
// operator points it to after being killed mid-training.
package trainer

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/controllers/trainingjob"
	"github.com/ml-operator/ml-operator/internal/integrations/progress"
	"github.com/ml-operator/ml-operator/internal/manager"
	"github.com/ml-operator/ml-operator/test/testutil"
	"github.com/ml-operator/ml-operator/test/torch/launcher"
)

// The trainer, killed mid-training, continues from its last checkpoint when
// restarted with the env the operator sets on the next attempt.
func TestTrainerResumesFromOperatorCheckpoint(t *testing.T) {
	testutil.NeedTool(t, launcher.Torchrun, "python3-torch", testutil.TorchInstall)
	ckptDir := t.TempDir()
	w := testutil.TrainingJob("resume", "ml-team").Workers(1).GPUs(0).
		Hyperparameter("epochs", 6).Hyperparameter("epochSeconds", 0.5)
	// The rendezvous and metrics ports of both attempts.
	ports := testutil.FreePorts(t, 4)
	w.Spec.Networking.MasterPort = int32(ports[0])
	w.Spec.Checkpoint.Path = ckptDir
	w.Spec.Checkpoint.KeepLast = 2
	job := w.Obj()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()

	// Attempt 0: read progress the way the operator does until a checkpoint
	// exists, then kill the trainer mid-epoch.
	port := ports[1]
	cmd, out := launcher.StartRank0(t, ctx, "train.py", job, 0, port)
	scraper := progress.NewHTTPScraper()
	url := "http://127.0.0.1:" + strconv.Itoa(port) + "/metrics"
	// Generous: importing torch alone can take a minute on a loaded 2-core machine.
	deadline := time.Now().Add(3 * time.Minute)
	for job.Status.LastCheckpoint == nil || job.Status.LastCheckpoint.Epoch < 2 {
		require.True(t, time.Now().Before(deadline), "no checkpoint reported; trainer output:\n%s", out.String())
		if p, err := scraper.Scrape(ctx, url); err == nil {
			progress.Apply(job, p, time.Now())
		}
		time.Sleep(100 * time.Millisecond)
	}
	require.NoError(t, syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL))
	require.Error(t, cmd.Wait(), "the trainer should have been killed")
	require.NotContains(t, out.String(), "training complete", "killed too late to test resume")
	saved := job.Status.LastCheckpoint.Epoch
	assert.Equal(t, int32(6), job.Status.TotalEpochs)
	assert.Equal(t, filepath.Join(ckptDir, "epoch-"+strconv.Itoa(int(saved))), job.Status.LastCheckpoint.Path)

	// Attempt 1: the operator's env points at that checkpoint. On a cluster
	// it runs in a new pod with a network namespace of its own; here both
	// attempts share the machine's, where the killed attempt's rendezvous
	// port can linger (TIME_WAIT), so it gets another one.
	job.Spec.Networking.MasterPort = int32(ports[2])
	next := trainingjob.DesiredWorkerPod(job, 0, 1, trainingjob.Config{})
	var resume string
	for _, e := range next.Spec.Containers[0].Env {
		if e.Name == "RESUME_FROM_CHECKPOINT" {
			resume = e.Value
		}
	}
	require.Equal(t, job.Status.LastCheckpoint.Path, resume)

	cmd, out = launcher.StartRank0(t, ctx, "train.py", job, 1, ports[3])
	require.NoError(t, cmd.Wait(), "resumed trainer failed:\n%s", out.String())
	log := out.String()
	assert.Contains(t, log, fmt.Sprintf("resumed from checkpoint epoch-%d at step %d (epoch %d, written by attempt 0)", saved, 16*saved, saved))
	assert.Contains(t, log, "epoch "+strconv.Itoa(int(saved)+1)+"/6 started")
	assert.NotContains(t, log, "epoch 1/6 started", "the resumed run started over")
	assert.Contains(t, log, "training complete epochs=6")

	// keepLast 2: only the two newest checkpoints remain.
	entries, err := os.ReadDir(ckptDir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	assert.Equal(t, "epoch-5,epoch-6", strings.Join(names, ","))
}

// The trainer runs as the operator's default launch command starts it
// (seed 000's launch: /app/train.py with --model, --dataset, the
// hyperparameters and --checkpoint-dir as flags, under torchrun): it takes
// every flag, trains the epochs the flags say and writes its checkpoints
// where --checkpoint-dir says.
func TestTrainerRunsTheDefaultLaunchCommand(t *testing.T) {
	testutil.NeedTool(t, launcher.Torchrun, "python3-torch", testutil.TorchInstall)
	ckptDir := t.TempDir()
	ports := testutil.FreePorts(t, 2)
	w := testutil.TrainingJob("seed", "default").Workers(1).GPUs(0).
		Hyperparameter("epochs", 2).Hyperparameter("learningRate", 0.001).Hyperparameter("batchSize", 32)
	w.Spec.Model, w.Spec.Dataset = "resnet50", "imagenet"
	w.Spec.Networking.MasterPort = int32(ports[0])
	w.Spec.Checkpoint.Path = ckptDir
	w.Spec.Command, w.Spec.Args = nil, nil
	job := w.Obj()

	pod := trainingjob.DesiredWorkerPod(job, 0, 0, trainingjob.Config{DefaultCommands: manager.DefaultFrameworkCommands()})
	command := pod.Spec.Containers[0].Command
	require.Equal(t, []string{"torchrun", mlv1.DefaultTrainScript}, command[:2], "the default launch command")
	require.Contains(t, command, "--checkpoint-dir="+ckptDir)

	env, err := launcher.PodEnv(job, pod, t.TempDir())
	require.NoError(t, err)
	// CHECKPOINT_DIR and the hyperparameters come from the flags alone.
	var kept []string
	for _, e := range env {
		if !strings.HasPrefix(e, "CHECKPOINT_DIR=") && !strings.HasPrefix(e, "HYPERPARAM_") {
			kept = append(kept, e)
		}
	}
	script, err := filepath.Abs("train.py")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, launcher.Torchrun, append([]string{script}, command[2:]...)...)
	cmd.Env = append(kept, "METRICS_PORT="+strconv.Itoa(ports[1]))
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "trainer output:\n%s", out)
	log := string(out)
	assert.Contains(t, log, "rank 0: model 'resnet50', dataset 'imagenet', 2 epochs, checkpoints in '"+ckptDir+"'")
	assert.Contains(t, log, "training complete epochs=2")
	entries, err := os.ReadDir(ckptDir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	assert.Equal(t, "epoch-1,epoch-2", strings.Join(names, ","))
}
