package localcluster

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/ml-operator/ml-operator/internal/freeport"
)

// The manager on this machine, serving the local cluster. `make run` (Run)
// and the benchmark (test/bench) run bin/manager as a child process with
// StartManager; the e2e suite runs the manager in its own process with the
// same flags (ManagerEndpoints.Flags), the same readiness wait (WaitReady)
// and the same webhook wiring (ConnectWebhooks). The chaos suite, which
// kills and restarts its replicas, waits for them with WaitReady too.

// ManagerEndpoints are where a manager on this machine serves the cluster:
// free ports on 127.0.0.1 and a serving certificate for its webhooks.
type ManagerEndpoints struct {
	WebhookPort, MetricsPort, ProbePort int
	Cert                                *ServingCert
	// Webhooks is whether the manager serves webhooks: config/webhook has
	// manifests to install.
	Webhooks bool
}

// ManagerEndpoints picks the ports and writes a fresh serving certificate
// into <workdir>/webhook-certs.
func (c *Cluster) ManagerEndpoints() (ManagerEndpoints, error) {
	e := ManagerEndpoints{Webhooks: c.HasWebhookManifests()}
	var err error
	if e.Cert, err = WriteServingCert(filepath.Join(c.opts.Workdir, "webhook-certs")); err != nil {
		return e, err
	}
	for _, port := range []*int{&e.WebhookPort, &e.MetricsPort, &e.ProbePort} {
		if *port, err = freeport.Port(); err != nil {
			return e, err
		}
	}
	return e, nil
}

// Flags are the manager's flags for e: no leader election (one manager per
// cluster), none of its own dials outside 127.0.0.0/8, plain-HTTP metrics,
// and every listener on 127.0.0.1.
func (e ManagerEndpoints) Flags() []string {
	return []string{
		"--leader-elect=false",
		"--dial-loopback-only",
		"--metrics-secure=false",
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", e.MetricsPort),
		fmt.Sprintf("--health-probe-bind-address=%s", e.ProbeAddr()),
		fmt.Sprintf("--enable-webhooks=%t", e.Webhooks),
		fmt.Sprintf("--webhook-port=%d", e.WebhookPort),
		"--webhook-host=127.0.0.1",
		"--webhook-cert-path=" + e.Cert.Dir,
	}
}

// ProbeAddr is the host:port of /healthz and /readyz.
func (e ManagerEndpoints) ProbeAddr() string { return "127.0.0.1:" + strconv.Itoa(e.ProbePort) }

// MetricsURL is the manager's plain-HTTP /metrics.
func (e ManagerEndpoints) MetricsURL() string {
	return fmt.Sprintf("http://127.0.0.1:%d/metrics", e.MetricsPort)
}

// Webhook is where the API server reaches the manager's webhook server.
func (e ManagerEndpoints) Webhook() Webhook {
	return Webhook{Port: e.WebhookPort, CABundle: e.Cert.CABundle}
}

// ConnectWebhooks points the cluster's webhook configurations, and the
// TrainingJob CRD's conversion, at a ready manager serving e (whatever it
// serves: InstallWebhooks). It returns the installed webhooks, the paths
// left out, and whether conversion goes through the manager. With
// e.Webhooks false it does nothing.
func (c *Cluster) ConnectWebhooks(ctx context.Context, e ManagerEndpoints) (installed, skipped []string, conversion bool, err error) {
	if !e.Webhooks {
		return nil, nil, false, nil
	}
	w := e.Webhook()
	if installed, skipped, err = c.InstallWebhooks(ctx, w); err != nil {
		return nil, nil, false, err
	}
	if ok, _ := ServesConversion(ctx, w); ok {
		if err := c.EnableConversionWebhook(ctx, w); err != nil {
			return nil, nil, false, err
		}
		conversion = true
	}
	return installed, skipped, conversion, nil
}

// ErrManagerExited is WaitReady's error when the manager exits first.
var ErrManagerExited = errors.New("the manager exited before it was ready")

