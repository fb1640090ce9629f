package bench

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/informers"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/ml-operator/ml-operator/internal/localcluster"
)

// The peer is Kubeflow's training-operator v1, built unmodified from the Go
// module proxy (make bench builds it: go install
// github.com/kubeflow/training-operator/cmd/training-operator.v1@<version>).
// It gets the same burst as ours, N PyTorchJobs of W ranks (a Master and
// W-1 Workers), in the same run, on the same cluster, with the same client
// QPS and burst.
const (
	// peerNamespace is where the peer looks for its webhook Secret
	// (MY_POD_NAMESPACE; "kubeflow" is its default).
	peerNamespace = "kubeflow"
	// peerSecret is the Secret its cert rotator fills with a CA and a serving
	// certificate (its --webhook-secret-name default). The rotator updates
	// it; it does not create it.
	peerSecret = "training-operator-webhook-cert"
	// peerCRD is the PyTorchJob CRD's name.
	peerCRD = "pytorchjobs.kubeflow.org"
	// peerCertDir is where the peer's rotator waits for the Secret's files
	// (a constant in its pkg/cert): in a cluster, the kubelet puts them
	// there from a Secret volume.
	peerCertDir = "/tmp/k8s-webhook-server/serving-certs"
)

// PeerConfig says where the peer is; an empty Binary skips the scenario.
type PeerConfig struct {
	// Binary is training-operator.v1, built from the module at Version.
	Binary string `json:"binary,omitempty"`
	// Version is the module version it was built from.
	Version string `json:"version,omitempty"`
	// CRD is the module's PyTorchJob CRD
	// (manifests/base/crds/kubeflow.org_pytorchjobs.yaml).
	CRD string `json:"crd,omitempty"`
}

// PeerRun is the peer's burst: Jobs PyTorchJobs of Ranks pods.
type PeerRun struct {
	Version string `json:"version"`
	// PodsSeconds: from the first create to every pod seen.
	PodsSeconds float64 `json:"podsSeconds"`
	// RunningSeconds: from the first create to every pod Running.
	RunningSeconds float64 `json:"runningSeconds"`
	PodsPerSecond  float64 `json:"podsPerSecond"`
	// Services are the Services it created for the burst (one per pod).
	Services int `json:"services"`
	// Memory is the peer's, read from /proc with every pod Running.
	Memory Memory `json:"memory"`
}

// peer starts the peer, runs the burst against it and stops it. It runs
// after every other scenario: its PyTorchJobs, pods and Services stay until
// the cluster is deleted.
func (r *run) peer(ctx context.Context) (*PeerRun, error) {
	pc := r.cfg.Peer
	if err := r.env.kubectlRun("apply", "--server-side", "-f", pc.CRD); err != nil {
		return nil, err
	}
	if err := r.env.Cluster.WaitEstablished(ctx, peerCRD); err != nil {
		return nil, err
	}
	if err := r.newNamespace(ctx, peerNamespace); err != nil {
		return nil, err
	}
	err := r.env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: peerSecret, Namespace: peerNamespace}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	ns := "peer"
	if err := r.newNamespace(ctx, ns); err != nil {
		return nil, err
	}
	proc, err := r.startPeer(ctx)
	if err != nil {
		return nil, err
	}
	defer proc.stop()

	total := r.cfg.Jobs * r.cfg.Ranks
	watch, err := watchPods(ctx, r.env, ns)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	err = parallel(ctx, r.cfg.Jobs, 32, func(i int) error {
		return r.env.Client.Create(ctx, r.peerJob(ns, fmt.Sprintf("peer-%d", i)))
	})
	if err != nil {
		return nil, err
	}
	timeout := 5*time.Minute + time.Duration(total)*250*time.Millisecond
	podsAt, err := waitUntil(ctx, timeout, "every peer pod", func() bool { seen, _ := watch.counts(); return seen >= total })
	if err != nil {
		return nil, fmt.Errorf("%w (peer log: %s)", err, proc.log)
	}
	runningAt, err := waitUntil(ctx, timeout, "every peer pod Running", func() bool { _, running := watch.counts(); return running >= total })
	if err != nil {
		return nil, fmt.Errorf("%w (peer log: %s)", err, proc.log)
	}
	out := &PeerRun{Version: pc.Version, PodsSeconds: podsAt.Sub(start).Seconds(), RunningSeconds: runningAt.Sub(start).Seconds()}
	out.PodsPerSecond = float64(total) / out.PodsSeconds
	status, err := readStatus(proc.cmd.Process.Pid)
	if err != nil {
		return nil, err
	}
	out.Memory = Memory{RSSBytes: status["VmRSS"], RSSAnonBytes: status["RssAnon"], RSSFileBytes: status["RssFile"]}
	svcs, err := r.env.Kube.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out.Services = len(svcs.Items)
	r.logf("peer %s: %d PyTorchJobs x %d ranks: pods in %.2fs (%.1f pods/s), all Running in %.2fs, %d Services",
		pc.Version, r.cfg.Jobs, r.cfg.Ranks, out.PodsSeconds, out.PodsPerSecond, out.RunningSeconds, out.Services)
	return out, nil
}

