package trainingjob

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

func initializing() *mlv1.TrainingJobStatus {
	return &mlv1.TrainingJobStatus{
		State:   mlv1.StateInitializing,
		Workers: mlv1.WorkerCounts{Pending: 2},
		WorkerStatuses: []mlv1.WorkerStatus{
			{Rank: 0, PodName: "j-worker-0", Phase: corev1.PodPending},
			{Rank: 1, PodName: "j-worker-1", Phase: corev1.PodPending},
		},
		Conditions: []metav1.Condition{{Type: mlv1.TrainingJobRunning, Status: metav1.ConditionFalse,
			Reason: mlv1.ReasonWorkersPending, Message: "0 of 2 ranks running, 2 pending"}},
	}
}

// Only what pod events move on every event is batched; a change anyone
// acts on is written at once.
func TestOnlyCountersMoved(t *testing.T) {
	for name, tc := range map[string]struct {
		change func(*mlv1.TrainingJobStatus)
		want   bool
	}{
		"a rank bound and started": {func(st *mlv1.TrainingJobStatus) {
			st.Workers = mlv1.WorkerCounts{Pending: 1, Active: 1}
			st.WorkerStatuses[0].Phase, st.WorkerStatuses[0].Node = corev1.PodRunning, "n1"
			st.AllocatedNodes = 1
			st.Conditions[0].Message = "1 of 2 ranks running, 1 pending"
		}, true},
		"a container restarted": {func(st *mlv1.TrainingJobStatus) { st.WorkerStatuses[1].RestartCount = 1 }, true},
		"the state":             {func(st *mlv1.TrainingJobStatus) { st.State = mlv1.StateRunning }, false},
		"a condition's reason": {func(st *mlv1.TrainingJobStatus) {
			st.Conditions[0].Reason, st.Conditions[0].Message = mlv1.ReasonUnschedulable, "rank 1 is unschedulable"
		}, false},
		"a condition's status": {func(st *mlv1.TrainingJobStatus) { st.Conditions[0].Status = metav1.ConditionTrue }, false},
		"a new condition": {func(st *mlv1.TrainingJobStatus) {
			st.Conditions = append(st.Conditions, metav1.Condition{Type: mlv1.TrainingJobProgressAvailable, Status: metav1.ConditionTrue})
		}, false},
		"a rank left the list":    {func(st *mlv1.TrainingJobStatus) { st.WorkerStatuses = st.WorkerStatuses[:1] }, false},
		"a rank's pod replaced":   {func(st *mlv1.TrainingJobStatus) { st.WorkerStatuses[1].PodName = "other" }, false},
		"observedGeneration":      {func(st *mlv1.TrainingJobStatus) { st.ObservedGeneration = 2 }, false},
		"progress":                {func(st *mlv1.TrainingJobStatus) { st.CurrentEpoch = 1 }, false},
		"a restart being counted": {func(st *mlv1.TrainingJobStatus) { st.Restarts = 1 }, false},
	} {
		t.Run(name, func(t *testing.T) {
			prev := initializing()
			next := prev.DeepCopy()
			tc.change(next)
			if got := onlyCountersMoved(prev, next); got != tc.want {
				t.Errorf("onlyCountersMoved = %t, want %t", got, tc.want)
			}
		})
	}
}

// A waiting change is due one period after it was first held back, and a
// written (forgotten) one starts a new period.
func TestStatusBatchDue(t *testing.T) {
	b := newStatusBatch()
	key := types.NamespacedName{Namespace: "ns", Name: "j"}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if ok, at := b.due(key, t0, time.Second); ok || !at.Equal(t0.Add(time.Second)) {
		t.Fatalf("first hold: due %t at %s, want not due until t0+1s", ok, at)
	}
	if ok, _ := b.due(key, t0.Add(500*time.Millisecond), time.Second); ok {
		t.Fatal("due half a period after the first hold")
	}
	if ok, _ := b.due(key, t0.Add(time.Second), time.Second); !ok {
		t.Fatal("not due a period after the first hold")
	}
	b.forget(key)
	if ok, at := b.due(key, t0.Add(2*time.Second), time.Second); ok || !at.Equal(t0.Add(3*time.Second)) {
		t.Fatalf("after forget: due %t at %s, want a new period", ok, at)
	}
}