// WaitReady polls http://probeAddr/readyz every 250 ms until it answers 200.
// It fails when ctx ends, after timeout, or (ErrManagerExited) when exited
// is closed; a nil exited never is.
func WaitReady(ctx context.Context, probeAddr string, timeout time.Duration, exited <-chan struct{}) error {
	url := "http://" + probeAddr + "/readyz"
	httpClient := &http.Client{Timeout: 2 * time.Second}
	deadline := time.After(timeout)
	for {
		if resp, err := httpClient.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-exited:
			return ErrManagerExited
		case <-deadline:
			return fmt.Errorf("the manager was not ready within %s", timeout)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// ManagerOptions say which manager binary to run and how.
type ManagerOptions struct {
	// Binary is the manager (go build -o bin/manager ./cmd).
	Binary string
	// Args are more flags, after ManagerEndpoints.Flags.
	Args []string
	// LogPath receives its output.
	LogPath string
}

// Manager is the manager binary running against the cluster.
type Manager struct {
	Endpoints ManagerEndpoints
	// Webhooks are the installed webhooks and SkippedWebhooks the paths
	// the manager does not serve; Conversion is whether the TrainingJob CRD
	// converts through it (ConnectWebhooks).
	Webhooks, SkippedWebhooks []string
	Conversion                bool
	LogPath                   string

	proc *process
}

// StartManager runs the manager binary against the cluster on fresh
// endpoints, waits (two minutes at most) until it is ready and connects the
// webhooks. On error nothing it started is left running.
func (c *Cluster) StartManager(ctx context.Context, o ManagerOptions) (*Manager, error) {
	if err := CheckManagerBinary(o.Binary); err != nil {
		return nil, err
	}
	e, err := c.ManagerEndpoints()
	if err != nil {
		return nil, err
	}
	p, err := startProcess(o.Binary, c.Kubeconfig, append(e.Flags(), o.Args...), o.LogPath)
	if err != nil {
		return nil, err
	}
	m := &Manager{Endpoints: e, LogPath: o.LogPath, proc: p}
	if err := p.waitReady(ctx, e.ProbeAddr()); err != nil {
		p.stop()
		return nil, fmt.Errorf("%w; see %s", err, o.LogPath)
	}
	if m.Webhooks, m.SkippedWebhooks, m.Conversion, err = c.ConnectWebhooks(ctx, e); err != nil {
		p.stop()
		return nil, err
	}
	return m, nil
}

// CheckManagerBinary fails, saying how to build it, when binary is missing.
func CheckManagerBinary(binary string) error {
	if _, err := os.Stat(binary); err != nil {
		return fmt.Errorf("manager binary: %w (build it with `go build -o bin/manager ./cmd`)", err)
	}
	return nil
}

// PID is the manager's process id.
func (m *Manager) PID() int { return m.proc.cmd.Process.Pid }

// Done is closed once the manager has exited; Err then says how.
func (m *Manager) Done() <-chan struct{} { return m.proc.done }

// Err is the manager's exit status, once Done is closed.
func (m *Manager) Err() error { return m.proc.err }

// Stop sends SIGTERM and waits up to 15 s before killing it.
func (m *Manager) Stop() { m.proc.stop() }

// process is a child process with its output in a log file.
type process struct {
	cmd *exec.Cmd
	// done is closed once the process has exited; err is its exit status.
	done chan struct{}
	err  error
}

// startProcess runs binary with KUBECONFIG=kubeconfig and its output in
// logPath (created anew).
func startProcess(binary, kubeconfig string, args []string, logPath string) (*process, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Its own process group, so a Ctrl-C reaches only us and we stop it in
	// order; and it gets SIGTERM from the kernel if we are killed outright.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM, Setpgid: true}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting the manager: %w", err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// stop sends SIGTERM and waits up to 15 s before killing it.
func (p *process) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// waitReady is WaitReady with two minutes and the exit status of a process
// that ended first.
func (p *process) waitReady(ctx context.Context, probeAddr string) error {
	err := WaitReady(ctx, probeAddr, 2*time.Minute, p.done)
	if errors.Is(err, ErrManagerExited) {
		return fmt.Errorf("%w: %v", err, p.err)
	}
	return err
}
