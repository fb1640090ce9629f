//go:build chaos

package chaos

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

func workerPod(uid, rank, attempt string, phase corev1.PodPhase) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "chaos", Name: "job-a-worker-" + rank, UID: types.UID(uid),
			Labels: map[string]string{mlv1.LabelTrainingJob: "job-a", mlv1.LabelRank: rank, mlv1.LabelRestartAttempt: attempt}},
		Status: corev1.PodStatus{Phase: phase},
	}
}

// The watcher's checks fire on the states they forbid, and only on those.
func TestPodWatcherInvariants(t *testing.T) {
	bad := &violations{}
	w := newPodWatcher(nil, "chaos", bad)

	// Attempt 0 fails and ends; attempt 1 starts: allowed.
	w.apply(workerPod("a0", "0", "0", corev1.PodRunning), false)
	w.apply(workerPod("a0", "0", "0", corev1.PodFailed), false)
	w.apply(workerPod("b1", "1", "1", corev1.PodPending), false)
	if got := bad.all(); len(got) != 0 {
		t.Fatalf("violations for a terminal old attempt next to a new one: %v", got)
	}

	// A live pod of attempt 0 while attempt 1 runs: two attempts at once.
	w.apply(workerPod("c0", "2", "0", corev1.PodRunning), false)
	got := bad.all()
	if len(got) != 1 || !strings.Contains(got[0], "live pods of 2 attempts at once") {
		t.Fatalf("want one two-attempts violation, got %v", got)
	}
	w.apply(workerPod("c0", "2", "0", corev1.PodRunning), true)

	// Two live pods for rank 1, attempt 1.
	w.apply(workerPod("b1-dup", "1", "1", corev1.PodRunning), false)
	got = bad.all()
	if len(got) != 2 || !strings.Contains(got[1], "2 live pods for worker-1 attempt 1") {
		t.Fatalf("want a duplicate-rank violation, got %v", got)
	}
	if rec := w.recreated(); len(rec) != 1 || rec[0] != "chaos/job-a/worker-1/1 (2 pods)" {
		t.Errorf("recreated slots %v, want rank 1 of attempt 1 with 2 pods", rec)
	}
	if seen := w.attemptsSeen("chaos/job-a"); !seen["0"] || !seen["1"] || len(seen) != 2 {
		t.Errorf("attempts seen %v, want 0 and 1", seen)
	}
}
