package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/internal/localcluster"
)

// Config is what to measure.
type Config struct {
	// Jobs and Ranks shape the burst: Jobs TrainingJobs of Ranks ranks each.
	Jobs, Ranks int
	// Repeats is how many times each scenario runs.
	Repeats int
	// GPUsPerWorker is each worker's nvidia.com/gpu request.
	GPUsPerWorker int
	// QPS and Burst are the manager's client limits, and the baseline's.
	QPS   float64
	Burst int
	// LatencySamples is how many samples each latency measurement takes per repeat.
	LatencySamples int
	// CostJobs is how many jobs the API cost is averaged over.
	CostJobs int
	// MemoryPods are the worker-pod counts the manager's memory is read at.
	MemoryPods []int
	// SteadyPods, SteadyDuration and SteadyInterval shape the steady run:
	// once the memory scenario has grown to SteadyPods worker pods it holds
	// them for SteadyDuration and reads the manager's memory every
	// SteadyInterval, before it grows to the next level (a SteadyDuration
	// of 0: no steady run).
	SteadyPods     int
	SteadyDuration time.Duration
	SteadyInterval time.Duration
	// ProfileDir, when set, receives the manager's heap profile at each
	// memory level and at the steady run's end (heap-<pods>.pb.gz,
	// heap-<pods>-steady-end.pb.gz); the Env must serve the profiler.
	ProfileDir string
	// RestartRanks are the gang sizes the restart time is measured at.
	RestartRanks []int
	// GangRanks are the gang sizes the bind time is measured at, native
	// against plain pods (the gang scenario; empty: not run).
	GangRanks []int
	// Skip names scenarios not to run (burst, latency, cost, memory,
	// restart, gang, peer; rollout is cmd/bench's, on a cluster of its own).
	Skip map[string]bool
	// Peer is Kubeflow's training-operator, for the same burst (peer.go);
	// an empty Binary skips it.
	Peer PeerConfig
	// Checkpoint, when set, is called with the result so far after each
	// memory level and each steady-run sample, so a long run that is
	// stopped keeps what it measured.
	Checkpoint func(*Result) `json:"-"`
}

// Pods is the most worker pods any scenario holds at once, with room for
// the latency jobs.
func (c Config) Pods() int {
	n := c.Jobs * c.Ranks
	for _, m := range c.MemoryPods {
		n = max(n, m)
	}
	if c.SteadyDuration > 0 {
		n = max(n, c.SteadyPods)
	}
	for _, r := range c.RestartRanks {
		n = max(n, r)
	}
	for _, r := range c.GangRanks {
		n = max(n, r)
	}
	return n + c.LatencySamples*(c.Ranks+1) + 16
}

// workerImage is never pulled: kwok plays the kubelet.
const workerImage = "example.com/trainer:bench"

// The backoff before a failed gang's first restart (controllers/trainingjob
// DefaultBackoffBase; the manager has no flag for it).
const firstRestartBackoff = 10 * time.Second

// run holds what one benchmark run shares.
type run struct {
	env     *Env
	cfg     Config
	tracker *Tracker
	log     io.Writer
	// patchCalls are the durations of patchJob's API calls, in milliseconds.
	patchCalls []float64
}

// Run measures every scenario not skipped on a running Env.
func Run(ctx context.Context, env *Env, cfg Config, log io.Writer) (*Result, error) {
	tracker, err := StartTracker(ctx, env.Cluster.Config)
	if err != nil {
		return nil, err
	}
	r := &run{env: env, cfg: cfg, tracker: tracker, log: log}
	res := &Result{Config: cfg, Started: time.Now().UTC()}
	res.Machine = describeMachine()
	res.Nodes = len(env.Nodes)
	res.Webhooks, res.NoopWebhooks = env.Webhooks, env.NoopWebhooks

	before, err := env.APIServerMetrics(ctx)
	if err != nil {
		return nil, err
	}
	if !cfg.Skip["cost"] {
		err := r.measured(ctx, res, "cost", func() (err error) { res.Cost, err = r.cost(ctx); return err })
		if err != nil {
			return res, fmt.Errorf("API cost: %w", err)
		}
	}
	if !cfg.Skip["memory"] {
		err := r.measured(ctx, res, "memory", func() error { return r.memory(ctx, res) })
		if err != nil {
			return res, fmt.Errorf("memory: %w", err)
		}
	}
	if !cfg.Skip["restart"] {
		err := r.measured(ctx, res, "restart", func() (err error) { res.Restart, err = r.restart(ctx); return err })
		if err != nil {
			return res, fmt.Errorf("restart: %w", err)
		}
	}
	if !cfg.Skip["gang"] && len(cfg.GangRanks) > 0 {
		err := r.measured(ctx, res, "gang", func() (err error) { res.GangBind, err = r.gangBind(ctx); return err })
		if err != nil {
			return res, fmt.Errorf("gang bind: %w", err)
		}
	}
	if !cfg.Skip["burst"] {
		if err := r.burst(ctx, res); err != nil {
			return res, fmt.Errorf("burst: %w", err)
		}
	}
	if !cfg.Skip["peer"] && cfg.Peer.Binary != "" {
		err := r.measured(ctx, res, "peer burst", func() (err error) { res.Peer, err = r.peer(ctx); return err })
		if err != nil {
			return res, fmt.Errorf("peer: %w", err)
		}
	}
	after, err := env.APIServerMetrics(ctx)
	if err != nil {
		return res, err
	}
	res.Webhook = webhookLatency(after, before, ours)
	res.NoopWebhook = webhookLatency(after, before, noops)
	res.WebhookByName = map[string]WebhookLatency{}
	for _, name := range append(slices.Clone(env.Webhooks), env.NoopWebhooks...) {
		res.WebhookByName[name] = webhookLatency(after, before, func(m *dto.Metric) bool { return label(m, "name") == name })
	}
	res.Finished = time.Now().UTC()
	return res, nil
}

