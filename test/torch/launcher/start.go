package launcher

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/controllers/trainingjob"
)

// StartRank0 runs script under torchrun with the env of the job's rank-0
// pod of the attempt (as PodEnv resolves it) and METRICS_PORT, in its own
// process group so a test can kill torchrun and its workers together. The
// returned Output collects its output.
func StartRank0(t testing.TB, ctx context.Context, script string, job *mlv1.TrainingJob, attempt int32, metricsPort int) (*exec.Cmd, *Output) {
	t.Helper()
	pod := trainingjob.DesiredWorkerPod(job, 0, attempt, trainingjob.Config{})
	env, err := PodEnv(job, pod, t.TempDir())
	require.NoError(t, err)
	script, err = filepath.Abs(script)
	require.NoError(t, err)
	cmd := exec.CommandContext(ctx, Torchrun, script)
	cmd.Env = append(env, "METRICS_PORT="+strconv.Itoa(metricsPort))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out := &Output{}
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(t, cmd.Start())
	return cmd, out
}

// Output collects a process's output. A test may read it while the process
// still writes: os/exec copies the output from another goroutine, so a
// plain bytes.Buffer read before Wait is a data race (make test's race
// detector found two).
type Output struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (o *Output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.Write(p)
}

// String returns what was written so far.
func (o *Output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}
