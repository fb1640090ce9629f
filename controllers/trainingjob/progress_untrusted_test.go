package trainingjob

import (
	"encoding/json"
	"math"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/internal/integrations/progress"
)

// Rank 0 runs the user's code: whatever its metrics endpoint serves, the
// status the operator writes stays valid and in range.

func f64(v float64) *float64 { return &v }

// applyUntrusted applies p to a job without the epochs hyperparameter
// (unless total > 0) and checks the status still serializes.
func applyUntrusted(t *testing.T, total int32, p progress.Report) mlv1.TrainingJobStatus {
	t.Helper()
	job := testJob(mlv1.FrameworkPyTorch) // hyperparameters.epochs = 10
	if total == 0 {
		delete(job.Spec.Hyperparameters, "epochs")
	}
	start := metav1.NewTime(t0)
	job.Status.StartTime = &start
	ApplyProgress(job, p, t0.Add(time.Hour))
	if _, err := json.Marshal(job.Status); err != nil {
		t.Fatalf("status cannot be serialized: %v", err)
	}
	return job.Status
}

func TestApplyProgressClampsEpochs(t *testing.T) {
	for _, tc := range []struct {
		name        string
		total       int32 // 10 from the spec, or 0: none
		p           progress.Report
		epoch, tot  int32
		progressPct string
	}{
		{"negative epoch", 0, progress.Report{Epoch: f64(-5), TotalEpochs: f64(10)}, 0, 10, "0%"},
		{"huge epoch, reported total", 0, progress.Report{Epoch: f64(1e20), TotalEpochs: f64(10)}, 10, 10, "100%"},
		{"huge epoch and total", 0, progress.Report{Epoch: f64(1e20), TotalEpochs: f64(3e9)}, math.MaxInt32, math.MaxInt32, "100%"},
		{"epoch past int32, no total", 0, progress.Report{Epoch: f64(3e9)}, math.MaxInt32, 0, ""},
		{"epoch past spec total", 10, progress.Report{Epoch: f64(11)}, 10, 10, "100%"},
		{"negative total ignored", 0, progress.Report{Epoch: f64(2), TotalEpochs: f64(-4)}, 2, 0, ""},
		{"NaN and Inf ignored", 0, progress.Report{Epoch: f64(math.NaN()), TotalEpochs: f64(math.Inf(1))}, 0, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := applyUntrusted(t, tc.total, tc.p)
			if st.CurrentEpoch != tc.epoch || st.TotalEpochs != tc.tot || st.Progress != tc.progressPct {
				t.Errorf("epoch %d/%d progress %q, want %d/%d %q", st.CurrentEpoch, st.TotalEpochs, st.Progress, tc.epoch, tc.tot, tc.progressPct)
			}
		})
	}
}

func TestApplyProgressIgnoresNonFiniteMetrics(t *testing.T) {
	st := applyUntrusted(t, 0, progress.Report{Loss: f64(math.NaN()), Accuracy: f64(math.Inf(-1)), Throughput: f64(5)})
	if st.Metrics == nil || st.Metrics.Loss != nil || st.Metrics.Accuracy != nil || *st.Metrics.Throughput != 5 {
		t.Errorf("metrics %+v", st.Metrics)
	}
}

