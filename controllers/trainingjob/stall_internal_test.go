package trainingjob

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/internal/integrations/progress"
)

// The watch follows training_step (else training_epoch): a moved value, a
// new attempt or another metric start it again; a report with neither
// leaves it alone.
func TestWatchProgress(t *testing.T) {
	w, ok := WatchProgress(StallWatch{}, 0, progress.Report{Epoch: f64(1)}, t0)
	require.True(t, ok)
	assert.Equal(t, StallWatch{Attempt: 0, Metric: "training_epoch", Value: 1, Since: t0, Seen: t0}, w)

	w, _ = WatchProgress(w, 0, progress.Report{Epoch: f64(1), Step: f64(40)}, t0.Add(15*time.Second))
	assert.Equal(t, StallWatch{Attempt: 0, Metric: "training_step", Value: 40, Since: t0.Add(15 * time.Second), Seen: t0.Add(15 * time.Second)}, w,
		"the step counter wins over the epoch")

	w, _ = WatchProgress(w, 0, progress.Report{Step: f64(40)}, t0.Add(30*time.Second))
	w, _ = WatchProgress(w, 0, progress.Report{Step: f64(40)}, t0.Add(45*time.Second))
	assert.Equal(t, 30*time.Second, w.Unchanged())

	same, ok := WatchProgress(w, 0, progress.Report{Loss: f64(0.1)}, t0.Add(time.Hour))
	assert.False(t, ok)
	assert.Equal(t, w, same, "a report without progress does not move the watch")

	w, _ = WatchProgress(w, 0, progress.Report{Step: f64(41)}, t0.Add(60*time.Second))
	assert.Equal(t, time.Duration(0), w.Unchanged(), "a moved step starts the watch again")

	w, _ = WatchProgress(w, 1, progress.Report{Step: f64(41)}, t0.Add(75*time.Second))
	assert.Equal(t, StallWatch{Attempt: 1, Metric: "training_step", Value: 41, Since: t0.Add(75 * time.Second), Seen: t0.Add(75 * time.Second)}, w,
		"a new attempt starts its own watch, even at the same step")
}

// stallOf applies stallTimeout and stallAction: off without a timeout,
// nothing before the timeout or for another attempt, and then a counted
// restart (Failed once backoffLimit is spent), an uncounted one, or Failed.
func TestStallOf(t *testing.T) {
	watch := StallWatch{Attempt: 2, Metric: "training_step", Value: 412, Since: t0, Seen: t0.Add(2 * time.Minute)}
	stalledJob := func(timeout time.Duration, action mlv1.StallAction, restarts int32) *mlv1.TrainingJob {
		j := testJob(mlv1.FrameworkPyTorch)
		j.Spec.BackoffLimit = ptr.To(int32(3))
		j.Spec.FailurePolicy = &mlv1.FailurePolicy{StallTimeout: &metav1.Duration{Duration: timeout}, StallAction: action}
		j.Status.Restarts, j.Status.Disruptions = restarts, 2-restarts
		return j
	}
	const seen = "rank 0 (pod bert-worker-0) made no progress for 2m0s (stallTimeout 2m0s): training_step has been 412 since 2026-01-01T12:00:00Z"
	for name, tc := range map[string]struct {
		job  *mlv1.TrainingJob
		w    StallWatch
		want decision
		ok   bool
	}{
		"off":                 {testJob(mlv1.FrameworkPyTorch), watch, decision{}, false},
		"timeout 0s":          {stalledJob(0, "", 0), watch, decision{}, false},
		"not yet":             {stalledJob(2*time.Minute+time.Second, "", 0), watch, decision{}, false},
		"another attempt":     {stalledJob(2*time.Minute, "", 0), StallWatch{Attempt: 1, Metric: "training_step", Value: 412, Since: t0, Seen: t0.Add(time.Hour)}, decision{}, false},
		"no watch":            {stalledJob(2*time.Minute, "", 0), StallWatch{}, decision{}, false},
		"restart by default":  {stalledJob(2*time.Minute, "", 1), watch, decision{kind: restartForFailure, reason: "Stalled", message: seen}, true},
		"restart":             {stalledJob(2*time.Minute, mlv1.StallActionRestart, 0), watch, decision{kind: restartForFailure, reason: "Stalled", message: seen}, true},
		"uncounted":           {stalledJob(2*time.Minute, mlv1.StallActionRestartUncounted, 2), watch, decision{kind: restartForDisruption, reason: "Stalled", message: seen}, true},
		"fail":                {stalledJob(2*time.Minute, mlv1.StallActionFail, 0), watch, decision{kind: fail, reason: "Stalled", message: seen + "; stallAction is Fail"}, true},
		"backoff limit spent": {stalledJob(2*time.Minute, "", 3), StallWatch{Attempt: 3, Metric: "training_step", Value: 412, Since: t0, Seen: t0.Add(2 * time.Minute)}, decision{kind: fail, reason: "BackoffLimitExceeded", message: seen + "; backoffLimit 3 reached after 3 restarts"}, true},
	} {
		if name == "backoff limit spent" {
			tc.job.Status.Disruptions = 0
		}
		got, ok := stallOf(tc.job, tc.w)
		assert.Equal(t, tc.ok, ok, name)
		assert.Equal(t, tc.want, got, name)
	}
}

// The stall decision comes after the pods' own news: a failed rank is a
// WorkerFailed restart even when rank 0 also stood still.
func TestDecideStallAfterPodFailures(t *testing.T) {
	job := testJob(mlv1.FrameworkPyTorch)
	job.Spec.FailurePolicy = &mlv1.FailurePolicy{StallTimeout: &metav1.Duration{Duration: time.Minute}}
	job.Spec.BackoffLimit = ptr.To(int32(3))
	w := StallWatch{Attempt: 0, Metric: "training_step", Value: 7, Since: t0, Seen: t0.Add(time.Minute)}
	g := gangState{job: job, pods: gang(job, -1), now: t0.Add(time.Minute), stall: w}
	d := decide(g)
	assert.Equal(t, restartForFailure, d.kind)
	assert.Equal(t, "Stalled", d.reason)
	assert.True(t, d.stalled)

	g.pods = gang(job, 1, exited(1, "Error"))
	d = decide(g)
	assert.Equal(t, "WorkerFailed", d.reason)
	assert.False(t, d.stalled)
}

func f64(v float64) *float64 { return &v }
