// Package bench measures ml-operator on the local kwok cluster: how fast it
// creates pods under a burst (against a plain client as the ceiling), how
// quickly spec changes reach the children, what a job costs in API requests,
// how much memory the manager uses and how long a gang restart takes. It is
// what `make bench` runs (cmd/bench) and what the e2e smoke test calls.
//
// Nothing here passes or fails on speed: it measures and reports.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ml-operator/ml-operator/internal/localcluster"
)

// Env is a running cluster with the manager as a separate process, so its
// RSS can be read from /proc and its heap from its /metrics.
type Env struct {
	Cluster *localcluster.Cluster
	// Client talks to the API server with a high rate limit: the benchmark's
	// own requests must not be what is measured.
	Client client.Client
	// Kube is a clientset on the same config (raw /metrics of the apiserver).
	Kube *kubernetes.Clientset
	// ManagerPID is the manager's process id.
	ManagerPID int
	// MetricsURL is the manager's plain-HTTP /metrics.
	MetricsURL string
	// Webhooks lists the admission webhooks installed.
	Webhooks []string
	// Nodes is the number of simulated nodes.
	Nodes []localcluster.NodeSpec

	stop func()
}

// EnvOptions say where the binaries are and what the cluster must hold.
type EnvOptions struct {
	RepoRoot string
	BinDir   string
	// Manager is the manager binary (go build -o bin/manager ./cmd).
	Manager string
	Workdir string
	Name    string
	// Pods is the number of worker pods the nodes must have room for.
	Pods int
	// GPUsPerWorker decides the node shape: 0 gives CPU nodes (100 pods
	// each), otherwise GPU nodes with 8 GPUs each and one CPU node for the
	// model servers.
	GPUsPerWorker int
	// QPS and Burst are the manager's client limits.
	QPS   float64
	Burst int
	// ManagerArgs are extra manager flags.
	ManagerArgs []string
	Log         io.Writer
}

// Nodes returns the simulated nodes needed for pods worker pods.
func Nodes(pods, gpusPerWorker int) []localcluster.NodeSpec {
	var nodes []localcluster.NodeSpec
	if gpusPerWorker > 0 {
		perNode := 8 / gpusPerWorker
		for i := range (pods + perNode - 1) / perNode {
			nodes = append(nodes, localcluster.GPUNode(fmt.Sprintf("gpu-node-%d", i), 8))
		}
		// The GPU nodes are tainted: the latency scenario's model servers
		// (no GPU, no toleration) need a CPU node.
		return append(nodes, localcluster.CPUNode("cpu-node-0"))
	}
	// 110 pods per node is the kubelet's default; keep some headroom for
	// the model servers and the latency jobs.
	for i := range (pods+99)/100 + 1 {
		nodes = append(nodes, localcluster.CPUNode(fmt.Sprintf("cpu-node-%d", i)))
	}
	return nodes
}