// measured runs one scenario and records its Phase.
func (r *run) measured(ctx context.Context, res *Result, name string, scenario func() error) error {
	before, err := r.env.snapshot(ctx)
	if err != nil {
		return err
	}
	if err := scenario(); err != nil {
		return err
	}
	after, err := r.env.snapshot(ctx)
	if err != nil {
		return err
	}
	res.Phases = append(res.Phases, phase(name, before, after))
	return nil
}

// newNamespace creates ns and waits for its default ServiceAccount.
func (r *run) newNamespace(ctx context.Context, ns string) error {
	err := r.env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return r.env.Cluster.WaitServiceAccount(ctx, ns, 3*time.Minute)
}

// job builds a TrainingJob of ranks ranks without checkpoint storage.
func (r *run) job(ns, name string, ranks int, annotations map[string]string) *mlv1.TrainingJob {
	ann := map[string]string{"sim.ml.example.com/complete-after": "1h"}
	for k, v := range annotations {
		ann[k] = v
	}
	return &mlv1.TrainingJob{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: mlv1.TrainingJobSpec{
			Image:         workerImage,
			NumWorkers:    int32(ranks),
			GPUsPerWorker: ptr.To(int32(r.cfg.GPUsPerWorker)),
			Checkpoint:    mlv1.CheckpointSpec{Enabled: ptr.To(false)},
			Template:      mlv1.WorkerTemplate{Annotations: ann},
		},
	}
}

// createJobs creates count jobs <prefix>-<i> at once (32 in flight, through
// the benchmark's own generous rate limit). A create the API server fails
// (on a loaded machine, an admission call that timed out) is tried again,
// up to 5 times; one that already went through counts as done.
func (r *run) createJobs(ctx context.Context, ns, prefix string, from, to, ranks int, ann map[string]string) error {
	return parallel(ctx, to-from, 32, func(i int) error {
		return retrying(ctx, func() error {
			err := r.env.Client.Create(ctx, r.job(ns, fmt.Sprintf("%s-%d", prefix, from+i), ranks, ann))
			if apierrors.IsAlreadyExists(err) {
				return nil
			}
			return err
		})
	})
}

// cleanup deletes every TrainingJob and worker pod in ns and waits until
// the tracker has seen them go. Pods are deleted in one collection request:
// waiting for the garbage collector (kube-controller-manager at 20 QPS)
// would take minutes at thousands of pods.
func (r *run) cleanup(ctx context.Context, ns string) error {
	c := r.env.Client
	if err := retrying(ctx, func() error {
		return c.DeleteAllOf(ctx, &mlv1.TrainingJob{}, client.InNamespace(ns), client.PropagationPolicy(metav1.DeletePropagationBackground))
	}); err != nil {
		return err
	}
	if _, err := waitUntil(ctx, 5*time.Minute, "TrainingJobs in "+ns+" gone", func() bool {
		all, _ := r.tracker.Jobs(ns, "")
		return all == 0
	}); err != nil {
		return err
	}
	if err := retrying(ctx, func() error {
		return c.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns), client.GracePeriodSeconds(0))
	}); err != nil {
		return err
	}
	if _, err := waitUntil(ctx, 5*time.Minute, "worker pods in "+ns+" gone", func() bool { return r.tracker.Pods(ns) == 0 }); err != nil {
		return err
	}
	// The garbage collector deletes the Services and ConfigMaps, and
	// kube-controller-manager the endpoints after them: wait, so the next
	// scenario (the API cost above all) does not count that work.
	managed := client.MatchingLabels{mlv1.LabelManagedBy: mlv1.ManagedByValue}
	_, err := waitUntil(ctx, 5*time.Minute, "Services, ConfigMaps and EndpointSlices in "+ns+" gone", func() bool {
		for _, l := range []client.ObjectList{&corev1.ServiceList{}, &corev1.ConfigMapList{}} {
			if err := c.List(ctx, l, client.InNamespace(ns), managed, client.Limit(1)); err != nil || meta.LenList(l) > 0 {
				return false
			}
		}
		es := &discoveryv1.EndpointSliceList{}
		return c.List(ctx, es, client.InNamespace(ns), client.Limit(1)) == nil && len(es.Items) == 0
	})
	return err
}

