package localcluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// StoppedComponent is a control-plane process of the cluster (kube-apiserver,
// etcd, kube-controller-manager, kube-scheduler, kwok-controller) that
// StopComponent stopped, with what it takes to start it again as it was.
type StoppedComponent struct {
	// Name is the component, as kwokctl names its pid and log files.
	Name string
	// PID is the process that was stopped.
	PID  int
	argv []string
	dir  string
	// pidFile and logFile are kwokctl's, so `kwokctl delete cluster` stops
	// the restarted process and its log continues in the same file.
	pidFile, logFile string
	// held keeps the component's serving port while it is stopped.
	held net.Listener
}

// StopComponent stops one component of the running cluster: SIGTERM, then
// SIGKILL if it has not exited within 15 s. kwokctl's binary runtime keeps
// each component's pid in <workdir>/clusters/<name>/pids/<component>.pid;
// the command line and working directory are read from /proc before the
// signal, so Start can bring the same process back (the chaos suite stops
// kube-apiserver this way).
func (c *Cluster) StopComponent(ctx context.Context, component string) (*StoppedComponent, error) {
	dir := filepath.Join(c.opts.Workdir, "clusters", c.opts.Name)
	s := &StoppedComponent{
		Name:    component,
		pidFile: filepath.Join(dir, "pids", component+".pid"),
		logFile: filepath.Join(dir, "logs", component+".log"),
	}
	raw, err := os.ReadFile(s.pidFile)
	if err != nil {
		return nil, fmt.Errorf("reading the pid of %s: %w", component, err)
	}
	if s.PID, err = strconv.Atoi(strings.TrimSpace(string(raw))); err != nil {
		return nil, fmt.Errorf("pid file %s: %w", s.pidFile, err)
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", s.PID))
	if err != nil {
		return nil, fmt.Errorf("%s (pid %d) is not running: %w", component, s.PID, err)
	}
	s.argv = strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
	if s.dir, err = os.Readlink(fmt.Sprintf("/proc/%d/cwd", s.PID)); err != nil {
		s.dir = dir
	}
	if err := syscall.Kill(s.PID, syscall.SIGTERM); err != nil {
		return nil, fmt.Errorf("stopping %s (pid %d): %w", component, s.PID, err)
	}
	if err := waitGone(ctx, s.PID, 15*time.Second); err != nil {
		_ = syscall.Kill(s.PID, syscall.SIGKILL)
		if err := waitGone(ctx, s.PID, 5*time.Second); err != nil {
			return nil, fmt.Errorf("%s (pid %d) did not exit: %w", component, s.PID, err)
		}
	}
	s.holdPort()
	return s, nil
}

// holdPort listens on the stopped component's --secure-port and closes every
// connection at once: clients see the component gone, as with a refused
// connection, but no other cluster on this machine (kwokctl picks free
// ports) can take the port before Start needs it again.
func (s *StoppedComponent) holdPort() {
	var port string
	for _, a := range s.argv {
		if v, ok := strings.CutPrefix(a, "--secure-port="); ok {
			port = v
		}
	}
	if port == "" {
		return
	}
	l, err := net.Listen("tcp", "0.0.0.0:"+port)
	if err != nil {
		return
	}
	s.held = l
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			_ = conn.Close()
		}
	}()
}

// Start runs the stopped component again with its old command line, in its
// own session like kwokctl starts it, and records the new pid where kwokctl
// looks for it.
func (s *StoppedComponent) Start() (int, error) {
	log, err := os.OpenFile(s.logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return 0, err
	}
	defer log.Close()
	if s.held != nil {
		_ = s.held.Close()
		s.held = nil
	}
	cmd := exec.Command(s.argv[0], s.argv[1:]...)
	cmd.Dir = s.dir
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("starting %s again: %w", s.Name, err)
	}
	pid := cmd.Process.Pid
	// Reap it if it exits while this process lives; otherwise it outlives
	// this process like the other components and kwokctl stops it.
	go func() { _ = cmd.Wait() }()
	if err := os.WriteFile(s.pidFile, []byte(strconv.Itoa(pid)), 0o644); err != nil {
		return pid, fmt.Errorf("recording the pid of %s: %w", s.Name, err)
	}
	return pid, nil
}

// waitGone polls until process pid no longer exists (or is a zombie).
func waitGone(ctx context.Context, pid int, timeout time.Duration) error {
	return poll(ctx, timeout, func() (bool, error) {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if errors.Is(err, os.ErrNotExist) {
			return true, nil
		}
		// State is the field after the parenthesised command name.
		if i := strings.LastIndexByte(string(stat), ')'); i > 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
			return true, nil
		}
		return false, nil
	}, fmt.Sprintf("pid %d to exit", pid))
}