// Start creates the cluster, installs the CRDs (and the Gateway API
// HTTPRoute CRD from test/testdata/crds), starts the manager and installs the
// webhooks. Stop it with Env.Stop; on error everything started is stopped.
func Start(ctx context.Context, o EnvOptions) (env *Env, err error) {
	if o.Log == nil {
		o.Log = io.Discard
	}
	if _, err := os.Stat(o.Manager); err != nil {
		return nil, fmt.Errorf("manager binary: %w (go build -o bin/manager ./cmd)", err)
	}
	copts := localcluster.Options{
		RepoRoot: o.RepoRoot, BinDir: o.BinDir, Workdir: o.Workdir, Name: o.Name,
		Nodes: Nodes(o.Pods, o.GPUsPerWorker), Log: o.Log,
	}
	var stops []func()
	env = &Env{Nodes: copts.Nodes}
	env.stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	defer func() {
		if err != nil {
			env.stop()
		}
	}()
	stops = append(stops, func() { _ = localcluster.Delete(context.Background(), copts) })
	c, err := localcluster.Create(ctx, copts)
	if err != nil {
		return env, fmt.Errorf("creating the cluster: %w", err)
	}
	env.Cluster = c
	reaper, err := c.StartReaper(os.Getpid(), false)
	if err != nil {
		return env, err
	}
	stops = append(stops, reaper.Stop)
	pctx, pcancel := context.WithCancel(ctx)
	stops = append(stops, pcancel)
	if err := c.RunProvisioner(pctx, o.Log); err != nil {
		return env, err
	}
	if err := env.kubectl(o, "apply", "--server-side", "-f", filepath.Join(o.RepoRoot, "test/testdata/crds/gatewayapi")); err != nil {
		return env, err
	}
	if err := env.kubectl(o, "wait", "--for=condition=Established", "--timeout=60s", "crd/httproutes.gateway.networking.k8s.io"); err != nil {
		return env, err
	}

	cfg := rest.CopyConfig(c.Config)
	cfg.QPS, cfg.Burst = 2000, 4000
	if env.Client, err = client.New(cfg, client.Options{Scheme: localcluster.Scheme()}); err != nil {
		return env, err
	}
	if env.Kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return env, err
	}

	cert, err := localcluster.WriteServingCert(filepath.Join(o.Workdir, "webhook-certs"))
	if err != nil {
		return env, err
	}
	var ports [3]int
	for i := range ports {
		if ports[i], err = localcluster.FreePort(); err != nil {
			return env, err
		}
	}
	webhookPort, metricsPort, probePort := ports[0], ports[1], ports[2]
	webhooks := c.HasWebhookManifests()
	logFile, err := os.Create(filepath.Join(o.Workdir, "manager.log"))
	if err != nil {
		return env, err
	}
	args := append([]string{
		"--leader-elect=false",
		"--dial-loopback-only",
		"--metrics-secure=false",
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", metricsPort),
		fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", probePort),
		fmt.Sprintf("--enable-webhooks=%t", webhooks),
		fmt.Sprintf("--webhook-port=%d", webhookPort),
		"--webhook-host=127.0.0.1",
		"--webhook-cert-path=" + cert.Dir,
		fmt.Sprintf("--kube-api-qps=%g", o.QPS),
		fmt.Sprintf("--kube-api-burst=%d", o.Burst),
	}, o.ManagerArgs...)
	mgr := exec.Command(o.Manager, args...)
	mgr.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig)
	mgr.Stdout, mgr.Stderr = logFile, logFile
	mgr.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM, Setpgid: true}
	fmt.Fprintf(o.Log, "Starting the manager (QPS %g, burst %d; log %s)\n", o.QPS, o.Burst, logFile.Name())
	if err := mgr.Start(); err != nil {
		logFile.Close()
		return env, fmt.Errorf("starting the manager: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = mgr.Wait(); close(done) }()
	stops = append(stops, func() {
		select {
		case <-done:
		default:
			_ = mgr.Process.Signal(syscall.SIGTERM)
			select {
			case <-done:
			case <-time.After(15 * time.Second):
				_ = mgr.Process.Kill()
				<-done
			}
		}
		logFile.Close()
	})
	env.ManagerPID = mgr.Process.Pid
	env.MetricsURL = fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort)
	if err := waitReady(ctx, fmt.Sprintf("http://127.0.0.1:%d/readyz", probePort), done); err != nil {
		return env, fmt.Errorf("%w; see %s", err, logFile.Name())
	}
	if webhooks {
		w := localcluster.Webhook{Port: webhookPort, CABundle: cert.CABundle}
		if env.Webhooks, _, err = c.InstallWebhooks(ctx, w); err != nil {
			return env, err
		}
		if ok, _ := localcluster.ServesConversion(ctx, w); ok {
			if err := c.EnableConversionWebhook(ctx, w); err != nil {
				return env, err
			}
		}
	}
	return env, nil
}

// Stop stops the manager and deletes the cluster.
func (e *Env) Stop() {
	if e != nil && e.stop != nil {
		e.stop()
	}
}

func (e *Env) kubectl(o EnvOptions, args ...string) error {
	cmd := exec.Command(filepath.Join(o.BinDir, "kubectl"), args...)
	cmd.Env = e.Cluster.KubectlEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

func waitReady(ctx context.Context, url string, exited <-chan struct{}) error {
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
		case <-exited:
			return errors.New("the manager exited before it was ready")
		case <-deadline:
			return errors.New("the manager was not ready within 2 minutes")
		case <-time.After(250 * time.Millisecond):
		}
	}
}