func (r *run) logf(format string, args ...any) {
	fmt.Fprintf(r.log, "%s  "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

// burst runs the plain-client baseline and the TrainingJob burst Repeats
// times each, alternating, then measures latency on the loaded cluster
// after the last burst.
func (r *run) burst(ctx context.Context, res *Result) error {
	total := r.cfg.Jobs * r.cfg.Ranks
	timeout := 5*time.Minute + time.Duration(total)*100*time.Millisecond
	for rep := range r.cfg.Repeats {
		base, err := r.baseline(ctx, fmt.Sprintf("baseline-%d", rep), total)
		if err != nil {
			return fmt.Errorf("baseline: %w", err)
		}
		res.Baseline = append(res.Baseline, base)
		r.logf("baseline %d: %d pods in %.2fs (%.1f pods/s)", rep, total, base.Seconds, base.PodsPerSecond)

		ns := fmt.Sprintf("burst-%d", rep)
		if err := r.newNamespace(ctx, ns); err != nil {
			return err
		}
		mgrBefore, err := r.env.ManagerMetrics(ctx)
		if err != nil {
			return err
		}
		snapBefore, err := r.env.snapshot(ctx)
		if err != nil {
			return err
		}
		start := time.Now()
		if err := r.createJobs(ctx, ns, "job", 0, r.cfg.Jobs, r.cfg.Ranks, nil); err != nil {
			return err
		}
		jobsCreated := time.Since(start)
		podsAt, err := waitUntil(ctx, timeout, "every burst pod", func() bool { return r.tracker.Pods(ns) >= total })
		if err != nil {
			return err
		}
		runningAt, err := waitUntil(ctx, timeout, "every burst job Running", func() bool {
			_, running := r.tracker.Jobs(ns, mlv1.StateRunning)
			return running == r.cfg.Jobs
		})
		if err != nil {
			return err
		}
		b := BurstRun{
			JobsCreatedSeconds: jobsCreated.Seconds(),
			PodsSeconds:        podsAt.Sub(start).Seconds(),
			RunningSeconds:     runningAt.Sub(start).Seconds(),
		}
		b.PodsPerSecond = float64(total) / b.PodsSeconds
		mgrAfter, err := r.env.ManagerMetrics(ctx)
		if err != nil {
			return err
		}
		snapAfter, err := r.env.snapshot(ctx)
		if err != nil {
			return err
		}
		res.Phases = append(res.Phases, phase(fmt.Sprintf("burst-%d (create -> all Running)", rep), snapBefore, snapAfter))
		b.ManagerRequests = map[string]float64{}
		prev := clientRequests(mgrBefore)
		for k, v := range clientRequests(mgrAfter) {
			if d := v - prev[k]; d > 0 {
				b.ManagerRequests[k] = d
			}
		}
		res.Burst = append(res.Burst, b)
		r.logf("burst %d: %d jobs x %d ranks: pods in %.2fs (%.1f pods/s), all Running in %.2fs",
			rep, r.cfg.Jobs, r.cfg.Ranks, b.PodsSeconds, b.PodsPerSecond, b.RunningSeconds)

		if rep == r.cfg.Repeats-1 && !r.cfg.Skip["latency"] {
			err := r.measured(ctx, res, "latency (cluster loaded)", func() (err error) { res.Latency, err = r.latency(ctx); return err })
			if err != nil {
				return fmt.Errorf("latency: %w", err)
			}
		}
		if err := r.cleanup(ctx, ns); err != nil {
			return err
		}
	}
	return nil
}

// baseline creates pods plain pods through a client with the manager's
// QPS and burst, 64 requests in flight, and times it.
func (r *run) baseline(ctx context.Context, ns string, pods int) (BaselineRun, error) {
	if err := r.newNamespace(ctx, ns); err != nil {
		return BaselineRun{}, err
	}
	cfg := rest.CopyConfig(r.env.Cluster.Config)
	cfg.QPS, cfg.Burst = float32(r.cfg.QPS), r.cfg.Burst
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return BaselineRun{}, err
	}
	start := time.Now()
	err = parallel(ctx, pods, 64, func(i int) error {
		_, err := cs.CoreV1().Pods(ns).Create(ctx, r.baselinePod(i), metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return BaselineRun{}, err
	}
	d := time.Since(start)
	if err := retrying(ctx, func() error {
		return r.env.Kube.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}, metav1.ListOptions{})
	}); err != nil {
		return BaselineRun{}, err
	}
	if _, err := waitUntil(ctx, 5*time.Minute, "baseline pods gone", func() bool {
		l, err := r.env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil && len(l.Items) == 0
	}); err != nil {
		return BaselineRun{}, err
	}
	return BaselineRun{Seconds: d.Seconds(), PodsPerSecond: float64(pods) / d.Seconds()}, nil
}

// baselinePod is shaped like a worker pod (same requests, same toleration)
// so the scheduler and kwok do the same work for it.
func (r *run) baselinePod(i int) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("plain-%d", i), Labels: map[string]string{"bench": "baseline"}},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "worker", Image: workerImage}},
		},
	}
	if g := r.cfg.GPUsPerWorker; g > 0 {
		q := *resource.NewQuantity(int64(g), resource.DecimalSI)
		p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{localcluster.GPUResource: q}
		p.Spec.Tolerations = []corev1.Toleration{{Key: localcluster.GPUTaintKey, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	}
	return p
}

// latency measures, with the burst's jobs still running: create -> every
// rank's pod exists for one more job; suspend -> the pods are gone; resume
// -> they are back; numWorkers +1 -> the re-formed gang's pods exist; a
// ModelDeployment's weights -> its HTTPRoute carries them.
func (r *run) latency(ctx context.Context) (*Latency, error) {
	ns := "latency"
	if err := r.newNamespace(ctx, ns); err != nil {
		return nil, err
	}
	lat := &Latency{}
	w := r.cfg.Ranks
	for i := range r.cfg.LatencySamples {
		name := fmt.Sprintf("lat-%d", i)
		start := time.Now()
		if err := r.env.Client.Create(ctx, r.job(ns, name, w, nil)); err != nil {
			return nil, err
		}
		at, err := waitUntil(ctx, time.Minute, name+"'s pods", func() bool {
			n, _ := r.tracker.GangPods(ns, name, 0)
			return n == w
		})
		if err != nil {
			return nil, err
		}
		lat.CreateToPods = append(lat.CreateToPods, ms(at.Sub(start)))
	}
	for i := range r.cfg.LatencySamples {
		name := fmt.Sprintf("lat-%d", i)
		if _, err := waitUntil(ctx, 2*time.Minute, name+" Running", func() bool {
			return r.tracker.JobState(ns, name) == mlv1.StateRunning
		}); err != nil {
			return nil, err
		}
		d, err := r.patchJob(ctx, ns, name, func(j *mlv1.TrainingJob) { j.Spec.Suspend = ptr.To(true) }, func() bool {
			n, _ := r.tracker.JobPods(ns, name)
			return n == 0
		})
		if err != nil {
			return nil, err
		}
		lat.Suspend = append(lat.Suspend, d)
		d, err = r.patchJob(ctx, ns, name, func(j *mlv1.TrainingJob) { j.Spec.Suspend = ptr.To(false) }, func() bool {
			n, _ := r.tracker.JobPods(ns, name)
			return n == w
		})
		if err != nil {
			return nil, err
		}
		lat.Resume = append(lat.Resume, d)
		// A job that is not Running yet may grow its gang in place; a
		// Running one re-forms it as a new attempt. Either way the change
		// has landed when the latest attempt has every rank and no other
		// attempt is left.
		d, err = r.patchJob(ctx, ns, name, func(j *mlv1.TrainingJob) { j.Spec.NumWorkers = int32(w + 1) }, func() bool {
			n, attempt := r.tracker.JobPods(ns, name)
			gang, _ := r.tracker.GangPods(ns, name, attempt)
			return n == w+1 && gang == w+1
		})
		if err != nil {
			return nil, err
		}
		lat.NumWorkers = append(lat.NumWorkers, d)
	}
	lat.PatchCalls, r.patchCalls = r.patchCalls, nil
	r.logf("latency: %d samples each of create, suspend, resume and numWorkers", r.cfg.LatencySamples)
	if err := r.weights(ctx, ns, lat); err != nil {
		return nil, err
	}
	return lat, r.cleanup(ctx, ns)
}

// patchJob applies change as a merge patch and returns how long until done
// holds, in milliseconds.
func (r *run) patchJob(ctx context.Context, ns, name string, change func(*mlv1.TrainingJob), done func() bool) (float64, error) {
	j := &mlv1.TrainingJob{}
	if err := r.env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, j); err != nil {
		return 0, err
	}
	base := j.DeepCopy()
	change(j)
	start := time.Now()
	if err := r.env.Client.Patch(ctx, j, client.MergeFrom(base)); err != nil {
		return 0, err
	}
	r.patchCalls = append(r.patchCalls, ms(time.Since(start)))
	at, err := waitUntil(ctx, time.Minute, "the change to "+name+" to reach its pods", done)
	if err != nil {
		n, attempt := r.tracker.JobPods(ns, name)
		return 0, fmt.Errorf("%w (spec %+v; seen: %d pods, latest attempt %d, state %q)",
			err, j.Spec, n, attempt, r.tracker.JobState(ns, name))
	}
	return ms(at.Sub(start)), nil
}

