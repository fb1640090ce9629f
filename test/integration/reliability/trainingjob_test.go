package reliability_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/controllers/trainingjob"
	"github.com/ml-operator/ml-operator/internal/integrations/progress"
	"github.com/ml-operator/ml-operator/test/testutil"
)

// maxPasses bounds every pass loop: far more than any test needs.
const maxPasses = 30

// newJobReconciler builds the TrainingJob reconciler on a direct client
// wrapped with funcs.
func newJobReconciler(t *testing.T, funcs interceptor.Funcs) *trainingjob.Reconciler {
	t.Helper()
	r, _ := newJobReconcilerWithClock(t, funcs)
	return r
}

// newJobReconcilerWithClock also returns the fake clock the reconciler
// decides by (backoffs, grace periods).
func newJobReconcilerWithClock(t *testing.T, funcs interceptor.Funcs) (*trainingjob.Reconciler, *clocktesting.FakeClock) {
	t.Helper()
	r, clk, _ := newJobReconcilerWithRecorder(t, funcs)
	return r, clk
}

// newJobReconcilerWithRecorder also returns the recorder of its events.
func newJobReconcilerWithRecorder(t *testing.T, funcs interceptor.Funcs) (*trainingjob.Reconciler, *clocktesting.FakeClock, *events.FakeRecorder) {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Now().Truncate(time.Second))
	rec := events.NewFakeRecorder(1000)
	return trainingjob.NewReconciler(interceptor.NewClient(cachedClient(t), funcs), directClient(t), rec, trainingjob.Config{
		DefaultImages: imgs,
		Clock:         clk,
	}), clk, rec
}

// eventReasons counts the reasons of the events rec has recorded so far
// ("<type> <reason> <note>" each).
func eventReasons(rec *events.FakeRecorder) map[string]int {
	n := map[string]int{}
	for {
		select {
		case e := <-rec.Events:
			if f := strings.Fields(e); len(f) > 1 {
				n[f[1]]++
			}
		default:
			return n
		}
	}
}

func getJob(t *testing.T, key client.ObjectKey) *mlv1.TrainingJob {
	t.Helper()
	job := &mlv1.TrainingJob{}
	require.NoError(t, k8s.Get(ctx, key, job))
	return job
}

// jobPods are the names of the job's pods on the API server, sorted.
func jobPods(t *testing.T, key client.ObjectKey) []string {
	t.Helper()
	pods := &corev1.PodList{}
	require.NoError(t, k8s.List(ctx, pods, client.InNamespace(key.Namespace),
		client.MatchingLabels{mlv1.LabelTrainingJob: key.Name}))
	var names []string
	for _, p := range pods.Items {
		names = append(names, p.Name)
	}
	sort.Strings(names)
	return names
}

// requireNotFailed asserts that nothing injected counted against the job.
func requireNotFailed(t *testing.T, job *mlv1.TrainingJob) {
	t.Helper()
	requireNeverFailed(t, job)
	require.Zero(t, job.Status.Restarts, "restarts")
	require.Zero(t, job.Status.Disruptions, "disruptions")
}

// requireNeverFailed asserts the job is not Failed.
func requireNeverFailed(t *testing.T, job *mlv1.TrainingJob) {
	t.Helper()
	require.NotEqual(t, mlv1.StateFailed, job.Status.State, "an API error failed the job: %+v", job.Status.Conditions)
	for _, c := range job.Status.Conditions {
		if c.Type == mlv1.TrainingJobFailed {
			require.NotEqual(t, "True", string(c.Status), "Failed condition: %s: %s", c.Reason, c.Message)
		}
	}
}

