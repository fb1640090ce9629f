package progress

import (
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

// Rank 0 runs the user's code: whatever its metrics endpoint serves, the
// status Apply computes stays valid and in range.

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func f64(v float64) *float64 { return &v }

// testJob is a PyTorch job with hyperparameters.epochs = 10 and the default
// checkpoint path (/checkpoints).
func testJob() *mlv1.TrainingJob {
	return &mlv1.TrainingJob{
		ObjectMeta: metav1.ObjectMeta{Name: "bert", Namespace: "team-a", UID: "uid-1"},
		Spec: mlv1.TrainingJobSpec{
			Framework: mlv1.FrameworkPyTorch, Image: "img", NumWorkers: 2,
			Hyperparameters: map[string]mlv1.HyperparameterValue{
				"learningRate": mlv1.NewHyperparameter(0.001), "epochs": mlv1.NewHyperparameter(10),
			},
		},
	}
}

func TestApply(t *testing.T) {
	job := testJob() // hyperparameters.epochs = 10
	start := metav1.NewTime(t0)
	job.Status.StartTime = &start
	// What progress.Parse reads from a trainer following the contract.
	p := Report{Epoch: f64(4), TotalEpochs: f64(10), Loss: f64(0.25), Accuracy: f64(0.91),
		Throughput: f64(1234.5), CheckpointEpoch: f64(3), CheckpointTimestamp: f64(1.7670000005e+09)}
	now := t0.Add(40 * time.Minute)
	if !Apply(job, p, now) {
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
	if Apply(job, p, now.Add(15*time.Second)) {
		t.Errorf("the same values must not count as a change (no status write)")
	}
	if !job.Status.Metrics.LastScrapeTime.Time.Equal(now) {
		t.Errorf("scrape time moved without a change")
	}
}

func TestApplyUsesReportedTotalWithoutEpochsHyperparameter(t *testing.T) {
	job := testJob()
	delete(job.Spec.Hyperparameters, "epochs")
	p := Report{Epoch: f64(1), TotalEpochs: f64(4)}
	Apply(job, p, t0)
	if job.Status.TotalEpochs != 4 || job.Status.Progress != "25%" {
		t.Errorf("total %d progress %q", job.Status.TotalEpochs, job.Status.Progress)
	}
}

// applyUntrusted applies p to a job without the epochs hyperparameter
// (unless total > 0) and checks the status still serializes.
func applyUntrusted(t *testing.T, total int32, p Report) mlv1.TrainingJobStatus {
	t.Helper()
	job := testJob() // hyperparameters.epochs = 10
	if total == 0 {
		delete(job.Spec.Hyperparameters, "epochs")
	}
	start := metav1.NewTime(t0)
	job.Status.StartTime = &start
	Apply(job, p, t0.Add(time.Hour))
	if _, err := json.Marshal(job.Status); err != nil {
		t.Fatalf("status cannot be serialized: %v", err)
	}
	return job.Status
}

func TestApplyClampsEpochs(t *testing.T) {
	for _, tc := range []struct {
		name        string
		total       int32 // 10 from the spec, or 0: none
		p           Report
		epoch, tot  int32
		progressPct string
	}{
		{"negative epoch", 0, Report{Epoch: f64(-5), TotalEpochs: f64(10)}, 0, 10, "0%"},
		{"huge epoch, reported total", 0, Report{Epoch: f64(1e20), TotalEpochs: f64(10)}, 10, 10, "100%"},
		{"huge epoch and total", 0, Report{Epoch: f64(1e20), TotalEpochs: f64(3e9)}, math.MaxInt32, math.MaxInt32, "100%"},
		{"epoch past int32, no total", 0, Report{Epoch: f64(3e9)}, math.MaxInt32, 0, ""},
		{"epoch past spec total", 10, Report{Epoch: f64(11)}, 10, 10, "100%"},
		{"negative total ignored", 0, Report{Epoch: f64(2), TotalEpochs: f64(-4)}, 2, 0, ""},
		{"NaN and Inf ignored", 0, Report{Epoch: f64(math.NaN()), TotalEpochs: f64(math.Inf(1))}, 0, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := applyUntrusted(t, tc.total, tc.p)
			if st.CurrentEpoch != tc.epoch || st.TotalEpochs != tc.tot || st.Progress != tc.progressPct {
				t.Errorf("epoch %d/%d progress %q, want %d/%d %q", st.CurrentEpoch, st.TotalEpochs, st.Progress, tc.epoch, tc.tot, tc.progressPct)
			}
		})
	}
}

func TestApplyIgnoresNonFiniteMetrics(t *testing.T) {
	st := applyUntrusted(t, 0, Report{Loss: f64(math.NaN()), Accuracy: f64(math.Inf(-1)), Throughput: f64(5)})
	if st.Metrics == nil || st.Metrics.Loss != nil || st.Metrics.Accuracy != nil || *st.Metrics.Throughput != 5 {
		t.Errorf("metrics %+v", st.Metrics)
	}
}

func TestApplyDropsInsaneCheckpointTimes(t *testing.T) {
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
			st := applyUntrusted(t, 0, Report{CheckpointEpoch: f64(3), CheckpointTimestamp: f64(tc.ts)})
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
	st := applyUntrusted(t, 0, Report{CheckpointEpoch: f64(1e12)})
	if st.LastCheckpoint == nil || st.LastCheckpoint.Epoch != math.MaxInt32 {
		t.Errorf("huge checkpoint epoch: %+v", st.LastCheckpoint)
	}
}

func TestApplyETADoesNotOverflow(t *testing.T) {
	// One epoch in an hour, 2^31-2 to go: far past any sane horizon.
	st := applyUntrusted(t, 0, Report{Epoch: f64(1), TotalEpochs: f64(math.MaxInt32)})
	if st.EstimatedCompletionTime != nil {
		t.Errorf("estimatedCompletionTime %v for a job that will not finish in a century", st.EstimatedCompletionTime)
	}
	st = applyUntrusted(t, 0, Report{Epoch: f64(1), TotalEpochs: f64(3)})
	if st.EstimatedCompletionTime == nil || !st.EstimatedCompletionTime.Time.Equal(t0.Add(3*time.Hour)) {
		t.Errorf("estimatedCompletionTime %v, want %v", st.EstimatedCompletionTime, t0.Add(3*time.Hour))
	}
}

// The estimate uses the current attempt's epoch rate: the attempt resumed at
// epoch 6 ten hours in and reached 8 an hour later, so the last 2 epochs take
// an hour (the job-wide rate, 8 epochs in 11 hours, would say 2.75 hours).
func TestETAFromTheCurrentAttemptsRate(t *testing.T) {
	job := testJob() // hyperparameters.epochs = 10
	start := metav1.NewTime(t0)
	job.Status.StartTime = &start
	now := t0.Add(11 * time.Hour)
	ApplyWithBaseline(job, Report{Epoch: f64(8)}, now, RateBaseline{Epoch: 6, At: t0.Add(10 * time.Hour)})
	if eta := job.Status.EstimatedCompletionTime; eta == nil || !eta.Time.Equal(t0.Add(12*time.Hour)) {
		t.Errorf("estimatedCompletionTime %v, want %v", eta, t0.Add(12*time.Hour))
	}
	// No progress yet in this attempt: the job-wide rate.
	ApplyWithBaseline(job, Report{Epoch: f64(8)}, now, RateBaseline{Epoch: 8, At: now})
	if eta := job.Status.EstimatedCompletionTime; eta == nil || !eta.Time.Equal(now.Add(165*time.Minute)) {
		t.Errorf("estimatedCompletionTime %v, want %v", eta, now.Add(165*time.Minute))
	}
}

// Rank 0's step time and GPU utilization gauges become metrics.stepTime
// and resources.gpuUtilization (source Trainer), rounded and bounded.
func TestApplyStepTimeAndGPUUtilization(t *testing.T) {
	job := testJob()
	require.True(t, Apply(job, Report{StepTime: f64(0.3504), GPUUtilization: f64(87.5)}, t0))
	require.NotNil(t, job.Status.Metrics)
	assert.Equal(t, &metav1.Duration{Duration: 350400 * time.Microsecond}, job.Status.Metrics.StepTime)
	assert.Equal(t, &mlv1.ResourceUsage{GPUUtilization: ptr.To(int32(88)), GPUUtilizationSource: mlv1.GPUUtilizationSourceTrainer}, job.Status.Resources)
	assert.False(t, Apply(job, Report{StepTime: f64(0.3504), GPUUtilization: f64(87.5)}, t0.Add(time.Minute)),
		"the same values are no change")

	// Out of range: utilization clamped, absurd step times dropped.
	Apply(job, Report{StepTime: f64(-1), GPUUtilization: f64(250)}, t0.Add(2*time.Minute))
	assert.Nil(t, job.Status.Metrics.StepTime)
	assert.Equal(t, int32(100), *job.Status.Resources.GPUUtilization)
	Apply(job, Report{StepTime: f64(1e12), GPUUtilization: f64(-3)}, t0.Add(3*time.Minute))
	assert.Nil(t, job.Status.Metrics.StepTime)
	assert.Equal(t, int32(0), *job.Status.Resources.GPUUtilization)
}

// A checkpoint saved mid-epoch is reported with its step: the status names
// step-<S> with the step and the attempt that wrote it; an epoch checkpoint
// after it drops the step. Out-of-range steps and attempts are dropped.
func TestApplyCheckpointStepAndAttempt(t *testing.T) {
	job := testJob()
	require.True(t, Apply(job, Report{CheckpointEpoch: f64(1), CheckpointStep: f64(20), CheckpointAttempt: f64(0)}, t0))
	assert.Equal(t, &mlv1.CheckpointStatus{Epoch: 1, Step: ptr.To(int64(20)), Attempt: ptr.To(int32(0)), Path: "/checkpoints/step-20"},
		job.Status.LastCheckpoint)
	assert.False(t, Apply(job, Report{CheckpointEpoch: f64(1), CheckpointStep: f64(20), CheckpointAttempt: f64(0)}, t0.Add(time.Minute)),
		"the same checkpoint is no change")

	require.True(t, Apply(job, Report{CheckpointEpoch: f64(2), CheckpointAttempt: f64(1)}, t0.Add(2*time.Minute)))
	assert.Equal(t, &mlv1.CheckpointStatus{Epoch: 2, Attempt: ptr.To(int32(1)), Path: "/checkpoints/epoch-2"}, job.Status.LastCheckpoint)

	Apply(job, Report{CheckpointEpoch: f64(3), CheckpointStep: f64(-1), CheckpointAttempt: f64(1e12)}, t0.Add(3*time.Minute))
	assert.Equal(t, &mlv1.CheckpointStatus{Epoch: 3, Path: "/checkpoints/epoch-3"}, job.Status.LastCheckpoint)
	Apply(job, Report{CheckpointEpoch: f64(3), CheckpointStep: f64(1e300)}, t0.Add(4*time.Minute))
	assert.Nil(t, job.Status.LastCheckpoint.Step, "a step past 2^53 is dropped")
}