var httpRouteGVK = schema.GroupVersionKind{Group: "gateway.networking.k8s.io", Version: "v1", Kind: "HTTPRoute"}

// routeWeights reads the HTTPRoute's backendRef weights by Service name.
func (r *run) routeWeights(ctx context.Context, ns, name string) map[string]int64 {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(httpRouteGVK)
	if err := r.env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, u); err != nil {
		return nil
	}
	rules, _, _ := unstructured.NestedSlice(u.Object, "spec", "rules")
	out := map[string]int64{}
	for _, rule := range rules {
		refs, _, _ := unstructured.NestedSlice(rule.(map[string]any), "backendRefs")
		for _, ref := range refs {
			m := ref.(map[string]any)
			n, _, _ := unstructured.NestedString(m, "name")
			w, _, _ := unstructured.NestedInt64(m, "weight")
			out[n] = w
		}
	}
	return out
}

// weights measures a ModelDeployment weight change -> HTTPRoute updated,
// reading the route every 20 ms.
func (r *run) weights(ctx context.Context, ns string, lat *Latency) error {
	name := "lat-md"
	md := &mlv1.ModelDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: mlv1.ModelDeploymentSpec{
			ModelName: name,
			Framework: mlv1.ModelFrameworkPyTorch,
			Image:     "example.com/server:bench",
			Versions: []mlv1.ModelVersion{
				{Name: "a", Weight: ptr.To[int32](50), ModelPath: "s3://models/a"},
				{Name: "b", Weight: ptr.To[int32](50), ModelPath: "s3://models/b"},
			},
			Scaling: mlv1.ScalingSpec{MinReplicas: 1, MaxReplicas: ptr.To[int32](1)},
			Traffic: mlv1.TrafficSpec{Router: mlv1.RouterGatewayAPI},
		},
	}
	if err := r.env.Client.Create(ctx, md); err != nil {
		return err
	}
	want := func(a, b int64) func() bool {
		return func() bool {
			w := r.routeWeights(ctx, ns, name)
			return w[name+"-a"] == a && w[name+"-b"] == b
		}
	}
	if _, err := waitUntil(ctx, 3*time.Minute, "HTTPRoute "+name+" at 50/50", want(50, 50)); err != nil {
		return err
	}
	for i := range r.cfg.LatencySamples {
		a := int32(70)
		if i%2 == 1 {
			a = 30
		}
		start, err := r.setWeights(ctx, md, a)
		if err != nil {
			return err
		}
		at, err := waitUntil(ctx, time.Minute, "HTTPRoute weights", want(int64(a), int64(100-a)))
		if err != nil {
			return err
		}
		lat.Weights = append(lat.Weights, ms(at.Sub(start)))
	}
	r.logf("latency: %d ModelDeployment weight changes", r.cfg.LatencySamples)
	return r.env.Client.Delete(ctx, md)
}