// Every other status write of the TrainingJob reconciler meets a real
// conflict: just before it reaches the API server, someone else updates the
// job (here: an annotation), so the write carries a stale resourceVersion.
// Passed again, as the newer version's watch event makes the work queue do,
// the reconciler still takes the job from new to Running: every status
// transition lands, no rank gets a second pod, nothing is counted as a
// restart or a failure.
//
// Events are emitted only after the status write that records what they
// say has landed: a pass whose write is lost emits nothing, so each event
// is recorded once however many passes were redone.
func TestTrainingJobStatusWritesSurviveConflicts(t *testing.T) {
	ns := testutil.Namespace(t, k8s)
	key := client.ObjectKey{Namespace: ns, Name: "conflicted"}
	writes, conflicts := 0, 0
	r, _, rec := newJobReconcilerWithRecorder(t, interceptor.Funcs{
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			writes++
			if sub == "status" && writes%2 == 1 {
				bump(t, obj)
			}
			err := c.SubResource(sub).Update(ctx, obj, opts...)
			if apierrors.IsConflict(err) {
				conflicts++
			}
			return err
		},
	})
	require.NoError(t, k8s.Create(ctx, testutil.TrainingJob(key.Name, ns).Workers(2).GPUs(0).Obj()))

	states := map[mlv1.TrainingJobState]bool{}
	passUntil(t, r, key, func(job *mlv1.TrainingJob) bool {
		states[job.Status.State] = true
		if job.Status.State == mlv1.StateInitializing {
			// envtest has no kubelet: the pods run when the test says so.
			setPods(t, key, corev1.PodRunning, testutil.WithPodIP("10.0.0.1"))
		}
		return job.Status.State == mlv1.StateRunning
	})

	job := getJob(t, key)
	requireNotFailed(t, job)
	assert.True(t, states[mlv1.StatePending] && states[mlv1.StateInitializing], "every state was written: %v", states)
	assert.Equal(t, []string{"conflicted-worker-0", "conflicted-worker-1"}, jobPods(t, key), "one pod per rank")
	assert.Equal(t, int32(2), job.Status.Workers.Active)
	assert.Equal(t, job.Generation, job.Status.ObservedGeneration)
	assert.GreaterOrEqual(t, conflicts, 3, "conflicts met (a write per state)")
	assert.Equal(t, map[string]int{"Created": 1, "WorkersCreated": 1, "Running": 1}, eventReasons(rec),
		"each event once, after its status write landed")
}

// A rank failure under the same conflicts (every other status write is
// stale) restarts the gang exactly once: the restart is counted once, not
// once per redone pass, spends one unit of backoffLimit, and the new gang
// has one pod per rank, all of the next attempt.
//
// It runs twice, the conflicts hitting the odd and then the even writes, so
// that the pass deciding the restart meets a conflict in one of the runs.
func TestTrainingJobGangRestartCountedOnceUnderConflicts(t *testing.T) {
	for _, parity := range []int{1, 0} {
		t.Run(fmt.Sprintf("conflict-on-writes-mod-2-eq-%d", parity), func(t *testing.T) {
			gangRestartUnderConflicts(t, parity)
		})
	}
}

func gangRestartUnderConflicts(t *testing.T, parity int) {
	ns := testutil.Namespace(t, k8s)
	key := client.ObjectKey{Namespace: ns, Name: "restart"}
	writes, conflicts := 0, 0
	r, clk, rec := newJobReconcilerWithRecorder(t, interceptor.Funcs{
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			writes++
			if writes%2 == parity {
				bump(t, obj)
			}
			err := c.SubResource(sub).Update(ctx, obj, opts...)
			if apierrors.IsConflict(err) {
				conflicts++
			}
			return err
		},
	})
	require.NoError(t, k8s.Create(ctx, testutil.TrainingJob(key.Name, ns).Workers(2).GPUs(0).BackoffLimit(3).Obj()))
	runPods := func() { setPods(t, key, corev1.PodRunning, testutil.WithPodIP("10.0.0.1")) }
	passUntil(t, r, key, func(job *mlv1.TrainingJob) bool {
		if job.Status.State == mlv1.StateInitializing {
			runPods()
		}
		return job.Status.State == mlv1.StateRunning
	})

	require.NoError(t, testutil.SetPodPhase(ctx, k8s, ns, "restart-worker-1", corev1.PodFailed,
		testutil.WithExitCode("trainer", 1, "Error")))
	sawRestarting := false
	passUntil(t, r, key, func(job *mlv1.TrainingJob) bool {
		switch job.Status.State {
		case mlv1.StateRestarting:
			sawRestarting = true
			if len(jobPods(t, key)) == 0 {
				clk.Step(11 * time.Second) // past the first backoff (10 s)
			}
		case mlv1.StateInitializing:
			runPods()
		}
		return sawRestarting && job.Status.State == mlv1.StateRunning
	})

	job := getJob(t, key)
	requireNeverFailed(t, job)
	assert.Equal(t, int32(1), job.Status.Restarts, "one failure, one restart")
	assert.Zero(t, job.Status.Disruptions)
	pods := &corev1.PodList{}
	require.NoError(t, k8s.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{mlv1.LabelTrainingJob: key.Name}))
	require.Len(t, pods.Items, 2, "one pod per rank")
	for _, p := range pods.Items {
		assert.Equal(t, "1", p.Labels[mlv1.LabelRestartAttempt], "pod %s", p.Name)
	}
	assert.GreaterOrEqual(t, conflicts, 4, "conflicts met")
	assert.Equal(t, map[string]int{"Created": 1, "WorkersCreated": 2, "Running": 2, mlv1.ReasonWorkerFailed: 1}, eventReasons(rec),
		"one restart event, and each attempt's events once")
}

