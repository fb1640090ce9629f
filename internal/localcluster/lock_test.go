package localcluster

import (
	"os"
	"os/exec"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLockRefusesASecondRunAndNamesTheFirst(t *testing.T) {
	o := Options{Workdir: t.TempDir(), Name: "ml-operator"}
	release, cleared, err := Lock(o)
	require.NoError(t, err)
	assert.False(t, cleared)
	assert.Equal(t, os.Getpid(), RunningPID(o), "the pid file names the run")

	_, _, err = Lock(o)
	var running *AlreadyRunningError
	require.ErrorAs(t, err, &running, "a second run on the same workdir is refused")
	assert.Equal(t, os.Getpid(), running.PID)
	assert.Contains(t, err.Error(), o.Workdir+"/kubeconfig", "it says which kubeconfig reaches the running cluster")
	assert.Contains(t, err.Error(), "make run-down", "and how to stop it")

	other := Options{Workdir: o.Workdir, Name: "other"}
	releaseOther, _, err := Lock(other)
	require.NoError(t, err, "another cluster name in the same directory is another cluster")
	releaseOther()

	release()
	assert.Zero(t, RunningPID(o), "released: no run recorded")
	release2, _, err := Lock(o)
	require.NoError(t, err, "free again once the first run ended")
	release2()
}

func TestLockClearsALockLeftByAKilledRun(t *testing.T) {
	o := Options{Workdir: t.TempDir()}
	// A pid that existed and is gone.
	cmd := exec.Command("true")
	require.NoError(t, cmd.Run())
	require.NoError(t, os.WriteFile(LockFile(o), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644))
	assert.Zero(t, RunningPID(o), "a dead pid is no run")

	release, cleared, err := Lock(o)
	require.NoError(t, err)
	assert.True(t, cleared)
	assert.Equal(t, os.Getpid(), RunningPID(o))
	release()
}