// peerJob is a PyTorchJob shaped like the burst's TrainingJobs: W ranks
// (a Master and W-1 Workers) of the same image, requests and toleration,
// kept running by the same kwok annotation.
func (r *run) peerJob(ns, name string) *unstructured.Unstructured {
	template := func() map[string]any {
		container := map[string]any{"name": "pytorch", "image": workerImage}
		spec := map[string]any{"containers": []any{container}}
		if g := r.cfg.GPUsPerWorker; g > 0 {
			container["resources"] = map[string]any{"limits": map[string]any{string(localcluster.GPUResource): strconv.Itoa(g)}}
			spec["tolerations"] = []any{map[string]any{"key": localcluster.GPUTaintKey, "operator": "Exists", "effect": "NoSchedule"}}
		}
		return map[string]any{
			"metadata": map[string]any{"annotations": map[string]any{"sim.ml.example.com/complete-after": "1h"}},
			"spec":     spec,
		}
	}
	specs := map[string]any{
		"Master": map[string]any{"replicas": int64(1), "restartPolicy": "OnFailure", "template": template()},
	}
	if w := r.cfg.Ranks - 1; w > 0 {
		specs["Worker"] = map[string]any{"replicas": int64(w), "restartPolicy": "OnFailure", "template": template()}
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubeflow.org/v1",
		"kind":       "PyTorchJob",
		"metadata":   map[string]any{"name": name, "namespace": ns},
		"spec":       map[string]any{"pytorchReplicaSpecs": specs},
	}}
	return u
}

// peerProcess is the running peer.
type peerProcess struct {
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

func (p *peerProcess) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// startPeer runs the peer as its release runs it, with the flags a local
// run needs: the cluster's kubeconfig, loopback addresses for its metrics
// and probes, a free port for its webhook server, only the PyTorchJob
// controller, and our QPS and burst. It is ready when its /readyz answers
// (its certificates are written and its webhook server listens).
func (r *run) startPeer(ctx context.Context) (*peerProcess, error) {
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	probe := fmt.Sprintf("127.0.0.1:%d", ports[1])
	logPath := filepath.Join(r.env.workdir, "peer.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(r.cfg.Peer.Binary,
		"--enable-scheme=pytorchjob",
		fmt.Sprintf("--kube-api-qps=%d", int(r.cfg.QPS)),
		fmt.Sprintf("--kube-api-burst=%d", r.cfg.Burst),
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", ports[0]),
		"--health-probe-bind-address="+probe,
		fmt.Sprintf("--webhook-server-port=%d", ports[2]),
	)
	cmd.Env = append(r.env.Cluster.KubectlEnv(), "MY_POD_NAMESPACE="+peerNamespace)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Killed with the benchmark, whatever ends it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting the peer %s: %w", r.cfg.Peer.Binary, err)
	}
	p := &peerProcess{cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	fmt.Fprintf(r.log, "Started the peer %s (pid %d, QPS %g, burst %d; log %s)\n", r.cfg.Peer.Version, cmd.Process.Pid, r.cfg.QPS, r.cfg.Burst, logPath)
	if err := r.mountPeerSecret(ctx); err != nil {
		p.stop()
		return nil, fmt.Errorf("%w (peer log: %s)", err, logPath)
	}
	_, err = waitUntil(ctx, 5*time.Minute, "the peer ready", func() bool {
		select {
		case <-p.done:
			return true
		default:
		}
		resp, err := http.Get("http://" + probe + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	select {
	case <-p.done:
		return nil, fmt.Errorf("the peer exited (log: %s)", logPath)
	default:
	}
	if err != nil {
		p.stop()
		return nil, fmt.Errorf("%w (peer log: %s)", err, logPath)
	}
	return p, nil
}

// mountPeerSecret plays the kubelet's Secret volume for the peer: once its
// rotator has filled the Secret with a CA and a serving certificate, their
// files are written where the rotator and the webhook server read them.
// Without them the peer never starts its controllers.
func (r *run) mountPeerSecret(ctx context.Context) error {
	var data map[string][]byte
	if _, err := waitUntil(ctx, 3*time.Minute, "the peer's certificates in its Secret", func() bool {
		sec, err := r.env.Kube.CoreV1().Secrets(peerNamespace).Get(ctx, peerSecret, metav1.GetOptions{})
		if err != nil {
			return false
		}
		data = sec.Data
		return len(data["ca.crt"]) > 0 && len(data["tls.crt"]) > 0 && len(data["tls.key"]) > 0
	}); err != nil {
		return err
	}
	if err := os.MkdirAll(peerCertDir, 0o700); err != nil {
		return err
	}
	for _, name := range []string{"ca.crt", "tls.crt", "tls.key"} {
		if err := os.WriteFile(filepath.Join(peerCertDir, name), data[name], 0o600); err != nil {
			return err
		}
	}
	return nil
}

// freePorts returns n ports free on 127.0.0.1 now.
func freePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// podWatch counts the pods of one namespace through a watch, as the
// tracker does for ours: seen and Running.
type podWatch struct {
	mu      sync.Mutex
	seen    map[string]bool
	running map[string]bool
}

func (w *podWatch) counts() (seen, running int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.seen), len(w.running)
}

func (w *podWatch) set(o any) {
	p, ok := o.(*corev1.Pod)
	if !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen[p.Name] = true
	if p.Status.Phase == corev1.PodRunning {
		w.running[p.Name] = true
	}
}

func watchPods(ctx context.Context, env *Env, ns string) (*podWatch, error) {
	w := &podWatch{seen: map[string]bool{}, running: map[string]bool{}}
	f := informers.NewSharedInformerFactoryWithOptions(env.Kube, 0, informers.WithNamespace(ns))
	inf := f.Core().V1().Pods().Informer()
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: w.set, UpdateFunc: func(_, o any) { w.set(o) },
	}); err != nil {
		return nil, err
	}
	f.Start(ctx.Done())
	if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return nil, fmt.Errorf("the peer's pod watch did not sync")
	}
	return w, nil
}
