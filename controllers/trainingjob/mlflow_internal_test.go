package trainingjob

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

func TestFinalRunStatus(t *testing.T) {
	job := testJob(mlv1.FrameworkPyTorch)
	job.Status.State = mlv1.StateCompleted
	if got := finalRunStatus(job); got != MLflowRunFinished {
		t.Errorf("completed: %s", got)
	}
	job.Status.State = mlv1.StateFailed
	job.Status.Conditions = []metav1.Condition{{Type: mlv1.TrainingJobFailed, Status: metav1.ConditionTrue, Reason: ReasonBackoffLimitExceeded}}
	if got := finalRunStatus(job); got != MLflowRunFailed {
		t.Errorf("failed: %s", got)
	}
	job.Status.Conditions[0].Reason = ReasonDeadlineExceeded
	if got := finalRunStatus(job); got != MLflowRunKilled {
		t.Errorf("deadline exceeded: %s", got)
	}
}

func TestProgressMetrics(t *testing.T) {
	loss, acc := 0.5, 0.9
	st := &mlv1.TrainingJobStatus{CurrentEpoch: 3, Metrics: &mlv1.TrainingMetrics{Loss: &loss, Accuracy: &acc}}
	got := map[string]MLflowMetric{}
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
