package trainingjob_test

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/controllers/trainingjob"
	"github.com/ml-operator/ml-operator/internal/manager"
	"github.com/ml-operator/ml-operator/test/testutil"
)

// The suite runs the reconciler in a manager against a real API server, with
// the real manager's cache (testutil.ManagerOptions: manager.CacheOptions),
// and a fake clock the tests step. envtest has no kubelet: tests write pod status by hand.
var (
	env *testutil.Env
	// managerCache is the reconciler's cache, for tests that wait until it
	// has seen something.
	managerCache cache.Cache
	clk          *clocktesting.FakeClock
	ctx          = context.Background()
	gpuNS        = map[string]string{"node.example.com/gpu": "true"}
)

func TestMain(m *testing.M) {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))
	os.Exit(testutil.Main(m, testutil.EnvOptions{}, startManager))
}

// startManager runs the reconciler in a manager with the production cache
// (testutil.ManagerOptions) until the returned teardown.
func startManager(e *testutil.Env) (teardown func(), err error) {
	env = e
	// Every request the manager sends goes through apiWrites, which counts
	// the writes per namespace: pods, Services, ConfigMaps, status, events.
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(apiWrites.wrap)
	mgr, err := ctrl.NewManager(cfg, testutil.ManagerOptions())
	if err != nil {
		return nil, err
	}
	clk = clocktesting.NewFakeClock(time.Now().Truncate(time.Second))
	mctx, cancel := context.WithCancel(ctx)
	defer func() {
		if err != nil {
			cancel()
		}
	}()
	if err := trainingjob.SetupIndexes(mctx, mgr.GetFieldIndexer()); err != nil {
		return nil, err
	}
	// The reconciler's writes go through a counting interceptor, so tests can
	// assert how many API writes a job cost. Creates are also counted per
	// namespace (refused ones too), and each pass's read of its job.
	counted, err := interceptor.NewClient(noWatch{mgr.GetClient()}, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*mlv1.TrainingJob); ok {
				writes.add(key.Namespace, key.Name, "get job")
			}
			return c.Get(ctx, key, obj, opts...)
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			writes.add(obj.GetNamespace(), obj.GetLabels()[mlv1.LabelTrainingJob], "create "+fmt.Sprintf("%T", obj))
			writes.add(obj.GetNamespace(), "", "create")
			return c.Create(ctx, obj, opts...)
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			writes.add(obj.GetNamespace(), obj.GetName(), "update "+sub)
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
	}), nil
	if err != nil {
		return nil, err
	}
	managerCache = mgr.GetCache()
	recorder := countingRecorder{mgr.GetEventRecorder("trainingjob-controller")}
	r := trainingjob.NewReconciler(counted, mgr.GetAPIReader(), recorder, trainingjob.Config{
		DefaultImages:           map[string]string{"pytorch": "registry.example.com/pytorch:default"},
		DefaultCommands:         manager.DefaultFrameworkCommands(),
		GPUNodeSelector:         gpuNS,
		Clock:                   clk,
		MaxConcurrentReconciles: 4,
	})
	if err := r.SetupWithManager(mgr); err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			fmt.Fprintln(os.Stderr, "manager:", err)
		}
	}, nil
}

// noWatch adapts the manager's client to the interceptor, which wants a
// client.WithWatch; the reconciler never watches through its client.
type noWatch struct{ client.Client }

func (noWatch) Watch(context.Context, client.ObjectList, ...client.ListOption) (watch.Interface, error) {
	return nil, fmt.Errorf("not supported")
}

// writeCounter counts the reconciler's API writes per job and kind.
type writeCounter struct {
	mu     sync.Mutex
	counts map[string]int
}

var writes = &writeCounter{counts: map[string]int{}}

func (w *writeCounter) add(namespace, job, what string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.counts[namespace+"/"+job+"/"+what]++
}

// get returns the writes of one kind ("create *v1.Pod", "update status") for a job.
func (w *writeCounter) get(job *mlv1.TrainingJob, what string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.counts[job.Namespace+"/"+job.Name+"/"+what]
}

// inNamespace returns the calls of one kind ("create" of any kind, "event",
// "event <reason>") in a namespace.
func (w *writeCounter) inNamespace(namespace, what string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.counts[namespace+"//"+what]
}

// countingRecorder counts the reconciler's events per namespace: each is a
// create on the API server.
type countingRecorder struct{ events.EventRecorder }

func (r countingRecorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	if m, err := meta.Accessor(regarding); err == nil {
		writes.add(m.GetNamespace(), "", "event")
		writes.add(m.GetNamespace(), "", "event "+reason)
	}
	r.EventRecorder.Eventf(regarding, related, eventtype, reason, action, note, args...)
}