// Transient errors on pod creation (503, 429, 504, 500, timeouts) end the
// pass with an error, so the work queue retries it with backoff; they never
// fail the job or spend its backoffLimit. Once the API server answers again,
// every rank gets exactly one pod.
func TestTrainingJobRetriesTransientPodCreateErrors(t *testing.T) {
	ns := testutil.Namespace(t, k8s)
	key := client.ObjectKey{Namespace: ns, Name: "flaky-create"}
	f := &faults{}
	r := newJobReconciler(t, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if _, ok := obj.(*corev1.Pod); ok {
				if err := f.next(); err != nil {
					return err
				}
			}
			return c.Create(ctx, obj, opts...)
		},
	})
	require.NoError(t, k8s.Create(ctx, testutil.TrainingJob(key.Name, ns).Workers(2).GPUs(0).BackoffLimit(0).Obj()))
	f.arm(transientErrors()...)

	failedPasses := passUntil(t, r, key, func(job *mlv1.TrainingJob) bool {
		return job.Status.State == mlv1.StateInitializing && len(jobPods(t, key)) == 2
	})
	assert.Equal(t, len(transientErrors()), f.count(), "every injected error was met")
	assert.NotZero(t, failedPasses, "the passes that met them returned an error (retried by the work queue)")
	job := getJob(t, key)
	requireNotFailed(t, job)
	assert.Equal(t, []string{"flaky-create-worker-0", "flaky-create-worker-1"}, jobPods(t, key))
}

// Transient errors on the reads a pass starts with (the job, its pods) and
// on the status write each end their pass with an error: one errored pass
// per injected error, none swallowed, and the job still gets to Initializing
// with nothing counted against it.
func TestTrainingJobRetriesTransientReadAndStatusErrors(t *testing.T) {
	ns := testutil.Namespace(t, k8s)
	key := client.ObjectKey{Namespace: ns, Name: "flaky-reads"}
	gets, lists, statuses := &faults{}, &faults{}, &faults{}
	r := newJobReconciler(t, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, k client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*mlv1.TrainingJob); ok {
				if err := gets.next(); err != nil {
					return err
				}
			}
			return c.Get(ctx, k, obj, opts...)
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if _, ok := list.(*corev1.PodList); ok {
				if err := lists.next(); err != nil {
					return err
				}
			}
			return c.List(ctx, list, opts...)
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			if err := statuses.next(); err != nil {
				return err
			}
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
	})
	require.NoError(t, k8s.Create(ctx, testutil.TrainingJob(key.Name, ns).Workers(2).GPUs(0).BackoffLimit(0).Obj()))
	gets.arm(transientErrors()[:2]...)
	lists.arm(transientErrors()[2:4]...)
	statuses.arm(transientErrors()[4], transientErrors()[0])

	failedPasses := passUntil(t, r, key, func(job *mlv1.TrainingJob) bool {
		return job.Status.State == mlv1.StateInitializing
	})
	injected := gets.count() + lists.count() + statuses.count()
	assert.Equal(t, 6, injected, "every injected error was met")
	assert.Equal(t, injected, failedPasses, "each ended its pass with an error")
	requireNotFailed(t, getJob(t, key))
	assert.Len(t, jobPods(t, key), 2)
}

