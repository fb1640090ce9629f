package realnode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// process is one part of the node running as a child process, with its
// output in <workdir>/logs/<name>.log and its pid in <workdir>/pids.
type process struct {
	name string
	cmd  *exec.Cmd
	log  *os.File
	done chan struct{}
	err  error
}

// startProcess starts bin with args. The child gets SIGKILL if this
// process dies (so a killed test leaves no kubelet behind; the next Start
// or `realnode down` sweeps the rest) and runs in its own process group, so
// a Ctrl-C at the terminal reaches only the harness, which then tears the
// node down in order.
func startProcess(workdir, name, bin string, args []string, env []string) (*process, error) {
	logDir := filepath.Join(workdir, "logs")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(workdir, "pids"), 0o755); err != nil {
		return nil, err
	}
	log, err := os.OpenFile(filepath.Join(logDir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = workdir
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, log: log, done: make(chan struct{})}
	_ = os.WriteFile(filepath.Join(workdir, "pids", name+".pid"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644)
	go func() {
		p.err = cmd.Wait()
		log.Close()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has ended.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM, then SIGKILL after grace, and waits for the exit.
func (p *process) stop(grace time.Duration) {
	if p == nil || p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return
	case <-time.After(grace):
	}
	_ = p.cmd.Process.Kill()
	<-p.done
}

// killRecorded kills the processes whose pids a run recorded in
// <workdir>/pids, if they still run the same binary (a leftover of a run
// that was killed), and removes the pid files.
func killRecorded(workdir string) {
	files, _ := filepath.Glob(filepath.Join(workdir, "pids", "*.pid"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err == nil && pid > 1 {
			// Only a process whose command line names the workdir is ours
			// (every part gets a config, data or certificate path in it): a
			// recorded pid may have been reused by anything since.
			cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			if err == nil && strings.Contains(string(cmdline), workdir) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
				waitGone(pid, 10*time.Second)
			}
		}
		_ = os.Remove(f)
	}
}

// killMatching SIGKILLs every process whose command line contains s (the
// containerd shims of this node name its socket).
func killMatching(s string) {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	self := os.Getpid()
	for _, f := range procs {
		b, err := os.ReadFile(f)
		if err != nil || !strings.Contains(string(b), s) {
			continue
		}
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(f)))
		if err != nil || pid == self {
			continue
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
		waitGone(pid, 10*time.Second)
	}
}

func waitGone(pid int, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if errors.Is(err, os.ErrNotExist) {
			return
		}
		if i := strings.LastIndexByte(string(stat), ')'); i > 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// poll calls cond every 250 ms until it returns true or an error, or until
// timeout; what names the wait in the error. A part that exited (dead) ends
// the wait at once.
func poll(ctx context.Context, timeout time.Duration, what string, cond func() (bool, error), dead ...*process) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	var last error
	for {
		ok, err := cond()
		if ok {
			return nil
		}
		last = err
		for _, p := range dead {
			if p != nil && p.exited() {
				return fmt.Errorf("waiting for %s: %s exited (%v); see its log in logs/%s.log", what, p.name, p.err, p.name)
			}
		}
		select {
		case <-ctx.Done():
			if last != nil {
				return fmt.Errorf("waiting for %s: %w (last: %v)", what, ctx.Err(), last)
			}
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-t.C:
		}
	}
}
