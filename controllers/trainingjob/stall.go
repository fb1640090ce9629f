package trainingjob

import (
	"fmt"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/internal/integrations/progress"
)

// Hang detection (spec.failurePolicy.stallTimeout). A collective that never
// returns leaves every pod Running; only rank 0's progress tells. The
// operator watches one value of rank 0's progress per attempt (the step
// counter, else the epoch) and calls the job stalled when a successful
// scrape shows the value it first showed stallTimeout or more earlier.
// Failed scrapes neither move nor end the watch: stalled means "seen not
// to move", never "not seen". The watch lives in memory (scrapeTracker): a
// manager restart starts it again, delaying a detection by at most one
// stallTimeout, and costs no status write per scrape.

// StallWatch is what the operator has seen of rank 0's progress in one
// attempt.
type StallWatch struct {
	// Attempt the scrapes belong to.
	Attempt int32
	// Metric is the gauge watched: training_step, else training_epoch.
	Metric string
	// Value is the metric's value; Since the first scrape that showed it,
	// Seen the latest.
	Value       float64
	Since, Seen time.Time
}

// Unchanged is how long the watched value has been seen not to move.
func (w StallWatch) Unchanged() time.Duration { return w.Seen.Sub(w.Since) }

// WatchProgress is the watch after a successful scrape of attempt at time
// at: a new attempt or a moved value starts it again. A report without a
// step or an epoch leaves the watch as it is (ok false).
func WatchProgress(w StallWatch, attempt int32, r progress.Report, at time.Time) (StallWatch, bool) {
	metric, v := progress.MetricStep, r.Step
	if v == nil {
		metric, v = progress.MetricEpoch, r.Epoch
	}
	if v == nil {
		return w, false
	}
	if w.Since.IsZero() || w.Attempt != attempt || w.Metric != metric || w.Value != *v {
		return StallWatch{Attempt: attempt, Metric: metric, Value: *v, Since: at, Seen: at}, true
	}
	if at.After(w.Seen) {
		w.Seen = at
	}
	return w, true
}

// Stalled reports whether a watch of the given attempt shows a stall under
// timeout (0: off).
func Stalled(w StallWatch, attempt int32, timeout time.Duration) bool {
	return timeout > 0 && !w.Since.IsZero() && w.Attempt == attempt && w.Unchanged() >= timeout
}

// stallOf is the stall policy: what a stalled attempt means for the job
// under spec.failurePolicy.stallAction.
func stallOf(job *mlv1.TrainingJob, w StallWatch) (decision, bool) {
	spec := &job.Spec
	timeout := spec.EffectiveStallTimeout()
	if !Stalled(w, job.Status.Attempt(), timeout) {
		return decision{}, false
	}
	what := stallMessage(job, w)
	switch spec.EffectiveStallAction() {
	case mlv1.StallActionFail:
		return decision{kind: fail, reason: mlv1.ReasonStalled, message: what + "; stallAction is Fail"}, true
	case mlv1.StallActionRestartUncounted:
		return decision{kind: restartForDisruption, reason: mlv1.ReasonStalled, message: what}, true
	}
	if job.Status.Restarts >= spec.EffectiveBackoffLimit() {
		return decision{kind: fail, reason: mlv1.ReasonBackoffLimitExceeded,
			message: fmt.Sprintf("%s; backoffLimit %d reached after %d restarts", what, spec.EffectiveBackoffLimit(), job.Status.Restarts)}, true
	}
	return decision{kind: restartForFailure, reason: mlv1.ReasonStalled, message: what}, true
}

// stallMessage says what was seen: which value stood still, since when and
// for how long.
func stallMessage(job *mlv1.TrainingJob, w StallWatch) string {
	return fmt.Sprintf("rank 0 (pod %s) made no progress for %s (stallTimeout %s): %s has been %s since %s",
		mlv1.WorkerPodName(job.Name, 0), w.Unchanged().Round(time.Second), job.Spec.EffectiveStallTimeout(),
		w.Metric, strconv.FormatFloat(w.Value, 'f', -1, 64), w.Since.UTC().Format(time.RFC3339))
}

// stalledCondition is the Stalled condition of a job whose stall was
// decided: True, with what was seen.
func stalledCondition(job *mlv1.TrainingJob, message string) metav1.Condition {
	return metav1.Condition{Type: mlv1.TrainingJobStalled, Status: metav1.ConditionTrue, Reason: mlv1.ReasonStalled,
		Message: message, ObservedGeneration: job.Generation}
}

// progressingCondition is the Stalled condition of a job whose current
// attempt's rank 0 reports progress within the stall timeout.
func progressingCondition(job *mlv1.TrainingJob, w StallWatch) metav1.Condition {
	return metav1.Condition{Type: mlv1.TrainingJobStalled, Status: metav1.ConditionFalse, Reason: mlv1.ReasonProgressing,
		Message: fmt.Sprintf("rank 0 reports %s %s (attempt %d); stallTimeout %s", w.Metric,
			strconv.FormatFloat(w.Value, 'f', -1, 64), w.Attempt, job.Spec.EffectiveStallTimeout()),
		ObservedGeneration: job.Generation}
}

// markProgressing sets Stalled=False once the current attempt's rank 0
// shows progress, on a job that watches for stalls and has no Stalled=False
// yet (a job that stalled keeps Stalled=True until its next attempt
// reports). The condition's message is written once, not per scrape.
func markProgressing(job *mlv1.TrainingJob, w StallWatch, now time.Time) {
	st := &job.Status
	if job.Spec.EffectiveStallTimeout() <= 0 || w.Since.IsZero() || w.Attempt != st.Attempt() ||
		Stalled(w, st.Attempt(), job.Spec.EffectiveStallTimeout()) {
		return
	}
	if c := meta.FindStatusCondition(st.Conditions, mlv1.TrainingJobStalled); c != nil && c.Status == metav1.ConditionFalse {
		return
	}
	setCondition(st, progressingCondition(job, w), metav1.NewTime(now))
}

// watchProgress records a successful scrape in the job's stall watch and
// returns the watch.
func (t *scrapeTracker) watchProgress(key types.NamespacedName, attempt int32, r progress.Report, at time.Time) (StallWatch, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.entries[key]
	w, ok := WatchProgress(e.stall, attempt, r, at)
	e.stall = w
	t.entries[key] = e
	return w, ok
}

// stallWatch is the job's stall watch (zero when none).
func (t *scrapeTracker) stallWatch(key types.NamespacedName) StallWatch {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.entries[key].stall
}
