// Package localcluster brings up and tears down the local kwok cluster that
// `make run`, `make e2e`, `make chaos` and `make bench` use: a real
// kube-apiserver, etcd, kube-controller-manager and kube-scheduler from bin/,
// with kwok simulating the kubelets of a handful of GPU and CPU nodes. It
// also prepares what the operator needs on it: CRDs, a serving certificate
// for 127.0.0.1 and webhook configurations that point at a manager running
// on this machine, which StartManager starts (manager.go). Run and Down are
// `make run` and `make run-down` (cmd/localcluster is their command line).
package localcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ml-operator/ml-operator/internal/manager"
)

// FieldOwner is the server-side-apply field manager of everything this
// package writes.
const FieldOwner = "ml-operator-localcluster"

// Options say where the binaries are, where the cluster keeps its state and
// what it looks like.
type Options struct {
	// RepoRoot holds config/crd/bases, config/webhook and hack/kwok.
	RepoRoot string
	// BinDir holds kube-apiserver, etcd, kube-controller-manager,
	// kube-scheduler, kwok and kwokctl (what `make cluster-tools` builds).
	BinDir string
	// Workdir is kwokctl's KWOK_WORKDIR; the kubeconfig, certificates and
	// logs are kept there too.
	Workdir string
	// Name is the kwokctl cluster name.
	Name string
	// Nodes are created once the control plane is up (DefaultNodes when nil).
	Nodes []NodeSpec
	// Log receives progress messages and kwokctl's output (io.Discard when nil).
	Log io.Writer
	// Addresses are the cluster's loopback ranges (AddressesFor the workdir
	// and name when zero).
	Addresses Addresses
	// AuditPolicy, when set, is the kube-apiserver audit policy file; the
	// audit log is then <workdir>/clusters/<name>/logs/audit.log (the chaos
	// suite reads who deleted a pod from it).
	AuditPolicy string
	// NativeGangs starts kube-apiserver, kube-controller-manager and
	// kube-scheduler with Kubernetes' native gang scheduling on
	// (NativeGangFeatureGates, NativeGangRuntimeConfig).
	NativeGangs bool
}

// Cluster is a running local cluster.
type Cluster struct {
	opts Options
	// Kubeconfig is the path of a kubeconfig for the cluster (admin).
	Kubeconfig string
	// Config is the REST config read from Kubeconfig.
	Config *rest.Config
	// Client talks to the API server directly (no cache).
	Client client.Client
}

// StagesFile is the kwok Stage configuration, relative to the repository root.
const StagesFile = "hack/kwok/stages.yaml"

