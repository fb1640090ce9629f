// Command localcluster runs ml-operator on a local kwok cluster: a real
// kube-apiserver, etcd, kube-controller-manager and kube-scheduler from bin/,
// with kwok playing the kubelets of simulated GPU and CPU nodes. It is what
// `make run` uses when no cluster is reachable (or LOCAL=1).
//
//	localcluster run  [flags] [-- manager flags]   cluster + CRDs + webhooks + manager, until Ctrl-C
//	localcluster down [flags]                      stops a run and deletes its cluster
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/ml-operator/ml-operator/internal/localcluster"
)

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	cmd, args := os.Args[1], os.Args[2:]
	var err error
	switch cmd {
	case "run":
		err = run(args)
	case "down":
		err = down(args)
	default:
		usage()
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "localcluster %s: %v\n", cmd, err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: localcluster run|down [--workdir DIR] [--name NAME] [--bin DIR] [-- manager flags]")
}

type flags struct {
	opts    localcluster.Options
	manager string
	extra   []string
}

func parseFlags(name string, args []string) (*flags, error) {
	wd, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	f := &flags{}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.StringVar(&f.opts.RepoRoot, "repo", wd, "Repository root (config/crd, config/webhook, hack/kwok).")
	fs.StringVar(&f.opts.BinDir, "bin", filepath.Join(wd, "bin"), "Directory with kwokctl, kwok, kube-apiserver, etcd, kube-controller-manager and kube-scheduler.")
	fs.StringVar(&f.opts.Workdir, "workdir", filepath.Join(wd, ".kwok"), "Where the cluster keeps its state, kubeconfig, certificates and logs.")
	fs.StringVar(&f.opts.Name, "name", "ml-operator", "Cluster name.")
	fs.StringVar(&f.manager, "manager", filepath.Join(wd, "bin", "manager"), "The manager binary (go build -o bin/manager ./cmd).")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	f.extra = fs.Args()
	for _, p := range []*string{&f.opts.RepoRoot, &f.opts.BinDir, &f.opts.Workdir, &f.manager} {
		if *p, err = filepath.Abs(*p); err != nil {
			return nil, err
		}
	}
	f.opts.Log = os.Stderr
	return f, nil
}

// down stops a running `localcluster run` (which tears its cluster down) and
// deletes whatever is left.
func down(args []string) error {
	f, err := parseFlags("down", args)
	if err != nil {
		return err
	}
	if pid := localcluster.RunningPID(f.opts); pid != 0 {
		fmt.Fprintf(os.Stderr, "Stopping `make run` (pid %d)\n", pid)
		_ = syscall.Kill(pid, syscall.SIGTERM)
		deadline := time.Now().Add(time.Minute)
		for localcluster.RunningPID(f.opts) == pid && time.Now().Before(deadline) {
			time.Sleep(200 * time.Millisecond)
		}
	}
	if err := localcluster.Delete(context.Background(), f.opts); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "Local cluster %q deleted\n", f.opts.Name)
	return nil
}

// run brings everything up, waits for Ctrl-C (or `make run-down`, or the
// manager exiting) and tears everything down.
func run(args []string) (err error) {
	f, err := parseFlags("run", args)
	if err != nil {
		return err
	}
	if _, err := os.Stat(f.manager); err != nil {
		return fmt.Errorf("manager binary: %w (build it with `go build -o bin/manager ./cmd`)", err)
	}
	// One run per workdir: a second one must neither delete the running
	// cluster nor attach a second manager to it.
	unlock, cleared, err := localcluster.Lock(f.opts)
	if err != nil {
		return err
	}
	defer unlock()
	if cleared {
		fmt.Fprintf(os.Stderr, "A run of %s that is gone left its lock behind: cleared\n", f.opts.Workdir)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	c, err := localcluster.Create(ctx, f.opts)
	if err != nil {
		_ = localcluster.Delete(context.Background(), f.opts)
		return err
	}
	reaper, err := c.StartReaper(os.Getpid(), false)
	if err != nil {
		_ = c.Delete(context.Background())
		return err
	}
	defer func() {
		fmt.Fprintln(os.Stderr, "\nTearing down the local cluster")
		if derr := c.Delete(context.Background()); derr != nil && err == nil {
			err = derr
		}
		reaper.Stop()
	}()

	if err := c.RunProvisioner(ctx, os.Stderr); err != nil {
		return err
	}
	c.RunTrainers(ctx, os.Stderr)
	cert, err := localcluster.WriteServingCert(filepath.Join(f.opts.Workdir, "webhook-certs"))
	if err != nil {
		return err
	}
	ports, err := freeManagerPorts()
	if err != nil {
		return err
	}
	webhooks := c.HasWebhookManifests()

	logPath := filepath.Join(f.opts.Workdir, "manager.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logFile.Close()
	fmt.Fprintf(os.Stderr, "Starting the manager (log: %s)\n", logPath)
	mgr, err := startManager(f.manager, c.Kubeconfig, append([]string{
		// The lock (one make run per workdir) makes leader election unneeded.
		"--leader-elect=false",
		// Nothing of the manager's own dials outside 127.0.0.0/8.
		"--dial-loopback-only",
		"--metrics-secure=false",
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", ports.metrics),
		fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", ports.probe),
		fmt.Sprintf("--enable-webhooks=%t", webhooks),
		fmt.Sprintf("--webhook-port=%d", ports.webhook),
		"--webhook-host=127.0.0.1",
		"--webhook-cert-path=" + cert.Dir,
		"--zap-devel",
	}, f.extra...), logFile)
	if err != nil {
		return err
	}
	defer mgr.stop()
	if err := mgr.waitReady(ctx, ports.probe); err != nil {
		return fmt.Errorf("%w; see %s", err, logPath)
	}
	conversion := false
	if webhooks {
		w := localcluster.Webhook{Port: ports.webhook, CABundle: cert.CABundle}
		if webhooks, conversion, err = installWebhooks(ctx, c, w); err != nil {
			return err
		}
	}

	fmt.Printf("\nLocal cluster %q is up: %s.\n", f.opts.Name, describeNodes(f.opts))
	fmt.Printf("The manager is running (webhooks: %s, conversion webhook: %s, metrics: http://127.0.0.1:%d/metrics).\n\n",
		onOff(webhooks), onOff(conversion), ports.metrics)
	fmt.Printf("export KUBECONFIG=%s\n\n", c.Kubeconfig)
	fmt.Printf("Then, in another terminal (kubectl is in %s):\n", f.opts.BinDir)
	fmt.Println("  kubectl apply -k config/samples")
	fmt.Println("  kubectl get tj,md -A")
	fmt.Printf("\nManager log: %s\nComponent logs: %s\n", logPath, c.LogsDir())
	fmt.Println("Stop with Ctrl-C here, or `make run-down`.")

	select {
	case <-ctx.Done():
		return nil
	case <-mgr.done:
		return fmt.Errorf("the manager exited: %v; see %s", mgr.err, logPath)
	}
}

func describeNodes(o localcluster.Options) string {
	nodes := o.Nodes
	if nodes == nil {
		nodes = localcluster.DefaultNodes()
	}
	gpuNodes, cpuNodes, gpus := 0, 0, 0
	for _, n := range nodes {
		if n.GPUs > 0 {
			gpuNodes++
			gpus += n.GPUs
		} else {
			cpuNodes++
		}
	}
	return fmt.Sprintf("%d GPU nodes (%d nvidia.com/gpu in all), %d CPU nodes", gpuNodes, gpus, cpuNodes)
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}
