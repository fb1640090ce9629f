package trainingjob

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/internal/integrations/mlflow"
)

func TestFinalRunStatus(t *testing.T) {
	job := testJob(mlv1.FrameworkPyTorch)
	job.Status.State = mlv1.StateCompleted
	if got := finalRunStatus(job); got != mlflow.RunFinished {
		t.Errorf("completed: %s", got)
	}
	job.Status.State = mlv1.StateFailed
	job.Status.Conditions = []metav1.Condition{{Type: mlv1.TrainingJobFailed, Status: metav1.ConditionTrue, Reason: mlv1.ReasonBackoffLimitExceeded}}
	if got := finalRunStatus(job); got != mlflow.RunFailed {
		t.Errorf("failed: %s", got)
	}
	job.Status.Conditions[0].Reason = mlv1.ReasonDeadlineExceeded
	if got := finalRunStatus(job); got != mlflow.RunKilled {
		t.Errorf("deadline exceeded: %s", got)
	}
}

func TestProgressMetrics(t *testing.T) {
	loss, acc := 0.5, 0.9
	st := &mlv1.TrainingJobStatus{CurrentEpoch: 3, Metrics: &mlv1.TrainingMetrics{Loss: &loss, Accuracy: &acc}}
	got := map[string]mlflow.Metric{}
	for _, m := range progressMetrics(st, t0) {
		got[m.Key] = m
	}
	if len(got) != 3 || got["epoch"].Value != 3 || got["loss"].Value != 0.5 || got["accuracy"].Value != 0.9 {
		t.Errorf("metrics %+v", got)
	}
	for k, m := range got {
		if m.Step != 3 || m.Timestamp != t0.UnixMilli() {
			t.Errorf("%s: step %d timestamp %d", k, m.Step, m.Timestamp)
		}
	}
}

// The MLflow finalizer is held exactly while mlflowRunOpen: a tracked job
// with a run id whose run was not ended and not given up on.
func TestMLflowRunOpen(t *testing.T) {
	tracked := func(mutate func(*mlv1.TrainingJob)) *mlv1.TrainingJob {
		job := testJob(mlv1.FrameworkPyTorch)
		job.Spec.Tracking = &mlv1.TrackingSpec{MLflow: &mlv1.MLflowSpec{TrackingURI: "http://mlflow:5000"}}
		job.Status.MLflowRunID = "run1"
		mutate(job)
		return job
	}
	finished := func(ago time.Duration) func(*mlv1.TrainingJob) {
		return func(j *mlv1.TrainingJob) {
			done := metav1.NewTime(t0.Add(-ago))
			j.Status.State, j.Status.CompletionTime = mlv1.StateCompleted, &done
		}
	}
	ended := func(status metav1.ConditionStatus, reason string) func(*mlv1.TrainingJob) {
		return func(j *mlv1.TrainingJob) {
			j.Status.Conditions = []metav1.Condition{{Type: mlv1.TrainingJobMLflowTracking, Status: status, Reason: reason}}
		}
	}
	for name, tc := range map[string]struct {
		job  *mlv1.TrainingJob
		want bool
	}{
		"running with a run":    {tracked(func(*mlv1.TrainingJob) {}), true},
		"not tracked":           {tracked(func(j *mlv1.TrainingJob) { j.Spec.Tracking = nil }), false},
		"no run yet":            {tracked(func(j *mlv1.TrainingJob) { j.Status.MLflowRunID = "" }), false},
		"finished, end pending": {tracked(finished(time.Minute)), true},
		"finished, ending failed": {tracked(func(j *mlv1.TrainingJob) {
			finished(time.Minute)(j)
			ended(metav1.ConditionFalse, mlv1.ReasonTrackingFailed)(j)
		}), true},
		"run ended": {tracked(func(j *mlv1.TrainingJob) {
			finished(time.Minute)(j)
			ended(metav1.ConditionTrue, mlv1.ReasonRunEnded)(j)
		}), false},
		"given up an hour after finish": {tracked(finished(61 * time.Minute)), false},
	} {
		if got := mlflowRunOpen(tc.job, t0); got != tc.want {
			t.Errorf("%s: mlflowRunOpen = %t, want %t", name, got, tc.want)
		}
	}
}