func (o *Options) defaults() {
	if o.Name == "" {
		o.Name = "ml-operator"
	}
	if o.Nodes == nil {
		o.Nodes = DefaultNodes()
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if !o.Addresses.PodCIDR.IsValid() {
		o.Addresses = AddressesFor(o.Workdir, o.Name)
	}
}

// Create starts a fresh cluster (deleting a stale one of the same name in
// the same workdir first), creates the nodes and installs the CRDs. It
// returns once every node is Ready.
func Create(ctx context.Context, opts Options) (*Cluster, error) {
	opts.defaults()
	for _, bin := range []string{"kwokctl", "kwok", "kube-apiserver", "etcd", "kube-controller-manager", "kube-scheduler"} {
		if _, err := os.Stat(filepath.Join(opts.BinDir, bin)); err != nil {
			return nil, fmt.Errorf("%s not found in %s: run `make cluster-tools`: %w", bin, opts.BinDir, err)
		}
	}
	if err := os.MkdirAll(opts.Workdir, 0o755); err != nil {
		return nil, fmt.Errorf("creating workdir: %w", err)
	}
	c := &Cluster{opts: opts, Kubeconfig: filepath.Join(opts.Workdir, "kubeconfig")}

	// A cluster left behind by a killed run would hold stale ports and pids.
	_ = c.kwokctl(ctx, "delete", "cluster", "--name", opts.Name, "--kubeconfig", c.Kubeconfig)

	config, err := opts.Addresses.writeKwokConfig(opts.RepoRoot, opts.Workdir, opts.NativeGangs)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(opts.Log, "Starting kube-apiserver, etcd, kube-controller-manager, kube-scheduler and kwok from %s\n", opts.BinDir)
	b := opts.BinDir
	var audit []string
	if opts.AuditPolicy != "" {
		audit = []string{"--kube-audit-policy", opts.AuditPolicy}
	}
	if err := c.kwokctl(ctx, append([]string{"create", "cluster",
		"--name", opts.Name,
		"--runtime", "binary",
		"--kube-apiserver-binary", filepath.Join(b, "kube-apiserver"),
		"--kube-controller-manager-binary", filepath.Join(b, "kube-controller-manager"),
		"--kube-scheduler-binary", filepath.Join(b, "kube-scheduler"),
		"--kwok-controller-binary", filepath.Join(b, "kwok"),
		"--etcd-binary", filepath.Join(b, "etcd"),
		// Written here, never into ~/.kube/config.
		"--kubeconfig", c.Kubeconfig,
		// The Stages, and kwok's and kwokctl's options: loopback addresses
		// only (addresses.go).
		"--config", config,
		"--wait", "2m",
	}, audit...)...); err != nil {
		return nil, fmt.Errorf("kwokctl create cluster: %w", err)
	}

	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", c.Kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	c.Config = cfg
	if c.Client, err = client.New(cfg, client.Options{Scheme: Scheme()}); err != nil {
		return nil, fmt.Errorf("creating client: %w", err)
	}
	if err := c.waitAPIServer(ctx); err != nil {
		return nil, err
	}
	if err := c.WaitServiceAccount(ctx, "default", 3*time.Minute); err != nil {
		return nil, err
	}
	if err := c.AddNodes(ctx, opts.Nodes...); err != nil {
		return nil, err
	}
	if err := c.InstallCRDs(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// Delete stops every process of the cluster and removes its state.
func (c *Cluster) Delete(ctx context.Context) error {
	return Delete(ctx, c.opts)
}

// Delete stops the named cluster's processes and removes its state; a
// cluster that does not exist is not an error.
func Delete(ctx context.Context, opts Options) error {
	opts.defaults()
	c := &Cluster{opts: opts}
	if _, err := os.Stat(filepath.Join(opts.Workdir, "clusters", opts.Name)); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	kubeconfig := filepath.Join(opts.Workdir, "kubeconfig")
	if err := c.kwokctl(ctx, "delete", "cluster", "--name", opts.Name, "--kubeconfig", kubeconfig); err != nil {
		return fmt.Errorf("kwokctl delete cluster: %w", err)
	}
	return nil
}

// LogsDir is where kwokctl writes each component's log.
func (c *Cluster) LogsDir() string {
	return filepath.Join(c.opts.Workdir, "clusters", c.opts.Name, "logs")
}

// Addresses are the cluster's loopback ranges.
func (c *Cluster) Addresses() Addresses { return c.opts.Addresses }

// Workdir is the cluster's state directory.
func (c *Cluster) Workdir() string { return c.opts.Workdir }

// KubectlEnv is the environment for running bin/kubectl against the cluster.
func (c *Cluster) KubectlEnv() []string {
	return append(os.Environ(), "KUBECONFIG="+c.Kubeconfig)
}

func (c *Cluster) kwokctl(ctx context.Context, args ...string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(c.opts.BinDir, "kwokctl"), args...)
	// kwokctl looks kubectl and the components up on PATH before it thinks of
	// downloading them; bin/ first keeps it offline.
	cmd.Env = append(os.Environ(),
		"KWOK_WORKDIR="+c.opts.Workdir,
		"PATH="+c.opts.BinDir+string(os.PathListSeparator)+os.Getenv("PATH"),
	)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// Its own process group: a Ctrl-C meant for `make run` must not kill
	// kwokctl half way through creating or deleting the cluster.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err := cmd.Run()
	if err != nil {
		return fmt.Errorf("%w: %s", err, strings.TrimSpace(out.String()))
	}
	return nil
}

// WaitServiceAccount waits until namespace has its "default"
// ServiceAccount, which kube-controller-manager creates and without which no
// pod is admitted there. On a loaded machine kube-controller-manager can
// exit at startup (it gives kube-apiserver about 20 s to report etcd
// healthy, and exits for good), and kwokctl does not restart it: then no
// namespace ever gets its ServiceAccount. So every 30 s without it,
// `kwokctl start cluster` starts the components that are not running; it
// leaves the running ones alone.
func (c *Cluster) WaitServiceAccount(ctx context.Context, namespace string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	restart := time.Now().Add(30 * time.Second)
	for {
		err := c.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "default"}, &corev1.ServiceAccount{})
		if err == nil {
			return nil
		}
		if time.Now().After(restart) {
			fmt.Fprintf(c.opts.Log, "No ServiceAccount %s/default yet: starting the cluster's components that are not running\n", namespace)
			if err := c.kwokctl(ctx, "start", "cluster", "--name", c.opts.Name); err != nil {
				fmt.Fprintf(c.opts.Log, "kwokctl start cluster: %v\n", err)
			}
			restart = time.Now().Add(30 * time.Second)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for ServiceAccount %s/default (kube-controller-manager creates it; its log: %s): %w (last error: %v)",
				namespace, filepath.Join(c.LogsDir(), "kube-controller-manager.log"), ctx.Err(), err)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func (c *Cluster) waitAPIServer(ctx context.Context) error {
	return poll(ctx, time.Minute, func() (bool, error) {
		body, err := c.rawGet(ctx, "/readyz")
		return err == nil && string(body) == "ok", nil
	}, "kube-apiserver /readyz")
}

func (c *Cluster) rawGet(ctx context.Context, path string) ([]byte, error) {
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return nil, err
	}
	return cs.Discovery().RESTClient().Get().AbsPath(path).DoRaw(ctx)
}

// Scheme is the manager's scheme plus apiextensions (for the CRDs).
func Scheme() *runtime.Scheme {
	s := manager.NewScheme()
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	return s
}

// poll calls cond every 250 ms until it returns true, an error, or timeout.
func poll(ctx context.Context, timeout time.Duration, cond func() (bool, error), what string) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-tick.C:
		}
	}
}
