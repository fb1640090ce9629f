package trainingjob_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/controllers/trainingjob"
	"github.com/ml-operator/ml-operator/internal/manager"
	"github.com/ml-operator/ml-operator/test/testutil"
)

// watchStatusWrites records every status the API server stores for a job,
// each different from the one before it: one entry per status write that
// landed. Call the returned function to read them.
func watchStatusWrites(t *testing.T, namespace, name string) func() []mlv1.TrainingJobStatus {
	t.Helper()
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: manager.NewScheme()})
	require.NoError(t, err)
	w, err := wc.Watch(ctx, &mlv1.TrainingJobList{}, client.InNamespace(namespace))
	require.NoError(t, err)
	t.Cleanup(w.Stop)
	var mu sync.Mutex
	var writes []mlv1.TrainingJobStatus
	var last mlv1.TrainingJobStatus
	go func() {
		for ev := range w.ResultChan() {
			j, ok := ev.Object.(*mlv1.TrainingJob)
			if !ok || j.Name != name || equality.Semantic.DeepEqual(j.Status, last) {
				continue
			}
			last = *j.Status.DeepCopy()
			mu.Lock()
			writes = append(writes, last)
			mu.Unlock()
		}
	}()
	return func() []mlv1.TrainingJobStatus {
		mu.Lock()
		defer mu.Unlock()
		return append([]mlv1.TrainingJobStatus(nil), writes...)
	}
}

func statesOf(sts []mlv1.TrainingJobStatus) []string {
	var out []string
	for _, st := range sts {
		out = append(out, fmt.Sprintf("%s %+v", st.State, st.Workers))
	}
	return out
}

// The pod events of a gang share status writes. Four ranks are bound and
// started one at a time, then finish one at a time: eight pod events that
// each move a counter. The job's whole life costs one status write per
// state (Pending, Initializing, Running, Completed), not one per pod event:
// a change that only moves the counters waits for the batch period, and
// here the test's clock stands still, so only state changes are written.
// Once the period has passed, a counters-only change is written too.
func TestStatusWritesBatchPodEvents(t *testing.T) {
	ns := testutil.Namespace(t, env.Client)
	if _, err := testutil.ReadyNode(ctx, env.Client, ns+"-node", nil); err != nil {
		t.Fatal(err)
	}
	statuses := watchStatusWrites(t, ns, "batched")
	job := create(t, testutil.TrainingJob("batched", ns).Workers(4).GPUs(0))
	waitPods(t, job, 4, 0)
	waitState(t, job, mlv1.StateInitializing)

	for r := int32(0); r < 4; r++ {
		require.NoError(t, testutil.BindPod(ctx, env.Client, ns, mlv1.WorkerPodName("batched", r), ns+"-node"))
		setPhase(t, job, r, corev1.PodRunning)
	}
	j := waitState(t, job, mlv1.StateRunning)
	assert.Equal(t, mlv1.WorkerCounts{Active: 4}, j.Status.Workers, "the state change carries the counters")
	require.Len(t, j.Status.WorkerStatuses, 4)
	for _, ws := range j.Status.WorkerStatuses {
		assert.Equal(t, ns+"-node", ws.Node, "rank %d", ws.Rank)
	}
	assert.Equal(t, int32(1), j.Status.AllocatedNodes)

	// One rank finishes early: the job stays Running and only counters
	// move. The change waits for the batch period, then it is written.
	setPhase(t, job, 0, corev1.PodSucceeded, testutil.WithExitCode("trainer", 0, "Completed"))
	j = waitJob(t, job, "the early rank's exit written after the batch period", func(j *mlv1.TrainingJob) bool {
		if j.Status.Workers.Succeeded == 1 {
			return true
		}
		// The cache may not show the pod's exit yet: step again until a
		// pass that sees it finds the period over.
		step(t, job, trainingjob.DefaultStatusBatchPeriod)
		return false
	})
	assert.Equal(t, mlv1.StateRunning, j.Status.State)
	assert.Equal(t, mlv1.WorkerCounts{Active: 3, Succeeded: 1}, j.Status.Workers)

	for r := int32(1); r < 4; r++ {
		setPhase(t, job, r, corev1.PodSucceeded, testutil.WithExitCode("trainer", 0, "Completed"))
	}
	j = waitState(t, job, mlv1.StateCompleted)
	assert.Equal(t, mlv1.WorkerCounts{Succeeded: 4}, j.Status.Workers)

	var got []mlv1.TrainingJobStatus
	testutil.Eventually(t, func() bool {
		got = statuses()
		return len(got) > 0 && got[len(got)-1].State == mlv1.StateCompleted
	}, "the watch saw Completed")
	want := []string{
		"Pending {Pending:0 Active:0 Succeeded:0 Failed:0}",
		"Initializing {Pending:4 Active:0 Succeeded:0 Failed:0}",
		"Running {Pending:0 Active:4 Succeeded:0 Failed:0}",
		"Running {Pending:0 Active:3 Succeeded:1 Failed:0}",
		"Completed {Pending:0 Active:0 Succeeded:4 Failed:0}",
	}
	assert.Equal(t, want, statesOf(got), "every status the API server stored: one write per state, "+
		"plus the counters-only change written after the batch period; none per pod event")
}