func TestApplyProgressDropsInsaneCheckpointTimes(t *testing.T) {
	now := t0.Add(time.Hour)
	for _, tc := range []struct {
		name string
		ts   float64
		keep bool
	}{
		{"past year 9999", 1e15, false},
		{"before 2000", 1000, false},
		{"negative", -1e12, false},
		{"two days ahead", float64(now.Add(48 * time.Hour).Unix()), false},
		{"an hour ahead (clock skew)", float64(now.Add(time.Hour).Unix()), true},
		{"a minute ago", float64(now.Add(-time.Minute).Unix()), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := applyUntrusted(t, 0, progress.Report{CheckpointEpoch: f64(3), CheckpointTimestamp: f64(tc.ts)})
			if st.LastCheckpoint == nil || st.LastCheckpoint.Epoch != 3 {
				t.Fatalf("the checkpoint epoch must be kept: %+v", st.LastCheckpoint)
			}
			if got := st.LastCheckpoint.Time != nil; got != tc.keep {
				t.Errorf("time kept %t, want %t (%v)", got, tc.keep, st.LastCheckpoint.Time)
			}
			if tc.keep && st.LastCheckpoint.Time.Unix() != int64(tc.ts) {
				t.Errorf("time %v", st.LastCheckpoint.Time)
			}
		})
	}
	st := applyUntrusted(t, 0, progress.Report{CheckpointEpoch: f64(1e12)})
	if st.LastCheckpoint == nil || st.LastCheckpoint.Epoch != math.MaxInt32 {
		t.Errorf("huge checkpoint epoch: %+v", st.LastCheckpoint)
	}
}

func TestApplyProgressETADoesNotOverflow(t *testing.T) {
	// One epoch in an hour, 2^31-2 to go: far past any sane horizon.
	st := applyUntrusted(t, 0, progress.Report{Epoch: f64(1), TotalEpochs: f64(math.MaxInt32)})
	if st.EstimatedCompletionTime != nil {
		t.Errorf("estimatedCompletionTime %v for a job that will not finish in a century", st.EstimatedCompletionTime)
	}
	st = applyUntrusted(t, 0, progress.Report{Epoch: f64(1), TotalEpochs: f64(3)})
	if st.EstimatedCompletionTime == nil || !st.EstimatedCompletionTime.Time.Equal(t0.Add(3*time.Hour)) {
		t.Errorf("estimatedCompletionTime %v, want %v", st.EstimatedCompletionTime, t0.Add(3*time.Hour))
	}
}

// The estimate uses the current attempt's epoch rate: the attempt resumed at
// epoch 6 ten hours in and reached 8 an hour later, so the last 2 epochs take
// an hour (the job-wide rate, 8 epochs in 11 hours, would say 2.75 hours).
func TestETAFromTheCurrentAttemptsRate(t *testing.T) {
	job := testJob(mlv1.FrameworkPyTorch) // hyperparameters.epochs = 10
	start := metav1.NewTime(t0)
	job.Status.StartTime = &start
	now := t0.Add(11 * time.Hour)
	applyProgress(job, progress.Report{Epoch: f64(8)}, now, rateBaseline{epoch: 6, at: t0.Add(10 * time.Hour)})
	if eta := job.Status.EstimatedCompletionTime; eta == nil || !eta.Time.Equal(t0.Add(12*time.Hour)) {
		t.Errorf("estimatedCompletionTime %v, want %v", eta, t0.Add(12*time.Hour))
	}
	// No progress yet in this attempt: the job-wide rate.
	applyProgress(job, progress.Report{Epoch: f64(8)}, now, rateBaseline{epoch: 8, at: now})
	if eta := job.Status.EstimatedCompletionTime; eta == nil || !eta.Time.Equal(now.Add(165*time.Minute)) {
		t.Errorf("estimatedCompletionTime %v, want %v", eta, now.Add(165*time.Minute))
	}
}

func TestScrapeTrackerBaselinePerAttempt(t *testing.T) {
	tr := newScrapeTracker()
	key := types.NamespacedName{Namespace: "a", Name: "b"}
	if b := tr.baseline(key, 0, 3, t0); b.epoch != 3 || !b.at.Equal(t0) {
		t.Errorf("first baseline %+v", b)
	}
	tr.record(key, t0, true, time.Second, time.Minute)
	if b := tr.baseline(key, 0, 5, t0.Add(time.Hour)); b.epoch != 3 || !b.at.Equal(t0) {
		t.Errorf("same attempt must keep its baseline: %+v", b)
	}
	if b := tr.baseline(key, 1, 4, t0.Add(2*time.Hour)); b.epoch != 4 || !b.at.Equal(t0.Add(2*time.Hour)) {
		t.Errorf("a new attempt starts a new baseline: %+v", b)
	}
}