// passUntil runs reconcile passes (as the work queue would, after an error
// or an event) until done holds for the stored job, and returns how many
// passes returned an error. Every error must be a transient API error or a
// conflict, never anything else.
func passUntil(t *testing.T, r *trainingjob.Reconciler, key client.ObjectKey, done func(*mlv1.TrainingJob) bool) int {
	t.Helper()
	failed := 0
	for i := 0; i < maxPasses; i++ {
		_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key})
		if err != nil {
			failed++
			require.Truef(t, isRetriable(err), "pass %d: unexpected error %v", i, err)
		}
		job := getJob(t, key)
		requireNeverFailed(t, job)
		if done(job) {
			return failed
		}
	}
	t.Fatalf("job %s not done after %d passes: %+v", key, maxPasses, getJob(t, key).Status)
	return failed
}

func isRetriable(err error) bool {
	return apierrors.IsConflict(err) || apierrors.IsServiceUnavailable(err) || apierrors.IsTooManyRequests(err) ||
		apierrors.IsServerTimeout(err) || apierrors.IsInternalError(err) || apierrors.IsTimeout(err)
}

// bump updates obj on the API server behind the reconciler's back (a new
// annotation), so that the write the reconciler is making is stale.
func bump(t *testing.T, obj client.Object) {
	t.Helper()
	cur := obj.DeepCopyObject().(client.Object)
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(obj), cur))
	ann := cur.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann["reliability.example.com/bumped"] = time.Now().Format(time.RFC3339Nano)
	cur.SetAnnotations(ann)
	require.NoError(t, k8s.Update(ctx, cur))
}

// countingScraper serves a fixed progress and counts the scrapes.
type countingScraper struct {
	epoch float64
	calls int
}

func (s *countingScraper) Scrape(context.Context, string) (progress.Report, error) {
	s.calls++
	epoch, total := s.epoch, 10.0
	return progress.Report{Epoch: &epoch, TotalEpochs: &total}, nil
}

// A scrape whose status write is lost to conflicts is applied again by the
// following passes, not scraped again: rank 0 is read at most once per
// interval however many writes fail, and the progress still lands.
func TestProgressScrapeSurvivesLostStatusWrites(t *testing.T) {
	ns := testutil.Namespace(t, k8s)
	key := client.ObjectKey{Namespace: ns, Name: "scraped"}
	conflictsLeft := 0
	clk := clocktesting.NewFakeClock(time.Now().Truncate(time.Second))
	scraper := &countingScraper{epoch: 3}
	r := trainingjob.NewReconciler(interceptor.NewClient(cachedClient(t), interceptor.Funcs{
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			if conflictsLeft > 0 {
				conflictsLeft--
				bump(t, obj)
			}
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
	}), directClient(t), events.NewFakeRecorder(1000), trainingjob.Config{DefaultImages: imgs, Clock: clk, Scraper: scraper})
	require.NoError(t, k8s.Create(ctx, testutil.TrainingJob(key.Name, ns).Workers(2).GPUs(0).Obj()))
	passUntil(t, r, key, func(job *mlv1.TrainingJob) bool {
		if job.Status.State == mlv1.StateInitializing {
			setPods(t, key, corev1.PodRunning, testutil.WithPodIP("10.0.0.1"))
		}
		return job.Status.CurrentEpoch == 3
	})
	require.Equal(t, 1, scraper.calls)

	clk.Step(15 * time.Second) // the next scrape is due
	scraper.epoch, conflictsLeft = 5, 3
	passes := 0
	passUntil(t, r, key, func(job *mlv1.TrainingJob) bool {
		passes++
		return job.Status.CurrentEpoch == 5
	})
	assert.Equal(t, 4, passes, "three lost writes, then the fourth lands")
	assert.Equal(t, 2, scraper.calls, "one scrape per interval, lost writes or not")
	assert.Equal(t, "50%", getJob(t, key).Status.Progress)
}
