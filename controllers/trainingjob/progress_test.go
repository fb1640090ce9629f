package trainingjob

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/internal/integrations/progress"
)

func TestApplyProgress(t *testing.T) {
	job := testJob(mlv1.FrameworkPyTorch) // hyperparameters.epochs = 10
	start := metav1.NewTime(t0)
	job.Status.StartTime = &start
	// What progress.Parse reads from a trainer following the contract.
	p := progress.Report{Epoch: f64(4), TotalEpochs: f64(10), Loss: f64(0.25), Accuracy: f64(0.91),
		Throughput: f64(1234.5), CheckpointEpoch: f64(3), CheckpointTimestamp: f64(1.7670000005e+09)}
	now := t0.Add(40 * time.Minute)
	if !ApplyProgress(job, p, now) {
		t.Fatal("first scrape changed nothing")
	}
	st := job.Status
	if st.CurrentEpoch != 4 || st.TotalEpochs != 10 || st.Progress != "40%" {
		t.Errorf("epoch %d/%d progress %q", st.CurrentEpoch, st.TotalEpochs, st.Progress)
	}
	if st.Metrics == nil || *st.Metrics.Loss != 0.25 || *st.Metrics.Throughput != 1234.5 || !st.Metrics.LastScrapeTime.Time.Equal(now) {
		t.Errorf("metrics %+v", st.Metrics)
	}
	if st.LastCheckpoint == nil || st.LastCheckpoint.Epoch != 3 || st.LastCheckpoint.Path != "/checkpoints/epoch-3" ||
		st.LastCheckpoint.Time == nil || st.LastCheckpoint.Time.Unix() != 1767000000 {
		t.Errorf("lastCheckpoint %+v", st.LastCheckpoint)
	}
	// 4 epochs in 40 minutes: 6 more take 60 minutes.
	if st.EstimatedCompletionTime == nil || !st.EstimatedCompletionTime.Time.Equal(t0.Add(100*time.Minute)) {
		t.Errorf("estimatedCompletionTime %v", st.EstimatedCompletionTime)
	}
	if ApplyProgress(job, p, now.Add(15*time.Second)) {
		t.Errorf("the same values must not count as a change (no status write)")
	}
	if !job.Status.Metrics.LastScrapeTime.Time.Equal(now) {
		t.Errorf("scrape time moved without a change")
	}
}

func TestApplyProgressUsesReportedTotalWithoutEpochsHyperparameter(t *testing.T) {
	job := testJob(mlv1.FrameworkPyTorch)
	delete(job.Spec.Hyperparameters, "epochs")
	p := progress.Report{Epoch: f64(1), TotalEpochs: f64(4)}
	ApplyProgress(job, p, t0)
	if job.Status.TotalEpochs != 4 || job.Status.Progress != "25%" {
		t.Errorf("total %d progress %q", job.Status.TotalEpochs, job.Status.Progress)
	}
}

func TestScrapeTrackerRateLimitsAndBacksOff(t *testing.T) {
	tr := newScrapeTracker()
	key := types.NamespacedName{Namespace: "a", Name: "b"}
	if ok, _ := tr.due(key, t0); !ok {
		t.Fatal("first scrape not due")
	}
	next := tr.record(key, t0, true, 15*time.Second, 5*time.Minute)
	if !next.Equal(t0.Add(15 * time.Second)) {
		t.Errorf("next after success %s", next)
	}
	if ok, at := tr.due(key, t0.Add(10*time.Second)); ok || !at.Equal(next) {
		t.Errorf("scraped again within 15s")
	}
	now := t0.Add(15 * time.Second)
	for i, want := range []time.Duration{15 * time.Second, 30 * time.Second, 60 * time.Second} {
		if got := tr.record(key, now, false, 15*time.Second, 5*time.Minute).Sub(now); got != want {
			t.Errorf("failure %d: next in %s, want %s", i+1, got, want)
		}
	}
	tr.forget(key)
	if ok, _ := tr.due(key, now); !ok {
		t.Errorf("forgotten job not due")
	}
}

// A new rank 0 (a gang restart's) is scraped at once, and its failures back
// off from the interval, not from where the previous pod's left off.
func TestScrapeTrackerStartsAfreshForANewRank0(t *testing.T) {
	tr := newScrapeTracker()
	key := types.NamespacedName{Namespace: "a", Name: "b"}
	tr.retarget(key, "rank0-attempt0")
	tr.record(key, t0, true, 15*time.Second, 5*time.Minute)
	now := t0.Add(15 * time.Second)
	for range 4 { // attempt 0's rank 0 went away: 15 s, 30 s, 60 s, 120 s
		tr.record(key, now, false, 15*time.Second, 5*time.Minute)
	}
	tr.retarget(key, "rank0-attempt0") // the same pod: the backoff stays
	if ok, at := tr.due(key, now.Add(time.Minute)); ok || !at.Equal(now.Add(2*time.Minute)) {
		t.Fatalf("the same pod's backoff was dropped: due %t at %s", ok, at)
	}
	tr.pend(key, scrapeResult{attempt: 0})
	tr.retarget(key, "rank0-attempt1")
	if ok, _ := tr.due(key, now.Add(time.Second)); !ok {
		t.Error("the new rank 0 is not due at once")
	}
	if got := tr.record(key, now, false, 15*time.Second, 5*time.Minute).Sub(now); got != 15*time.Second {
		t.Errorf("the new rank 0's first failure backs off %s, want 15s", got)
	}
	if tr.unwritten(key) == nil {
		t.Error("retargeting dropped the pending scrape")
	}
}

// A scrape stays pending until a status write carries it.
func TestScrapeTrackerPendingUntilWritten(t *testing.T) {
	tr := newScrapeTracker()
	key := types.NamespacedName{Namespace: "a", Name: "b"}
	if tr.unwritten(key) != nil {
		t.Fatal("pending before any scrape")
	}
	tr.written(key) // no entry: nothing to do
	tr.record(key, t0, true, 15*time.Second, 5*time.Minute)
	tr.pend(key, scrapeResult{url: "http://x/metrics", at: t0, attempt: 2})
	if res := tr.unwritten(key); res == nil || res.attempt != 2 || !res.at.Equal(t0) {
		t.Fatalf("pending scrape %+v", res)
	}
	if ok, _ := tr.due(key, t0.Add(time.Second)); ok {
		t.Error("pending a write does not make a scrape due")
	}
	tr.written(key)
	if tr.unwritten(key) != nil {
		t.Error("still pending after the write")
	}
	if ok, at := tr.due(key, t0.Add(time.Second)); ok || !at.Equal(t0.Add(15*time.Second)) {
		t.Error("the write moved the next scrape")
	}
}