// create creates a job in a fresh namespace and returns it.
func create(t *testing.T, w *testutil.TrainingJobWrapper) *mlv1.TrainingJob {
	t.Helper()
	job := w.Obj()
	if err := env.Client.Create(ctx, job); err != nil {
		t.Fatalf("creating job: %v", err)
	}
	return job
}

// get reads a job from the API server.
func get(t *testing.T, job *mlv1.TrainingJob) *mlv1.TrainingJob {
	t.Helper()
	out := &mlv1.TrainingJob{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(job), out); err != nil {
		t.Fatalf("reading job: %v", err)
	}
	return out
}

// waitJob polls until cond holds on the job and returns it.
func waitJob(t *testing.T, job *mlv1.TrainingJob, what string, cond func(*mlv1.TrainingJob) bool) *mlv1.TrainingJob {
	t.Helper()
	deadline := time.Now().Add(testutil.Timeout)
	for {
		last := &mlv1.TrainingJob{}
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(job), last)
		if err == nil && cond(last) {
			return last
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s: %s not reached within %s; last status: %+v (err %v)", job.Name, what, testutil.Timeout, last.Status, err)
		}
		time.Sleep(testutil.Interval)
	}
}

// waitState waits for a state.
func waitState(t *testing.T, job *mlv1.TrainingJob, state mlv1.TrainingJobState) *mlv1.TrainingJob {
	t.Helper()
	return waitJob(t, job, "state "+string(state), func(j *mlv1.TrainingJob) bool { return j.Status.State == state })
}

// pods lists the job's pods (all attempts), ordered by rank.
func pods(t *testing.T, job *mlv1.TrainingJob) []corev1.Pod {
	t.Helper()
	var list corev1.PodList
	if err := env.Client.List(ctx, &list, client.InNamespace(job.Namespace), client.MatchingLabels{mlv1.LabelTrainingJob: job.Name}); err != nil {
		t.Fatal(err)
	}
	sort.Slice(list.Items, func(i, j int) bool {
		return list.Items[i].Labels[mlv1.LabelRank] < list.Items[j].Labels[mlv1.LabelRank]
	})
	return list.Items
}

// waitPods waits until the job has n pods of the given attempt and no others.
func waitPods(t *testing.T, job *mlv1.TrainingJob, n int, attempt int32) []corev1.Pod {
	t.Helper()
	deadline := time.Now().Add(testutil.Timeout)
	for {
		got := pods(t, job)
		ok := len(got) == n
		for _, p := range got {
			if p.Labels[mlv1.LabelRestartAttempt] != strconv.Itoa(int(attempt)) {
				ok = false
			}
		}
		if ok {
			return got
		}
		if time.Now().After(deadline) {
			var names []string
			for _, p := range got {
				names = append(names, fmt.Sprintf("%s@%s(deleting=%t)", p.Name, p.Labels[mlv1.LabelRestartAttempt], p.DeletionTimestamp != nil))
			}
			t.Fatalf("job %s: want %d pods of attempt %d within %s, have %v; job status: %+v",
				job.Name, n, attempt, testutil.Timeout, names, get(t, job).Status)
		}
		time.Sleep(testutil.Interval)
	}
}

// setPhase writes a pod's phase.
func setPhase(t *testing.T, job *mlv1.TrainingJob, rank int32, phase corev1.PodPhase, opts ...testutil.PodStatusOption) {
	t.Helper()
	if err := testutil.SetPodPhase(ctx, env.Client, job.Namespace, mlv1.WorkerPodName(job.Name, rank), phase, opts...); err != nil {
		t.Fatal(err)
	}
}

// setAll writes the same phase on every rank.
func setAll(t *testing.T, job *mlv1.TrainingJob, n int32, phase corev1.PodPhase, opts ...testutil.PodStatusOption) {
	t.Helper()
	for r := int32(0); r < n; r++ {
		setPhase(t, job, r, phase, opts...)
	}
}

// update changes a job's spec, retrying on conflicts with the controller's
// status writes.
func update(t *testing.T, job *mlv1.TrainingJob, mutate func(*mlv1.TrainingJob)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		j := get(t, job)
		mutate(j)
		return env.Client.Update(ctx, j)
	})
	if err != nil {
		t.Fatalf("updating job: %v", err)
	}
}

// poke changes an annotation so the job is reconciled now; tests call it
// after stepping the fake clock, which the work queue's timers do not see.
func poke(t *testing.T, job *mlv1.TrainingJob) {
	t.Helper()
	update(t, job, func(j *mlv1.TrainingJob) {
		if j.Annotations == nil {
			j.Annotations = map[string]string{}
		}
		j.Annotations["test.ml.example.com/poke"] = strconv.FormatInt(time.Now().UnixNano(), 10)
	})
}

// step advances the fake clock and pokes the job.
func step(t *testing.T, job *mlv1.TrainingJob, d time.Duration) {
	t.Helper()
	clk.Step(d)
	poke(t, job)
}
