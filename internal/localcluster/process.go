package localcluster

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
)

// Reaper deletes the cluster if the process that created it dies without
// doing so (killed, panicked, timed out). Stop it after a clean teardown.
type Reaper struct{ cmd *exec.Cmd }

// StartReaper starts a small watcher in its own session: once process pid is
// gone it runs `kwokctl delete cluster`, so no kube-apiserver, etcd or kwok
// outlives the run that started them. With removeWorkdir it then deletes the
// workdir too (for throwaway clusters such as the e2e suite's).
func (c *Cluster) StartReaper(pid int, removeWorkdir bool) (*Reaper, error) {
	script := `while kill -0 "$0" 2>/dev/null; do sleep 1; done
"$1" delete cluster --name "$2" --kubeconfig "$3"
if [ -n "$4" ]; then rm -rf "$4"; fi`
	remove := ""
	if removeWorkdir {
		remove = c.opts.Workdir
	}
	cmd := exec.Command("/bin/sh", "-c", script, strconv.Itoa(pid),
		filepath.Join(c.opts.BinDir, "kwokctl"), c.opts.Name, c.Kubeconfig, remove)
	cmd.Env = append(os.Environ(),
		"KWOK_WORKDIR="+c.opts.Workdir,
		"PATH="+c.opts.BinDir+string(os.PathListSeparator)+os.Getenv("PATH"),
	)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the cluster reaper: %w", err)
	}
	go func() { _ = cmd.Wait() }()
	return &Reaper{cmd: cmd}, nil
}

// Stop ends the watcher without deleting anything.
func (r *Reaper) Stop() {
	if r != nil && r.cmd.Process != nil {
		// The watcher leads its own session: kill the group, its sleep too.
		_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
	}
}
