package localcluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// A local cluster's workdir belongs to one `make run` at a time. The run
// holds an exclusive flock on <workdir>/<name>.lock for as long as it lives
// (the kernel drops it when the process dies, however it dies) and writes
// its pid to <workdir>/<name>.pid. A second `make run` on the same directory
// cannot take the lock: it reads the pid, says who runs the cluster and
// stops without touching it. A pid file whose process is gone (a killed run)
// is cleared by the next run. `make run-down` reads the pid file to find the
// run it stops.

// AlreadyRunningError says that another process holds the workdir.
type AlreadyRunningError struct {
	PID        int
	Kubeconfig string
	Workdir    string
}

func (e *AlreadyRunningError) Error() string {
	return fmt.Sprintf("a local cluster is already running from %s (pid %d); its kubeconfig is %s. "+
		"Use it (export KUBECONFIG=%s), or stop it with Ctrl-C in its terminal or `make run-down` "+
		"(LOCAL_WORKDIR=<another directory> runs a second cluster beside it)",
		e.Workdir, e.PID, e.Kubeconfig, e.Kubeconfig)
}

// LockFile is the pid file of a run.
func LockFile(o Options) string { return filepath.Join(o.Workdir, nameOrDefault(o.Name)+".pid") }

func nameOrDefault(name string) string {
	if name == "" {
		return "ml-operator"
	}
	return name
}

// RunningPID is the pid of the live run recorded in the workdir, or 0.
func RunningPID(o Options) int {
	if pid := pidInFile(o); pid != 0 && alive(pid) {
		return pid
	}
	return 0
}

// alive says whether pid is a running process (not a zombie).
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name in parentheses: "pid (comm) S ...".
	if i := strings.LastIndexByte(string(stat), ')'); i >= 0 && i+2 < len(stat) {
		return stat[i+2] != 'Z' && stat[i+2] != 'X'
	}
	return true
}

// Lock takes the workdir for this process. It fails with an
// *AlreadyRunningError while another process holds it; cleared reports a
// pid file left by a run that is gone. release gives the workdir back.
func Lock(o Options) (release func(), cleared bool, err error) {
	if err := os.MkdirAll(o.Workdir, 0o755); err != nil {
		return nil, false, err
	}
	name := nameOrDefault(o.Name)
	// Opened close-on-exec (Go's default): the manager and kwokctl's
	// processes never inherit the lock.
	f, err := os.OpenFile(filepath.Join(o.Workdir, name+".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, false, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, false, &AlreadyRunningError{PID: pidInFile(o), Workdir: o.Workdir, Kubeconfig: filepath.Join(o.Workdir, "kubeconfig")}
		}
		return nil, false, fmt.Errorf("locking %s: %w", f.Name(), err)
	}
	if old := pidInFile(o); old != 0 && !alive(old) {
		cleared = true
	}
	pidFile := LockFile(o)
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		_ = f.Close()
		return nil, false, err
	}
	return func() {
		_ = os.Remove(pidFile)
		_ = f.Close() // drops the flock
	}, cleared, nil
}

// pidInFile is the pid recorded in the workdir's pid file (0 when none).
func pidInFile(o Options) int {
	raw, err := os.ReadFile(LockFile(o))
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}
