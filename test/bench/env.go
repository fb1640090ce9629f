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
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ml-operator/ml-operator/internal/freeport"
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
	// PprofURL is the manager's /debug/pprof/ on loopback (EnvOptions.Pprof),
	// empty without it.
	PprofURL string
	// Webhooks lists the admission webhooks installed.
	Webhooks []string
	// NoopWebhooks lists their no-op twins (noop.go): admission's floor.
	NoopWebhooks []string
	// Nodes is the number of simulated nodes.
	Nodes []localcluster.NodeSpec

	binDir, workdir string
	stop            func()
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
	// Pprof serves the manager's profiler on a free loopback port
	// (--pprof-bind-address), for heap profiles (Env.HeapProfile).
	Pprof bool
	// NativeGangs starts the cluster with native gang scheduling on
	// (localcluster.Options.NativeGangs).
	NativeGangs bool
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
	if err := localcluster.CheckManagerBinary(o.Manager); err != nil {
		return nil, err
	}
	copts := localcluster.Options{
		RepoRoot: o.RepoRoot, BinDir: o.BinDir, Workdir: o.Workdir, Name: o.Name,
		Nodes: Nodes(o.Pods, o.GPUsPerWorker), Log: o.Log, NativeGangs: o.NativeGangs,
	}
	var stops []func()
	env = &Env{Nodes: copts.Nodes, binDir: o.BinDir, workdir: o.Workdir}
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
	if err := c.WaitEstablished(ctx, "httproutes.gateway.networking.k8s.io"); err != nil {
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

	args := append([]string{
		fmt.Sprintf("--kube-api-qps=%g", o.QPS),
		fmt.Sprintf("--kube-api-burst=%d", o.Burst),
	}, o.ManagerArgs...)
	if o.Pprof {
		port, err := freeport.Port()
		if err != nil {
			return env, err
		}
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		args = append(args, "--pprof-bind-address="+addr)
		env.PprofURL = "http://" + addr + "/debug/pprof/"
	}
	logPath := filepath.Join(o.Workdir, "manager.log")
	fmt.Fprintf(o.Log, "Starting the manager (QPS %g, burst %d; log %s)\n", o.QPS, o.Burst, logPath)
	mgr, err := c.StartManager(ctx, localcluster.ManagerOptions{
		Binary:  o.Manager,
		Args:    args,
		LogPath: logPath,
	})
	if err != nil {
		return env, err
	}
	stops = append(stops, mgr.Stop)
	env.ManagerPID = mgr.PID()
	env.MetricsURL = mgr.Endpoints.MetricsURL()
	env.Webhooks = mgr.Webhooks
	noop, stopNoop, err := startNoopWebhook(ctx, o, env.Client, mgr.Webhooks)
	if err != nil {
		return env, err
	}
	stops = append(stops, stopNoop)
	env.NoopWebhooks = noop
	fmt.Fprintf(o.Log, "No-op webhooks beside ours: %s\n", strings.Join(noop, ", "))
	return env, nil
}

// Stop stops the manager and deletes the cluster; a second call does
// nothing.
func (e *Env) Stop() {
	if e != nil && e.stop != nil {
		e.stop()
		e.stop = nil
	}
}

func (e *Env) kubectl(o EnvOptions, args ...string) error {
	return e.kubectlRun(args...)
}

// kubectlRun runs bin/kubectl against the cluster.
func (e *Env) kubectlRun(args ...string) error {
	cmd := exec.Command(filepath.Join(e.binDir, "kubectl"), args...)
	cmd.Env = e.Cluster.KubectlEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return nil
}
