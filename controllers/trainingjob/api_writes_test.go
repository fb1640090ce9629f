package trainingjob_test

import (
	"maps"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/test/testutil"
)

// apiWriteCounter counts the writes the suite's manager sends to the API
// server, per namespace, as "<method> <resource>[/<subresource>]": every
// create, update, patch and delete of the reconciler's client and of its
// event recorder, below both, on the wire.
type apiWriteCounter struct {
	mu     sync.Mutex
	counts map[string]map[string]int
}

var apiWrites = &apiWriteCounter{counts: map[string]map[string]int{}}

func (c *apiWriteCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		switch req.Method {
		case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
			if ns, what, ok := namespacedResource(req.URL.Path); ok {
				key := req.Method + " " + what
				// A write the API server refused changed nothing: it is
				// counted apart, with its code (a 409 Conflict is a status
				// write from a cache that had not seen the last one yet).
				if err != nil {
					key += " (no response)"
				} else if resp.StatusCode >= 400 {
					key += " " + strconv.Itoa(resp.StatusCode)
				}
				c.mu.Lock()
				if c.counts[ns] == nil {
					c.counts[ns] = map[string]int{}
				}
				c.counts[ns][key]++
				c.mu.Unlock()
			}
		}
		return resp, err
	})
}

// in returns the writes sent in a namespace so far.
func (c *apiWriteCounter) in(namespace string) map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.counts[namespace])
}

// namespacedResource splits /api/v1/namespaces/<ns>/<resource>[/<name>[/<sub>]]
// (or /apis/<group>/<version>/...) into the namespace and
// "<resource>[/<sub>]".
func namespacedResource(path string) (namespace, what string, ok bool) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	for i := 0; i+2 < len(parts); i++ {
		if parts[i] != "namespaces" {
			continue
		}
		what = parts[i+2]
		if i+4 < len(parts) {
			what += "/" + parts[i+4]
		}
		return parts[i+1], what, true
	}
	return "", "", false
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// An 8-rank job's whole life, create to Completed, costs the operator the
// floor of the contract and not one write more (docs/benchmarks.md, "Writes
// per pod"): 8 pods, 1 Service, 1 ConfigMap (API.md: what a TrainingJob
// owns; no checkpoint storage, so no PVC), 4 status writes (every state
// the job passes through is stored: Pending, Initializing, Running,
// Completed) and 4 events (Created, WorkersCreated, Running, Completed):
// 18 writes, 2.25 per pod. The ranks are bound, start and finish one at a
// time, as a kubelet reports them; the suite's clock stands still, so the
// worker counters' batch period never ends between two of them (in
// `make bench`, ranks that start more than a second apart add about one
// counters-only status write). The writes are counted on the wire, below
// the client and the event recorder, so a write from anywhere in the
// manager counts.
func TestWritesPerPodAtTheContractFloor(t *testing.T) {
	ns := testutil.Namespace(t, env.Client)
	if _, err := testutil.ReadyNode(ctx, env.Client, ns+"-node", nil); err != nil {
		t.Fatal(err)
	}
	const ranks = 8
	w := testutil.TrainingJob("floor", ns).Workers(ranks).GPUs(0)
	w.Spec.Checkpoint.Enabled = ptr.To(false)
	job := create(t, w)
	waitPods(t, job, ranks, 0)
	waitState(t, job, mlv1.StateInitializing)
	for r := int32(0); r < ranks; r++ {
		if err := testutil.BindPod(ctx, env.Client, ns, mlv1.WorkerPodName(job.Name, r), ns+"-node"); err != nil {
			t.Fatal(err)
		}
		setPhase(t, job, r, corev1.PodRunning, testutil.WithPodCondition(corev1.PodReady, ""))
	}
	waitState(t, job, mlv1.StateRunning)
	for r := int32(0); r < ranks; r++ {
		setPhase(t, job, r, corev1.PodSucceeded, testutil.WithExitCode("trainer", 0, "Completed"))
	}
	waitState(t, job, mlv1.StateCompleted)
	waitEvents(t, job, "Created", "WorkersCreated", "Running", "Completed")

	// One more pass over the finished job must write nothing: the count
	// below is the whole life's.
	passes := reconcilePasses(t)
	poke(t, job)
	testutil.Eventually(t, func() bool { return reconcilePasses(t) > passes }, "a pass after the poke")

	want := map[string]int{
		"POST pods":               ranks,
		"POST services":           1,
		"POST configmaps":         1,
		"PUT trainingjobs/status": 4,
		"POST events":             4,
	}
	// Nothing but the test writes the job: no status write may lose a race
	// (409 Conflict) with the manager's own cache, which a pod event can
	// reach before the watch event of the controller's last status write
	// (such a pass is skipped, stale.go). A refusal is counted under its
	// own key, so any fails the comparison.
	got := apiWrites.in(ns)
	assert.Equal(t, want, got, "the operator's writes in the job's namespace, create -> Completed")
	total := 0
	for _, n := range got {
		total += n
	}
	assert.InDelta(t, 2.25, float64(total)/ranks, 1e-9, "writes per pod")
}

// A gang restart costs the operator the pods it replaces plus a constant:
// the old gang goes in one request (a DeleteCollection of the job's pods of
// earlier attempts), not one delete per rank, and the new one is one create
// per rank. Counted on the wire at two gang sizes, from the failure to the
// next attempt Running: the writes besides the creates (the restart's
// status write and event, the one delete, the new gang's status writes and
// events) are the same few at both.
func TestGangRestartWritesThePodsItReplacesPlusAConstant(t *testing.T) {
	others := map[int32]int{}
	for _, ranks := range []int32{3, 12} {
		ns := testutil.Namespace(t, env.Client)
		w := testutil.TrainingJob("swap", ns).Workers(ranks).GPUs(0)
		w.Spec.Checkpoint.Enabled = ptr.To(false)
		job := create(t, w)
		runGang(t, job, ranks, 0)
		before := apiWrites.in(ns)

		setPhase(t, job, 1, corev1.PodFailed, testutil.WithExitCode("trainer", 137, "Error"))
		waitJob(t, job, "the restart", func(j *mlv1.TrainingJob) bool { return j.Status.Restarts == 1 })
		waitPods(t, job, 0, 0)
		step(t, job, 10*time.Second) // the backoff
		runGang(t, job, ranks, 1)
		waitEvents(t, job, "WorkerFailed", "Running")

		got := apiWrites.in(ns)
		for k, n := range before {
			got[k] -= n
			if got[k] == 0 {
				delete(got, k)
			}
		}
		// The test's own pokes (step) write the job too: a pass that read
		// the job before one of them loses its status write (409 Conflict,
		// retried at once). That is reported, not counted.
		if n := got["PUT trainingjobs/status 409"]; n > 0 {
			t.Logf("%d status write(s) answered 409 Conflict and were retried", n)
			delete(got, "PUT trainingjobs/status 409")
		}
		t.Logf("%d ranks: the restart's writes %v", ranks, got)
		assert.Equal(t, 1, got["DELETE pods"], "%d ranks: the old gang is deleted in one request", ranks)
		assert.Equal(t, int(ranks), got["POST pods"], "%d ranks: one create per rank of the new gang", ranks)
		total := 0
		for _, n := range got {
			total += n
		}
		others[ranks] = total - int(ranks)
	}
	for ranks, n := range others {
		// Per-rank deletes alone would be 12 at 12 ranks.
		assert.LessOrEqual(t, n, 8, "%d ranks: a restart's writes besides the new pods", ranks)
	}
	t.Logf("writes besides the new pods: %v", others)
}
