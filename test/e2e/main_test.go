//go:build e2e

// Package e2e runs ml-operator against a local kwok cluster: a real
// kube-apiserver, etcd, kube-controller-manager and kube-scheduler with
// simulated GPU nodes. It covers what envtest cannot: the scheduler placing
// GPU pods, the garbage collector, the Deployment and HPA controllers, and
// kubectl's view of the CRDs. The suite starts its own cluster and manager
// and stops them at the end (`make e2e`).
package e2e

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlzap "sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/ml-operator/ml-operator/internal/localcluster"
	"github.com/ml-operator/ml-operator/internal/manager"
	"github.com/ml-operator/ml-operator/test/testutil"
)

// env is the running cluster every test uses.
var env struct {
	cluster *localcluster.Cluster
	client  client.Client
	// webhooks lists the webhooks the manager serves and the cluster calls.
	webhooks []string
	// conversion is true when the TrainingJob CRD converts through the manager.
	conversion bool
	// trainers serve the progress contract on every Running rank 0.
	trainers *localcluster.Trainers
	// nativeGangs is true when the cluster runs with Kubernetes' native
	// gang scheduling (-gang=native).
	nativeGangs bool
}

// gang selects the cluster's gang scheduling: "native" starts it with the
// native gang scheduling feature gates. `make e2e` runs the suite without
// them, then the TestNativeGang tests in a second run with them.
var gang = flag.String("gang", "", `"native": the cluster runs with Kubernetes' native gang scheduling (the TestNativeGang tests need it)`)

func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) (code int) {
	flag.Parse()
	switch *gang {
	case "":
	case "native":
		env.nativeGangs = true
	default:
		fmt.Fprintf(os.Stderr, "-gang: %q is not \"native\"\n", *gang)
		return 2
	}
	root := testutil.RepoRoot()
	workdir, err := os.MkdirTemp("", "ml-operator-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(workdir)
	opts := localcluster.Options{
		RepoRoot:    root,
		BinDir:      filepath.Join(root, "bin"),
		Workdir:     workdir,
		Name:        "e2e",
		Log:         os.Stderr,
		NativeGangs: env.nativeGangs,
	}
	if env.nativeGangs {
		// Its own name, so that its loopback ranges differ from the plain run's.
		opts.Name = "e2e-native"
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	start := time.Now()
	c, err := localcluster.Create(ctx, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "creating the cluster:", err)
		_ = localcluster.Delete(context.Background(), opts)
		return 1
	}
	// If this process dies without the deferred teardown (a panic, the go
	// test timeout), the reaper still deletes the cluster.
	reaper, err := c.StartReaper(os.Getpid(), true)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		_ = c.Delete(context.Background())
		return 1
	}
	defer func() {
		if code != 0 {
			keepLogs(c, workdir)
		}
		if err := c.Delete(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, "deleting the cluster:", err)
		}
		reaper.Stop()
	}()
	env.cluster, env.client = c, c.Client
	if err := c.RunProvisioner(ctx, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	env.trainers = c.RunTrainers(ctx, os.Stderr)

	stopManager, err := startManager(ctx, c, workdir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the manager:", err)
		return 1
	}
	defer stopManager()
	fmt.Fprintf(os.Stderr, "e2e: cluster and manager ready in %s (webhooks: %v, conversion webhook: %v, native gangs: %v)\n",
		time.Since(start).Round(time.Second), env.webhooks, env.conversion, env.nativeGangs)
	code = m.Run()
	// Whatever the tests made, no address in the cluster may be outside
	// 127.0.0.0/8 (loopback_test.go).
	if bad, err := nonLoopbackAddresses(ctx, c.Client); err != nil || len(bad) > 0 {
		fmt.Fprintf(os.Stderr, "e2e: addresses outside 127.0.0.0/8 after the suite (%v):\n  %s\n", err, strings.Join(bad, "\n  "))
		return 1
	}
	return code
}

// startManager runs the manager in this process with the flags `make run`
// gives bin/manager (localcluster.ManagerEndpoints): webhooks on 127.0.0.1
// with a certificate made for it.
func startManager(ctx context.Context, c *localcluster.Cluster, workdir string) (stop func(), err error) {
	endpoints, err := c.ManagerEndpoints()
	if err != nil {
		return nil, err
	}
	opts := manager.NewOptions()
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	opts.BindFlags(fs)
	if err := fs.Parse(endpoints.Flags()); err != nil {
		return nil, err
	}
	logFile, err := os.Create(filepath.Join(workdir, "manager.log"))
	if err != nil {
		return nil, err
	}
	ctrl.SetLogger(ctrlzap.New(ctrlzap.WriteTo(logFile), ctrlzap.UseDevMode(true),
		ctrlzap.Level(zapcore.InfoLevel)))

	mctx, mcancel := context.WithCancel(ctx)
	exited := make(chan struct{})
	var runErr error
	go func() {
		runErr = manager.Run(mctx, c.Config, opts)
		close(exited)
	}()
	stop = func() {
		mcancel()
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			// The cluster is deleted next either way; a reconciler that
			// ignores its context is the manager's bug, not a reason to wait.
			fmt.Fprintln(os.Stderr, "e2e: the manager did not stop within 10s")
		}
		logFile.Close()
	}

	if err := localcluster.WaitReady(ctx, endpoints.ProbeAddr(), time.Minute, exited); err != nil {
		stop()
		if errors.Is(err, localcluster.ErrManagerExited) {
			err = fmt.Errorf("%w: %v", err, runErr)
		}
		return nil, err
	}
	if env.webhooks, _, env.conversion, err = c.ConnectWebhooks(ctx, endpoints); err != nil {
		stop()
		return nil, err
	}
	return stop, nil
}

// keepLogs copies the component and manager logs out of the workdir before
// it is deleted, so a failed run can be read afterwards.
func keepLogs(c *localcluster.Cluster, workdir string) {
	dst, err := os.MkdirTemp("", "ml-operator-e2e-logs-")
	if err != nil {
		return
	}
	_ = exec.Command("cp", "-r", c.LogsDir(), filepath.Join(workdir, "manager.log"), dst).Run()
	fmt.Fprintf(os.Stderr, "e2e failed: logs kept in %s\n", dst)
}

// kubectl runs bin/kubectl against the cluster and returns its standard
// output (warnings, such as v1alpha1's deprecation, go to standard error).
func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	out, err := kubectlErr(args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func kubectlErr(args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(testutil.RepoRoot(), "bin", "kubectl"), args...)
	cmd.Env = env.cluster.KubectlEnv()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out) + stderr.String(), err
	}
	return string(out), nil
}

// waitFor polls cond every 250 ms until it holds, failing the test after
// timeout with the last state cond described.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for {
		var ok bool
		ok, last = cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s; last seen: %s", what, timeout, last)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// namespace creates a namespace for one test and deletes it afterwards.
func namespace(t *testing.T) string {
	t.Helper()
	ns := testutil.Namespace(t, env.client)
	t.Cleanup(func() {
		_, _ = kubectlErr("delete", "namespace", ns, "--wait=false")
	})
	waitDefaultServiceAccount(t, ns)
	return ns
}

// waitDefaultServiceAccount waits for kube-controller-manager to create the
// namespace's default ServiceAccount; pods cannot be created before it exists.
func waitDefaultServiceAccount(t *testing.T, ns string) {
	t.Helper()
	waitFor(t, 30*time.Second, "ServiceAccount "+ns+"/default", func() (bool, string) {
		err := env.client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "default"}, &corev1.ServiceAccount{})
		return err == nil, fmt.Sprint(err)
	})
}
