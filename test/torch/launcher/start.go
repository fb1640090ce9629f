package launcher

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/controllers/trainingjob"
)

// StartRank0 runs script under torchrun with the env of the job's rank-0
// pod of the attempt (as PodEnv resolves it) and METRICS_PORT, in its own
// process group so a test can kill torchrun and its workers together. The
// returned buffer collects its output.
func StartRank0(t testing.TB, ctx context.Context, script string, job *mlv1.TrainingJob, attempt int32, metricsPort int) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	pod := trainingjob.DesiredWorkerPod(job, 0, attempt, trainingjob.Config{})
	env, err := PodEnv(job, pod, t.TempDir())
	require.NoError(t, err)
	script, err = filepath.Abs(script)
	require.NoError(t, err)
	cmd := exec.CommandContext(ctx, Torchrun, script)
	cmd.Env = append(env, "METRICS_PORT="+strconv.Itoa(metricsPort))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out := &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(t, cmd.Start())
	return cmd, out
}
