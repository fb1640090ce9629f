package localcluster

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// RunOptions are what `make run` (cmd/localcluster run) needs: the
// cluster's options, the manager binary and its extra flags.
type RunOptions struct {
	Options
	// Manager is the manager binary (go build -o bin/manager ./cmd).
	Manager string
	// ManagerArgs are extra manager flags (make run MANAGER_ARGS=...).
	ManagerArgs []string
	// Out receives what the user needs once everything is up: the
	// kubeconfig to export, what to try, where the logs are.
	Out io.Writer
}

// Run brings up the cluster, installs the CRDs, starts the simulated
// provisioner and trainers, runs the manager and connects its webhooks. It
// waits until ctx ends (Ctrl-C, `make run-down`) or the manager exits, and
// tears everything down. One run per workdir: a second one fails with an
// *AlreadyRunningError and leaves the first alone.
func Run(ctx context.Context, o RunOptions) (err error) {
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if err := CheckManagerBinary(o.Manager); err != nil {
		return err
	}
	// One run per workdir: a second one must neither delete the running
	// cluster nor attach a second manager to it.
	unlock, cleared, err := Lock(o.Options)
	if err != nil {
		return err
	}
	defer unlock()
	if cleared {
		fmt.Fprintf(o.Log, "A run of %s that is gone left its lock behind: cleared\n", o.Workdir)
	}

	c, err := Create(ctx, o.Options)
	if err != nil {
		_ = Delete(context.Background(), o.Options)
		return err
	}
	reaper, err := c.StartReaper(os.Getpid(), false)
	if err != nil {
		_ = c.Delete(context.Background())
		return err
	}
	defer func() {
		fmt.Fprintln(o.Log, "\nTearing down the local cluster")
		if derr := c.Delete(context.Background()); derr != nil && err == nil {
			err = derr
		}
		reaper.Stop()
	}()

	if err := c.RunProvisioner(ctx, o.Log); err != nil {
		return err
	}
	c.RunTrainers(ctx, o.Log)

	logPath := filepath.Join(o.Workdir, "manager.log")
	fmt.Fprintf(o.Log, "Starting the manager (log: %s)\n", logPath)
	mgr, err := c.StartManager(ctx, ManagerOptions{
		Binary: o.Manager,
		// The lock (one make run per workdir) makes leader election
		// unneeded; ManagerEndpoints.Flags turns it off.
		Args:    append([]string{"--zap-devel"}, o.ManagerArgs...),
		LogPath: logPath,
	})
	if err != nil {
		return err
	}
	defer mgr.Stop()
	if len(mgr.Webhooks) > 0 {
		fmt.Fprintf(o.Log, "Installed webhooks %s (URL client config on 127.0.0.1:%d)\n", strings.Join(mgr.Webhooks, ", "), mgr.Endpoints.WebhookPort)
	}
	if len(mgr.SkippedWebhooks) > 0 {
		fmt.Fprintf(o.Log, "Not installed, the manager does not serve them yet: %s\n", strings.Join(mgr.SkippedWebhooks, ", "))
	}

	fmt.Fprintf(o.Out, "\nLocal cluster %q is up: %s.\n", o.Name, describeNodes(o.Options))
	if o.NativeGangs {
		fmt.Fprintf(o.Out, "Native gang scheduling is on (feature gates %s; %s): TrainingJobs get a Workload and PodGroup per attempt.\n",
			NativeGangFeatureGates, NativeGangRuntimeConfig)
	}
	fmt.Fprintf(o.Out, "The manager is running (webhooks: %s, conversion webhook: %s, metrics: %s).\n\n",
		onOff(len(mgr.Webhooks) > 0), onOff(mgr.Conversion), mgr.Endpoints.MetricsURL())
	fmt.Fprintf(o.Out, "export KUBECONFIG=%s\n\n", c.Kubeconfig)
	fmt.Fprintf(o.Out, "Then, in another terminal (kubectl is in %s):\n", o.BinDir)
	fmt.Fprintln(o.Out, "  kubectl apply -k config/samples")
	fmt.Fprintln(o.Out, "  kubectl get tj,md -A")
	fmt.Fprintf(o.Out, "\nManager log: %s\nComponent logs: %s\n", logPath, c.LogsDir())
	fmt.Fprintln(o.Out, "Stop with Ctrl-C here, or `make run-down`.")

	select {
	case <-ctx.Done():
		return nil
	case <-mgr.Done():
		return fmt.Errorf("the manager exited: %v; see %s", mgr.Err(), logPath)
	}
}

// Down stops a running Run on the same workdir (which tears its cluster
// down) and deletes whatever is left.
func Down(ctx context.Context, o Options) error {
	if o.Log == nil {
		o.Log = io.Discard
	}
	if pid := RunningPID(o); pid != 0 {
		fmt.Fprintf(o.Log, "Stopping `make run` (pid %d)\n", pid)
		_ = syscall.Kill(pid, syscall.SIGTERM)
		deadline := time.Now().Add(time.Minute)
		for RunningPID(o) == pid && time.Now().Before(deadline) {
			time.Sleep(200 * time.Millisecond)
		}
	}
	if err := Delete(ctx, o); err != nil {
		return err
	}
	fmt.Fprintf(o.Log, "Local cluster %q deleted\n", o.Name)
	return nil
}

func describeNodes(o Options) string {
	nodes := o.Nodes
	if nodes == nil {
		nodes = DefaultNodes()
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
