//go:build chaos

package chaos

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ml-operator/ml-operator/internal/freeport"
	"github.com/ml-operator/ml-operator/internal/localcluster"
)

// leaseNamespace holds the leader-election Lease of the replicas.
const leaseNamespace = "chaos-system"

// leaseName is the manager's default --leader-election-id.
const leaseName = "ml-operator.ml.example.com"

// replica is one manager process (bin/manager built from this tree) that
// the suite starts, kills and, like a kubelet, starts again when it exits.
// Its ports stay the same across restarts.
type replica struct {
	name        string
	bin         string
	kubeconfig  string
	leaderElect bool
	metrics     string // host:port, plain HTTP
	probe       string
	logPath     string

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{}
	killing bool // the suite killed it: its exit is expected
	starts  int
	// exits the suite did not cause, with the log lines before each.
	unexpected []string
	// supervise: start it again when it exits on its own.
	supervise bool
	stopped   bool
	// startedAt and quickExits give restarts a kubelet-like backoff: 1 s
	// doubling per exit within 10 s of its start, capped at 10 s.
	startedAt  time.Time
	quickExits int
}

func newReplica(name, bin, kubeconfig, workdir string, leaderElect bool) (*replica, error) {
	var ports [2]int
	for i := range ports {
		p, err := freeport.Port()
		if err != nil {
			return nil, err
		}
		ports[i] = p
	}
	return &replica{
		name: name, bin: bin, kubeconfig: kubeconfig, leaderElect: leaderElect,
		metrics:   fmt.Sprintf("127.0.0.1:%d", ports[0]),
		probe:     fmt.Sprintf("127.0.0.1:%d", ports[1]),
		logPath:   filepath.Join(workdir, name+".log"),
		supervise: true,
	}, nil
}

// start runs the process (the previous one must have exited).
func (r *replica) start() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.startLocked()
}

func (r *replica) startLocked() error {
	log, err := os.OpenFile(r.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	r.starts++
	fmt.Fprintf(log, "\n===== chaos: start %d of %s at %s =====\n", r.starts, r.name, time.Now().UTC().Format(time.RFC3339Nano))
	cmd := exec.Command(r.bin,
		fmt.Sprintf("--leader-elect=%t", r.leaderElect),
		"--leader-election-namespace="+leaseNamespace,
		"--metrics-secure=false",
		"--dial-loopback-only",
		"--metrics-bind-address="+r.metrics,
		"--health-probe-bind-address="+r.probe,
		"--enable-webhooks=false",
	)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+r.kubeconfig)
	cmd.Stdout, cmd.Stderr = log, log
	// Its own process group, and SIGKILL if this process dies first.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("starting %s: %w", r.name, err)
	}
	done := make(chan struct{})
	r.cmd, r.done, r.killing, r.startedAt = cmd, done, false, time.Now()
	go func() {
		err := cmd.Wait()
		log.Close()
		close(done)
		r.exited(cmd, err)
	}()
	return nil
}

// exited restarts a process that ended without the suite killing it, and
// records that it did.
func (r *replica) exited(cmd *exec.Cmd, err error) {
	r.mu.Lock()
	if r.cmd != cmd || r.killing || r.stopped {
		r.mu.Unlock()
		return
	}
	r.unexpected = append(r.unexpected, fmt.Sprintf("%s (pid %d) exited on its own at %s: %v; last log lines:\n%s",
		r.name, cmd.Process.Pid, time.Now().UTC().Format("15:04:05.000"), err, sinceStart(tail(r.logPath, 4))))
	if !r.supervise {
		r.mu.Unlock()
		return
	}
	// A kubelet would restart the container; so does the suite.
	if time.Since(r.startedAt) < 10*time.Second {
		r.quickExits++
	} else {
		r.quickExits = 1
	}
	delay := min(10*time.Second, time.Second<<min(r.quickExits-1, 4))
	r.mu.Unlock()
	time.Sleep(delay)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd != cmd || r.killing || r.stopped {
		return
	}
	if err := r.startLocked(); err != nil {
		r.unexpected = append(r.unexpected, fmt.Sprintf("%s: restart failed: %v", r.name, err))
	}
}

// kill sends SIGKILL and waits until the process is gone.
func (r *replica) kill() (pid int) {
	r.mu.Lock()
	cmd, done := r.cmd, r.done
	r.killing = true
	r.mu.Unlock()
	if cmd == nil {
		return 0
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-done
	return cmd.Process.Pid
}

// stop ends the process for good (SIGTERM, SIGKILL after 15 s).
func (r *replica) stop() {
	r.mu.Lock()
	r.stopped, r.killing = true, true
	cmd, done := r.cmd, r.done
	r.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-done
	}
}

func (r *replica) pid() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil || r.cmd.Process == nil {
		return 0
	}
	return r.cmd.Process.Pid
}

func (r *replica) unexpectedExits() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.unexpected...)
}

// waitReady waits until /readyz answers 200 (localcluster.WaitReady); the
// replica may be restarted meanwhile, so its exits do not end the wait.
func (r *replica) waitReady(ctx context.Context, timeout time.Duration) error {
	if err := localcluster.WaitReady(ctx, r.probe, timeout, nil); err != nil {
		return fmt.Errorf("%s: %w; log %s:\n%s", r.name, err, r.logPath, tail(r.logPath, 10))
	}
	return nil
}

// isLeader reads controller-runtime's leader_election_master_status gauge.
func (r *replica) isLeader(ctx context.Context) bool {
	code, body := httpGet(ctx, "http://"+r.metrics+"/metrics")
	if code != http.StatusOK {
		return false
	}
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, "leader_election_master_status{") && strings.HasSuffix(line, " 1") {
			return true
		}
	}
	return false
}

func httpGet(ctx context.Context, url string) (int, string) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, ""
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// tail is the last n lines of a file.
func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return "    " + strings.Join(lines, "\n    ")
}

// sinceStart drops the lines of a tail before the last start banner, so an
// exit is described by its own process's log only.
func sinceStart(t string) string {
	if i := strings.LastIndex(t, "===== chaos: start"); i >= 0 {
		if j := strings.IndexByte(t[i:], '\n'); j >= 0 {
			return "    " + t[i+j+1:]
		}
		return ""
	}
	return t
}
