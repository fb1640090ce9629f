// Package realnode runs a real single-node Kubernetes cluster on this
// machine for the end-to-end suite on real pods (make e2e-real) and for
// `make run NODE=real`: etcd, kube-apiserver, kube-controller-manager and
// kube-scheduler (bin/), a real kubelet on containerd + runc (Debian), the
// CNI bridge plugin, kube-proxy in iptables mode and CoreDNS, with images
// built here without a container engine (internal/images) and served from a
// registry on 127.0.0.1.
//
// Nothing it runs may send a packet off the machine: the node's address is
// on lo, an unreachable route covers every cluster address, pods are not
// masqueraded and a FORWARD chain rejects their traffic to anything outside
// the pod range, CoreDNS has no forward plugin, and containerd resolves
// every registry to the local one. Stop, and the next Start after a run
// that was killed, undo everything it did to the machine.
package realnode

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
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

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ml-operator/ml-operator/internal/freeport"
	"github.com/ml-operator/ml-operator/internal/images"
)

// Options say where the binaries are and where the node keeps its state.
type Options struct {
	// RepoRoot is the module root (the pause image is built from
	// ./internal/realnode/pause there).
	RepoRoot string
	// BinDir holds etcd, kube-apiserver, kube-controller-manager,
	// kube-scheduler, kubelet, kube-proxy, coredns and registry
	// (`make node-tools`).
	BinDir string
	// Workdir keeps the node's state, certificates, kubeconfigs and logs.
	// It is removed by Stop unless KeepWorkdir.
	Workdir string
	// KeepWorkdir leaves the workdir (and its logs) after Stop.
	KeepWorkdir bool
	// CacheDir keeps built images and the registry's storage between runs
	// (images.DefaultCacheDir() when empty).
	CacheDir string
	// Log receives progress lines (io.Discard when nil).
	Log io.Writer
}

// Node is a running single-node cluster.
type Node struct {
	opts Options
	// APIServer is kube-apiserver's URL (on NodeIP).
	APIServer string
	// Kubeconfig is an admin kubeconfig (system:masters).
	Kubeconfig string
	// Config is the admin REST config.
	Config *rest.Config
	// Client talks to the API server directly (no cache).
	Client client.Client
	// Registry is the local registry's host:port on 127.0.0.1.
	Registry string
	// Images builds images (cached in CacheDir).
	Images images.Cache

	pki            *pki
	lock           *os.File
	procs          []*process
	containerd     containerdPaths
	kubelet        *process
	kubeProxy      *process
	kubeletHealthz int
	netnsBefore    map[string]bool
}

// LockFile keeps two nodes from running at once: they would share the
// node address, the cluster range, the bridge and the iptables chains.
const LockFile = "/run/ml-operator-realnode.lock"

// Binaries are the programs Start needs from BinDir.
var Binaries = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy", "coredns", "registry"}

// HostPrograms are the programs Start needs on PATH (Debian's packages,
// `make node-packages`).
var HostPrograms = []string{"containerd", "containerd-shim-runc-v2", "runc", "iptables", "conntrack", "ip"}

// Preflight reports what is missing to run a node: root, the binaries in
// binDir, the host programs and the CNI plugins.
func Preflight(binDir string) error {
	var errs []error
	if os.Geteuid() != 0 {
		errs = append(errs, errors.New("the real node needs root"))
	}
	for _, b := range Binaries {
		if _, err := os.Stat(filepath.Join(binDir, b)); err != nil {
			errs = append(errs, fmt.Errorf("%s not in %s: run `make node-tools`", b, binDir))
		}
	}
	for _, p := range HostPrograms {
		if _, err := exec.LookPath(p); err != nil {
			errs = append(errs, fmt.Errorf("%s not on PATH: run `make node-packages`", p))
		}
	}
	for _, p := range []string{"bridge", "host-local", "loopback"} {
		if _, err := os.Stat(filepath.Join(CNIBinDir, p)); err != nil {
			errs = append(errs, fmt.Errorf("CNI plugin %s not in %s: run `make node-packages`", p, CNIBinDir))
		}
	}
	return errors.Join(errs...)
}