// setWeights patches md's two versions to a and 100-a percent and returns
// when the patch was sent (the latency and rollout scenarios time from it).
func (r *run) setWeights(ctx context.Context, md *mlv1.ModelDeployment, a int32) (time.Time, error) {
	cur := &mlv1.ModelDeployment{}
	if err := r.env.Client.Get(ctx, client.ObjectKeyFromObject(md), cur); err != nil {
		return time.Time{}, err
	}
	base := cur.DeepCopy()
	cur.Spec.Versions[0].Weight, cur.Spec.Versions[1].Weight = ptr.To(a), ptr.To(100-a)
	start := time.Now()
	return start, r.env.Client.Patch(ctx, cur, client.MergeFrom(base))
}

// cost runs CostJobs short jobs (workers exit 0 after 5 s) on a quiet
// cluster and divides the apiserver's request counts over their lifecycle.
func (r *run) cost(ctx context.Context) (*Cost, error) {
	ns := "cost"
	if err := r.newNamespace(ctx, ns); err != nil {
		return nil, err
	}
	n, w := r.cfg.CostJobs, r.cfg.Ranks
	before, err := r.env.APIServerMetrics(ctx)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	if err := r.createJobs(ctx, ns, "cost", 0, n, w, map[string]string{"sim.ml.example.com/complete-after": "5s"}); err != nil {
		return nil, err
	}
	if _, err := waitUntil(ctx, 5*time.Minute, "every cost job Completed", func() bool {
		_, done := r.tracker.Jobs(ns, mlv1.StateCompleted)
		return done == n
	}); err != nil {
		return nil, err
	}
	// Let the last status writes and events land.
	time.Sleep(3 * time.Second)
	after, err := r.env.APIServerMetrics(ctx)
	if err != nil {
		return nil, err
	}
	window := time.Since(start)
	c := &Cost{Jobs: n, Ranks: w, WindowSeconds: window.Seconds()}
	b, a := requestCounts(before), requestCounts(after)
	var operatorWrites float64
	for k, v := range a {
		d := v - b[k]
		if d <= 0 {
			continue
		}
		row := CostRow{RequestKey: k, PerJob: d / float64(n), Source: sourceOf(k)}
		c.Rows = append(c.Rows, row)
		if row.Source == "operator" && isWrite(k.Verb) {
			operatorWrites += d
		}
	}
	sort.Slice(c.Rows, func(i, j int) bool {
		if c.Rows[i].PerJob != c.Rows[j].PerJob {
			return c.Rows[i].PerJob > c.Rows[j].PerJob
		}
		return c.Rows[i].String() < c.Rows[j].String()
	})
	c.OperatorWritesPerPod = operatorWrites / float64(n*w)
	// The request counter cannot tell whose events these are; the events can.
	evs := &eventsv1.EventList{}
	if err := r.env.Client.List(ctx, evs, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	c.EventsPerJob = map[string]float64{}
	var operatorEvents float64
	for _, e := range evs.Items {
		src := e.ReportingController
		if src == "" {
			src = e.DeprecatedSource.Component
		}
		count := float64(max(e.DeprecatedCount, 1))
		if e.Series != nil {
			count = float64(max(e.Series.Count, 1))
		}
		c.EventsPerJob[src+" "+e.Reason] += count / float64(n)
		if strings.Contains(src, "ml-operator") || strings.Contains(src, "trainingjob") {
			operatorEvents += count
		}
	}
	c.OperatorWritesPerPod = (operatorWrites + operatorEvents) / float64(n*w)
	r.logf("API cost: %d jobs x %d ranks, %.2f operator writes per pod", n, w, c.OperatorWritesPerPod)
	return c, r.cleanup(ctx, ns)
}

func isWrite(verb string) bool {
	return slices.Contains([]string{"POST", "PUT", "PATCH", "DELETE", "APPLY", "DELETECOLLECTION"}, verb)
}

// sourceOf says who, on this cluster, makes a kind of request. The
// apiserver's counter has no client label, so this is by resource: pods'
// binding is the scheduler's, pods' status kwok's (the kubelet's), nodes and
// leases are heartbeats, events.k8s.io events are the scheduler's, a create
// of a TrainingJob is the benchmark's (the user's). Everything else on the
// operator's resources is the operator's.
func sourceOf(k RequestKey) string {
	switch {
	case k.Resource == "pods" && k.Subresource == "binding":
		return "scheduler"
	case k.Resource == "pods" && k.Subresource == "status":
		return "kwok (kubelet)"
	case k.Resource == "nodes" || k.Resource == "leases":
		return "heartbeat"
	case k.Resource == "events":
		return "events (see by source)"
	case k.Resource == "persistentvolumeclaims" && k.Verb == "LIST":
		return "harness (volume provisioner)"
	case k.Resource == "endpoints" || k.Resource == "endpointslices":
		return "kube-controller-manager"
	case k.Resource == "trainingjobs" && k.Subresource == "" && k.Verb == "POST":
		return "user (benchmark)"
	case slices.Contains([]string{"pods", "services", "configmaps", "trainingjobs", "persistentvolumeclaims"}, k.Resource) && isWrite(k.Verb):
		return "operator"
	}
	return "other"
}

// memory reads the manager's memory at each worker-pod level, growing one
// namespace of running jobs, and holds the steady run at cfg.SteadyPods on
// the way up. Each level and steady sample is added to res as it is read.
func (r *run) memory(ctx context.Context, res *Result) error {
	ns := "memory"
	if err := r.newNamespace(ctx, ns); err != nil {
		return err
	}
	levels := slices.Clone(r.cfg.MemoryPods)
	steady := r.cfg.SteadyDuration > 0
	if steady && !slices.Contains(levels, r.cfg.SteadyPods) {
		levels = append(levels, r.cfg.SteadyPods)
	}
	sort.Ints(levels)
	made := 0
	for _, pods := range levels {
		jobs := (pods + r.cfg.Ranks - 1) / r.cfg.Ranks
		if err := r.createJobs(ctx, ns, "mem", made, jobs, r.cfg.Ranks, nil); err != nil {
			return err
		}
		// A loaded machine's simulated cluster starts a pod or two a
		// second (1 to 2 at load 24, niced): give each level time in
		// proportion to what it adds. A bound on the wait, not a measure.
		timeout := 10*time.Minute + time.Duration(max(jobs-made, 0)*r.cfg.Ranks)*time.Second
		made = max(made, jobs)
		if _, err := waitUntil(ctx, timeout, fmt.Sprintf("%d jobs Running", made), func() bool {
			_, running := r.tracker.Jobs(ns, mlv1.StateRunning)
			return running == made
		}); err != nil {
			return err
		}
		// Settle: the last status writes and the informers' catch-up.
		time.Sleep(5 * time.Second)
		lvl := MemoryLevel{Pods: r.tracker.Pods(ns)}
		for range 3 {
			m, err := r.env.ManagerMemory(ctx)
			if err != nil {
				return err
			}
			lvl.Readings = append(lvl.Readings, m)
			time.Sleep(time.Second)
		}
		lvl.LoadAverage = loadAverage()
		if err := r.heapProfile(ctx, fmt.Sprintf("heap-%d.pb.gz", pods)); err != nil {
			return err
		}
		res.Memory = append(res.Memory, lvl)
		last := lvl.Readings[len(lvl.Readings)-1]
		r.logf("memory at %d worker pods: RSS %.1f MB (anon %.1f, file %.1f), Go heap %.1f MB, load %.1f", lvl.Pods,
			float64(last.RSSBytes)/1e6, float64(last.RSSAnonBytes)/1e6, float64(last.RSSFileBytes)/1e6, float64(last.HeapBytes)/1e6, lvl.LoadAverage)
		r.checkpoint(res)
		if steady && pods == r.cfg.SteadyPods {
			if err := r.steady(ctx, ns, pods, res); err != nil {
				return fmt.Errorf("steady run at %d pods: %w", pods, err)
			}
		}
	}
	return r.cleanup(ctx, ns)
}

// steady holds the namespace's jobs as they are for cfg.SteadyDuration and
// reads the manager's memory every cfg.SteadyInterval, from the first
// reading at 0 to the last at SteadyDuration.
func (r *run) steady(ctx context.Context, ns string, pods int, res *Result) error {
	interval := r.cfg.SteadyInterval
	if interval <= 0 {
		interval = time.Minute
	}
	s := &SteadyRun{Pods: pods, DurationSeconds: r.cfg.SteadyDuration.Seconds(), IntervalSeconds: interval.Seconds()}
	res.Steady = s
	r.logf("steady run: %d worker pods for %s, memory every %s", pods, r.cfg.SteadyDuration, interval)
	start := time.Now()
	for i := 0; time.Duration(i)*interval <= r.cfg.SteadyDuration; i++ {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Until(start.Add(time.Duration(i) * interval))):
		}
		m, err := r.env.ManagerMemory(ctx)
		if err != nil {
			return err
		}
		_, running := r.tracker.Jobs(ns, mlv1.StateRunning)
		s.Samples = append(s.Samples, SteadySample{
			Seconds: time.Since(start).Seconds(), Memory: m, LoadAverage: loadAverage(),
			Pods: r.tracker.Pods(ns), RunningJobs: running,
		})
		s.fit()
		r.logf("steady %s: %d pods; RSS anon %.1f MB, Go heap %.1f MB, next GC at %.1f MB; load %.1f",
			time.Duration(i)*interval, s.Samples[i].Pods, float64(m.RSSAnonBytes)/1e6, float64(m.HeapBytes)/1e6,
			float64(m.NextGCBytes)/1e6, s.Samples[i].LoadAverage)
		r.checkpoint(res)
	}
	r.logf("steady run: per minute, Go heap %+.1f KB, next GC %+.1f KB, RSS anon %+.1f KB",
		s.HeapAllocSlope/1e3, s.NextGCSlope/1e3, s.RSSAnonSlope/1e3)
	return r.heapProfile(ctx, fmt.Sprintf("heap-%d-steady-end.pb.gz", pods))
}

