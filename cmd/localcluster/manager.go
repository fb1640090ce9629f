package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/ml-operator/ml-operator/internal/localcluster"
)

// managerPorts are the manager's listeners, all on 127.0.0.1.
type managerPorts struct{ webhook, metrics, probe int }

func freeManagerPorts() (managerPorts, error) {
	var p managerPorts
	for _, port := range []*int{&p.webhook, &p.metrics, &p.probe} {
		var err error
		if *port, err = localcluster.FreePort(); err != nil {
			return p, err
		}
	}
	return p, nil
}

// managerProcess is bin/manager running against the local cluster.
type managerProcess struct {
	cmd *exec.Cmd
	// done is closed once the process has exited; err is its exit status.
	done chan struct{}
	err  error
}

// startManager runs the manager binary with its output in logFile.
func startManager(binary, kubeconfig string, args []string, logFile *os.File) (*managerProcess, error) {
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Its own process group, so Ctrl-C reaches only us and we stop it in
	// order; and it gets SIGTERM from the kernel if we are killed outright.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the manager: %w", err)
	}
	m := &managerProcess{cmd: cmd, done: make(chan struct{})}
	go func() { m.err = cmd.Wait(); close(m.done) }()
	return m, nil
}

// stop sends SIGTERM and waits up to 15 s before killing it.
func (m *managerProcess) stop() {
	select {
	case <-m.done:
		return
	default:
	}
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.done:
	case <-time.After(15 * time.Second):
		_ = m.cmd.Process.Kill()
		<-m.done
	}
}

// waitReady polls the manager's /readyz until it answers 200.
func (m *managerProcess) waitReady(ctx context.Context, port int) error {
	url := fmt.Sprintf("http://127.0.0.1:%d/readyz", port)
	deadline := time.After(2 * time.Minute)
	for {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-m.done:
			return fmt.Errorf("the manager exited before it was ready: %v", m.err)
		case <-deadline:
			return errors.New("the manager was not ready within 2 minutes")
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// installWebhooks points the cluster's webhook configurations, and the
// TrainingJob conversion, at the manager on 127.0.0.1 (whatever it serves).
func installWebhooks(ctx context.Context, c *localcluster.Cluster, w localcluster.Webhook) (webhooks, conversion bool, err error) {
	installed, skipped, err := c.InstallWebhooks(ctx, w)
	if err != nil {
		return false, false, err
	}
	if len(installed) > 0 {
		fmt.Fprintf(os.Stderr, "Installed webhooks %s (URL client config on 127.0.0.1:%d)\n", strings.Join(installed, ", "), w.Port)
	}
	if len(skipped) > 0 {
		fmt.Fprintf(os.Stderr, "Not installed, the manager does not serve them yet: %s\n", strings.Join(skipped, ", "))
	}
	if ok, _ := localcluster.ServesConversion(ctx, w); ok {
		if err := c.EnableConversionWebhook(ctx, w); err != nil {
			return false, false, err
		}
		conversion = true
	}
	return len(installed) > 0, conversion, nil
}