// Start brings the node up and returns once the node is Ready and CoreDNS
// answers. On any error it undoes what it did before returning.
func Start(ctx context.Context, opts Options) (n *Node, err error) {
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	if opts.CacheDir == "" {
		opts.CacheDir = images.DefaultCacheDir()
	}
	for _, p := range []*string{&opts.RepoRoot, &opts.BinDir, &opts.Workdir, &opts.CacheDir} {
		if *p, err = filepath.Abs(*p); err != nil {
			return nil, err
		}
	}
	if err := Preflight(opts.BinDir); err != nil {
		return nil, err
	}
	n = &Node{opts: opts, Images: images.Cache{Dir: opts.CacheDir}}
	if n.lock, err = lock(); err != nil {
		return nil, err
	}
	// A run that was killed may have left its processes, mounts and rules.
	if err := Down(ctx, opts.Workdir); err != nil {
		n.unlock()
		return nil, fmt.Errorf("cleaning up after an earlier run in %s: %w", opts.Workdir, err)
	}
	if err := os.MkdirAll(opts.Workdir, 0o755); err != nil {
		n.unlock()
		return nil, err
	}
	defer func() {
		if err != nil {
			n.logf("Start failed (%v); tearing down", err)
			if serr := n.stop(context.Background(), true); serr != nil {
				err = fmt.Errorf("%w; teardown: %v", err, serr)
			}
			n = nil
		}
	}()
	n.netnsBefore = netnsNames()
	if err := writeJSON(filepath.Join(opts.Workdir, "netns-before.json"), n.netnsBefore); err != nil {
		return n, err
	}
	if err := writeJSON(filepath.Join(opts.Workdir, "host-before.json"), snapshotHost()); err != nil {
		return n, err
	}
	if err := saveTunables(filepath.Join(opts.Workdir, "tunables.json")); err != nil {
		return n, err
	}
	n.logf("Network safety: %s on lo, unreachable route %s, FORWARD chain %s", NodeIP, ClusterRange, ForwardChain)
	if err := setUpNetwork(ctx); err != nil {
		return n, err
	}
	if n.pki, err = newPKI(filepath.Join(opts.Workdir, "pki")); err != nil {
		return n, err
	}
	if err := n.startRegistry(ctx); err != nil {
		return n, err
	}
	if err := n.pushNodeImages(ctx); err != nil {
		return n, err
	}
	if err := n.startContainerd(ctx); err != nil {
		return n, err
	}
	if err := n.startControlPlane(ctx); err != nil {
		return n, err
	}
	if err := n.startKubelet(ctx); err != nil {
		return n, err
	}
	if err := poll(ctx, 2*time.Minute, "node "+NodeName+" registered", func() (bool, error) {
		err := n.Client.Get(ctx, client.ObjectKey{Name: NodeName}, &corev1.Node{})
		return err == nil, err
	}, n.kubelet); err != nil {
		return n, err
	}
	if err := n.startKubeProxy(ctx); err != nil {
		return n, err
	}
	if err := poll(ctx, 2*time.Minute, "node "+NodeName+" Ready", func() (bool, error) {
		return n.NodeReady(ctx)
	}, n.kubelet); err != nil {
		return n, err
	}
	if err := n.waitServiceAccounts(ctx); err != nil {
		return n, err
	}
	if err := n.installCoreDNS(ctx); err != nil {
		return n, err
	}
	n.logf("Node %s is Ready; kubeconfig %s", NodeName, n.Kubeconfig)
	return n, nil
}

// NodeReady reports whether the node's Ready condition is True.
func (n *Node) NodeReady(ctx context.Context) (bool, error) {
	node := &corev1.Node{}
	if err := n.Client.Get(ctx, client.ObjectKey{Name: NodeName}, node); err != nil {
		return false, err
	}
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue, fmt.Errorf("Ready=%s: %s", c.Status, c.Message)
		}
	}
	return false, errors.New("no Ready condition yet")
}

// waitServiceAccounts waits for the default service accounts that pods in
// default and kube-system need (kube-controller-manager makes them).
func (n *Node) waitServiceAccounts(ctx context.Context) error {
	for _, ns := range []string{"default", "kube-system"} {
		if err := poll(ctx, time.Minute, "service account "+ns+"/default", func() (bool, error) {
			err := n.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "default"}, &corev1.ServiceAccount{})
			return err == nil, err
		}); err != nil {
			return err
		}
	}
	return nil
}

// Workdir is the node's state directory.
func (n *Node) Workdir() string { return n.opts.Workdir }

// LogsDir holds one log per process of the node.
func (n *Node) LogsDir() string { return filepath.Join(n.opts.Workdir, "logs") }