// heapProfile saves the manager's heap profile as name in cfg.ProfileDir
// (nothing without one), after a level's readings.
func (r *run) heapProfile(ctx context.Context, name string) error {
	if r.cfg.ProfileDir == "" {
		return nil
	}
	path := filepath.Join(r.cfg.ProfileDir, name)
	if err := r.env.HeapProfile(ctx, path); err != nil {
		return err
	}
	r.logf("heap profile: %s", path)
	return nil
}

// checkpoint hands the result so far to cfg.Checkpoint.
func (r *run) checkpoint(res *Result) {
	if r.cfg.Checkpoint != nil {
		r.cfg.Checkpoint(res)
	}
}

// restart measures a rank failure -> the next attempt's pods all Running,
// at each gang size, Repeats times: in all, without the backoff, and step
// by step (restartSteps), with the manager's writes in between.
func (r *run) restart(ctx context.Context) ([]RestartRun, error) {
	ns := "restart"
	if err := r.newNamespace(ctx, ns); err != nil {
		return nil, err
	}
	var out []RestartRun
	for _, ranks := range r.cfg.RestartRanks {
		pods, nproc := gangShape(ranks)
		rr := RestartRun{Ranks: ranks, Pods: pods, NProcPerNode: nproc}
		for rep := range r.cfg.Repeats {
			name := fmt.Sprintf("restart-%d-%d", ranks, rep)
			// Rank 0 fails once the whole gang has had time to start, also
			// on a loaded machine (64 pods took 6 s to create at a load
			// average of 20): 20 s plus 200 ms per pod.
			failAfter := 20*time.Second + time.Duration(pods)*200*time.Millisecond
			ann := map[string]string{
				"sim.ml.example.com/fail-rank":    "0",
				"sim.ml.example.com/fail-attempt": "0",
				"sim.ml.example.com/fail-after":   failAfter.String(),
			}
			job := r.job(ns, name, pods, ann)
			job.Spec.NProcPerNode = ptr.To(int32(nproc))
			if err := r.env.Client.Create(ctx, job); err != nil {
				return nil, err
			}
			if _, err := waitUntil(ctx, 5*time.Minute, name+" Running", func() bool {
				_, running := r.tracker.GangPods(ns, name, 0)
				_, failed := r.tracker.FailedAt(ns, name+"-worker-0", 0)
				return failed || (running == pods && r.tracker.JobState(ns, name) == mlv1.StateRunning)
			}); err != nil {
				return nil, err
			}
			mgrBefore, err := r.env.ManagerMetrics(ctx)
			if err != nil {
				return nil, err
			}
			if _, failed := r.tracker.FailedAt(ns, name+"-worker-0", 0); failed {
				return nil, fmt.Errorf("%s: rank 0 failed (after %s) before the gang was Running and measured", name, failAfter)
			}
			var failedAt time.Time
			if _, err := waitUntil(ctx, 3*time.Minute+failAfter, name+"-worker-0 Failed", func() bool {
				var ok bool
				failedAt, ok = r.tracker.FailedAt(ns, name+"-worker-0", 0)
				return ok
			}); err != nil {
				return nil, err
			}
			at, err := waitUntil(ctx, 5*time.Minute, name+"'s attempt 1 Running", func() bool {
				_, running := r.tracker.GangPods(ns, name, 1)
				return running == pods
			})
			if err != nil {
				return nil, err
			}
			if _, err := waitUntil(ctx, time.Minute, name+" Running again", func() bool {
				return r.tracker.JobState(ns, name) == mlv1.StateRunning
			}); err != nil {
				return nil, err
			}
			time.Sleep(2 * time.Second) // the last batched status write
			mgrAfter, err := r.env.ManagerMetrics(ctx)
			if err != nil {
				return nil, err
			}
			if err := r.env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, job); err != nil {
				return nil, err
			}
			steps, err := r.restartSteps(ns, name, pods, failedAt, job)
			if err != nil {
				return nil, err
			}
			total := at.Sub(failedAt).Seconds()
			rr.Seconds = append(rr.Seconds, total)
			rr.FirstPodToRunning = append(rr.FirstPodToRunning, at.Sub(r.tracker.GangSeen(ns, name, 1)).Seconds())
			rr.ExcludingBackoff = append(rr.ExcludingBackoff, total-steps.BackoffWait)
			rr.Steps = append(rr.Steps, steps)
			writes := map[string]float64{}
			prev := clientRequests(mgrBefore)
			sum := 0.0
			for k, v := range clientRequests(mgrAfter) {
				method, _, _ := strings.Cut(k, " ")
				if d := v - prev[k]; d > 0 && method != "GET" {
					writes[k] = d
					sum += d
				}
			}
			rr.ManagerWrites = append(rr.ManagerWrites, writes)
			rr.WritesBeyondPods = append(rr.WritesBeyondPods, sum-float64(pods))
			r.logf("restart at %d ranks (%d pods x %d processes): %.2f s, %.2f s without the backoff; %v; manager writes %v",
				ranks, pods, nproc, total, total-steps.BackoffWait, steps, writes)
			if err := r.env.Client.Delete(ctx, r.job(ns, name, pods, nil)); err != nil {
				return nil, err
			}
			if err := r.cleanup(ctx, ns); err != nil {
				return nil, err
			}
		}
		out = append(out, rr)
		r.logf("restart at %d ranks: %v s", ranks, rr.Seconds)
	}
	return out, nil
}