// Stop tears the node down: pods (through CRI, so CNI takes their
// addresses back), kube-proxy, the kubelet, containerd, the control plane
// and the registry, then everything left on the machine (sweep), and the
// workdir unless KeepWorkdir.
func (n *Node) Stop(ctx context.Context) error {
	return n.stop(ctx, !n.opts.KeepWorkdir)
}

func (n *Node) stop(ctx context.Context, removeDir bool) error {
	if n == nil {
		return nil
	}
	var errs []error
	n.kubeProxy.stop(10 * time.Second)
	n.kubelet.stop(10 * time.Second)
	if n.containerd.Socket != "" {
		if err := removeAllSandboxes(ctx, n.containerd.Socket); err != nil {
			errs = append(errs, err)
		}
	}
	// The rest in reverse start order: containerd, then the control plane
	// (scheduler, controller manager, API server, etcd), then the registry.
	for i := len(n.procs) - 1; i >= 0; i-- {
		n.procs[i].stop(15 * time.Second)
	}
	if err := sweep(ctx, n.opts.Workdir, n.netnsBefore); err != nil {
		errs = append(errs, err)
	}
	n.unlock()
	if removeDir && len(errs) == 0 {
		if err := removeWorkdir(n.opts.Workdir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Down removes whatever a node that ran in workdir left behind (a run that
// was killed): processes, containers, mounts, network namespaces, cgroups,
// iptables chains, the bridge, the route, the node address and sysctls.
// The workdir itself stays (its logs tell what happened).
func Down(ctx context.Context, workdir string) error {
	before := map[string]bool{}
	_ = readJSON(filepath.Join(workdir, "netns-before.json"), &before)
	return sweep(ctx, workdir, before)
}

func (n *Node) logf(format string, args ...any) {
	fmt.Fprintf(n.opts.Log, "[realnode %s] %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// start runs bin (a name in BinDir, or an absolute path) as part name.
func (n *Node) start(name, bin string, args []string, env ...string) (*process, error) {
	if !filepath.IsAbs(bin) {
		bin = filepath.Join(n.opts.BinDir, bin)
	}
	p, err := startProcess(n.opts.Workdir, name, bin, args, env)
	if err != nil {
		return nil, err
	}
	n.procs = append(n.procs, p)
	return p, nil
}

func (n *Node) connect() error {
	cfg, err := clientcmd.BuildConfigFromFlags("", n.Kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 50, 100
	n.Config = cfg
	n.Client, err = client.New(cfg, client.Options{Scheme: Scheme()})
	return err
}

// Scheme holds the built-in Kubernetes types and CRDs.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = apiextensionsv1.AddToScheme(s)
	return s
}

// PodLog reads a pod's log through the API server, which asks the kubelet:
// the path `kubectl logs` takes.
func (n *Node) PodLog(ctx context.Context, ns, name string) (string, error) {
	cs, err := kubernetes.NewForConfig(n.Config)
	if err != nil {
		return "", err
	}
	b, err := cs.CoreV1().Pods(ns).GetLogs(name, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		return "", fmt.Errorf("logs of %s/%s: %w", ns, name, err)
	}
	if gone := string(b); strings.HasPrefix(gone, kubeletNoLog) {
		return "", fmt.Errorf("logs of %s/%s: the kubelet has none: %s", ns, name, strings.TrimSpace(gone))
	}
	return string(b), nil
}

// kubeletNoLog starts what the kubelet answers, with status 200, in place of
// a log whose container it no longer has (removed by a restart or by the
// pod's deletion).
const kubeletNoLog = "unable to retrieve container logs for "

// startContainerd writes containerd's configuration and starts it with its
// own socket, root and state under the workdir.
func (n *Node) startContainerd(ctx context.Context) error {
	cfg, paths, err := writeContainerdConfig(n.opts.Workdir, n.Registry)
	if err != nil {
		return err
	}
	n.containerd = paths
	bin, err := exec.LookPath("containerd")
	if err != nil {
		return err
	}
	n.logf("Starting containerd (%s)", paths.Socket)
	p, err := n.start("containerd", bin, []string{"--config", cfg})
	if err != nil {
		return err
	}
	return poll(ctx, time.Minute, "containerd CRI", func() (bool, error) {
		return criReady(ctx, paths.Socket)
	}, p)
}

// startRegistry starts bin/registry on a free port of 127.0.0.1 with its
// storage in the cache directory, so what earlier runs pushed is there.
func (n *Node) startRegistry(ctx context.Context) error {
	port, err := freeport.On("127.0.0.1")
	if err != nil {
		return err
	}
	n.Registry = fmt.Sprintf("127.0.0.1:%d", port)
	secret := make([]byte, 16)
	if _, err := rand.Read(secret); err != nil {
		return err
	}
	storage := filepath.Join(n.opts.CacheDir, "registry")
	if err := os.MkdirAll(storage, 0o755); err != nil {
		return err
	}
	cfg := filepath.Join(n.opts.Workdir, "registry.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`version: 0.1
log:
  level: warn
  accesslog:
    disabled: false
storage:
  filesystem:
    rootdirectory: %s
  maintenance:
    uploadpurging:
      enabled: false
http:
  addr: %s
  secret: %s
`, storage, n.Registry, hex.EncodeToString(secret))), 0o600); err != nil {
		return err
	}
	n.logf("Starting the local registry on %s (storage %s)", n.Registry, storage)
	// distribution exports OpenTelemetry traces by default (to an OTLP
	// endpoint the environment may name): off.
	p, err := n.start("registry", "registry", []string{"serve", cfg},
		"OTEL_SDK_DISABLED=true", "OTEL_TRACES_EXPORTER=none", "OTEL_METRICS_EXPORTER=none", "OTEL_LOGS_EXPORTER=none")
	if err != nil {
		return err
	}
	return poll(ctx, 30*time.Second, "registry /v2/", func() (bool, error) {
		return httpOK(ctx, "http://"+n.Registry+"/v2/")
	}, p)
}

// pushNodeImages builds and pushes the pause and CoreDNS images.
func (n *Node) pushNodeImages(ctx context.Context) error {
	n.logf("Building and pushing %s and %s", PauseImage, CoreDNSImage)
	pause := filepath.Join(n.opts.CacheDir, "bin", "pause")
	if err := images.GoBinary(ctx, n.opts.RepoRoot, "./internal/realnode/pause", pause); err != nil {
		return err
	}
	if err := n.PushImage(ctx, images.Spec{
		Ref:        PauseImage,
		Files:      []images.File{{Source: pause, Path: "/pause"}},
		Entrypoint: []string{"/pause"},
		User:       "65535:65535",
	}); err != nil {
		return err
	}
	return n.PushImage(ctx, images.Spec{
		Ref:        CoreDNSImage,
		Files:      []images.File{{Source: filepath.Join(n.opts.BinDir, "coredns"), Path: "/coredns"}},
		Entrypoint: []string{"/coredns"},
	})
}

// PushImage builds the image a spec describes (or takes it from the cache)
// and pushes it to the node's registry, where pods find it under its name.
func (n *Node) PushImage(ctx context.Context, s images.Spec) error {
	img, err := n.Images.Image(s)
	if err != nil {
		return err
	}
	return images.Push(ctx, n.Registry, s.Ref, img)
}

// GoImage builds the Go main package pkg (relative to the repository root)
// into an image named ref whose entrypoint is the binary, and pushes it.
func (n *Node) GoImage(ctx context.Context, pkg, ref string) error {
	bin := filepath.Join(n.opts.CacheDir, "bin", strings.NewReplacer("/", "_", ":", "_", ".", "_").Replace(ref))
	if err := images.GoBinary(ctx, n.opts.RepoRoot, pkg, bin); err != nil {
		return err
	}
	return n.PushImage(ctx, images.Spec{
		Ref:        ref,
		Files:      []images.File{{Source: bin, Path: "/" + filepath.Base(pkg)}},
		Entrypoint: []string{"/" + filepath.Base(pkg)},
	})
}

func lock() (*os.File, error) {
	f, err := os.OpenFile(LockFile, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("another real node is running on this machine (%s is locked): %w", LockFile, err)
	}
	return f, nil
}

func (n *Node) unlock() {
	if n.lock != nil {
		_ = syscall.Flock(int(n.lock.Fd()), syscall.LOCK_UN)
		n.lock.Close()
		n.lock = nil
	}
}

func httpOK(ctx context.Context, url string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false, err
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK, fmt.Errorf("%s: %s", url, resp.Status)
}

func writeJSON(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// TrainerRootfs is the root filesystem of the trainer image
// (images.TrainerRootfs, where `make trainer-rootfs` finds it too).
var TrainerRootfs = images.TrainerRootfs