// gangShape is the pods and processes per pod (torchrun's nprocPerNode) of
// a gang of ranks ranks (WORLD_SIZE): one pod per rank up to
// mlv1.MaxNumWorkers pods, the API's bound; a bigger gang runs the fewest
// processes per pod, a power of two, that keep it within the bound (512
// ranks: 64 pods x 8, one process per GPU of an 8-GPU node; 1,024: 64 x 16).
// The restart's cost is in its pods.
func gangShape(ranks int) (pods, nproc int) {
	nproc = 1
	for (ranks+nproc-1)/nproc > mlv1.MaxNumWorkers {
		nproc *= 2
	}
	return (ranks + nproc - 1) / nproc, nproc
}

// restartSteps splits one restart, as the watches saw it, from the failure
// to the new gang all Running. The backoff wait is the part of the time
// between the old gang being gone and the new one's first pod that falls
// before the backoff's end (status.lastRestartTime + the first restart's
// backoff, the moment the controller may create the new gang).
func (r *run) restartSteps(ns, name string, ranks int, failedAt time.Time, job *mlv1.TrainingJob) (RestartSteps, error) {
	decided, ok := r.tracker.StateAt(ns, name, mlv1.StateRestarting)
	if !ok {
		return RestartSteps{}, fmt.Errorf("%s: the watch never saw state Restarting", name)
	}
	old, next := r.tracker.Gang(ns, name, 0, ranks), r.tracker.Gang(ns, name, 1, ranks)
	first := r.tracker.GangSeen(ns, name, 1)
	if old.LastGone.IsZero() || next.LastSeen.IsZero() || next.LastBound.IsZero() || next.LastRunning.IsZero() || first.IsZero() {
		return RestartSteps{}, fmt.Errorf("%s: the watch missed a step of the restart: %+v %+v", name, old, next)
	}
	if job.Status.LastRestartTime == nil {
		return RestartSteps{}, fmt.Errorf("%s: no status.lastRestartTime", name)
	}
	backoffEnd := job.Status.LastRestartTime.Add(firstRestartBackoff)
	waitFrom := old.LastGone
	if failedAt.After(waitFrom) {
		waitFrom = failedAt
	}
	wait := 0.0
	if until := minTime(first, backoffEnd); until.After(waitFrom) {
		wait = until.Sub(waitFrom).Seconds()
	}
	return RestartSteps{
		FailedToDecided:      decided.Sub(failedAt).Seconds(),
		DecidedToOldGone:     old.LastGone.Sub(decided).Seconds(),
		OldGoneToFirstNew:    first.Sub(old.LastGone).Seconds(),
		BackoffWait:          wait,
		FirstNewToAllSeen:    next.LastSeen.Sub(first).Seconds(),
		AllSeenToAllBound:    next.LastBound.Sub(next.LastSeen).Seconds(),
		AllBoundToAllRunning: next.LastRunning.Sub(next.LastBound).Seconds(),
	}, nil
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// parallel runs fn(0..n-1) with at most inFlight at once; the first error wins.
func parallel(ctx context.Context, n, inFlight int, fn func(i int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for range min(n, inFlight) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := fn(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}

// Summary is the median and spread of a set of samples.
type Summary struct {
	N      int     `json:"n"`
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	P99    float64 `json:"p99"`
}

// Summarize sorts a copy of xs and returns its summary (nearest-rank p99).
func Summarize(xs []float64) Summary {
	if len(xs) == 0 {
		return Summary{Median: math.NaN(), Min: math.NaN(), Max: math.NaN(), P99: math.NaN()}
	}
	s := slices.Clone(xs)
	sort.Float64s(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	rank := int(math.Ceil(0.99*float64(len(s)))) - 1
	return Summary{N: len(s), Median: med, Min: s[0], Max: s[len(s)-1], P99: s[max(rank, 0)]}
}
