package trainingjob

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

// backoffFor is the wait before the gang of the nth failure restart is
// created: base doubling per restart, capped. Disruptions wait nothing.
func backoffFor(restarts int32, base, maxBackoff time.Duration) time.Duration {
	if restarts <= 0 {
		return 0
	}
	d := base
	for i := int32(1); i < restarts; i++ {
		d *= 2
		if d >= maxBackoff {
			return maxBackoff
		}
	}
	if d > maxBackoff {
		return maxBackoff
	}
	return d
}

// backoffUntil is when the gang of the current attempt may be created: after
// a failure, the exponential backoff from the restart; after a placement
// timeout, the same backoff counted in placement timeouts (so a gang that
// does not fit is retried ever less often, up to BackoffMax); after a
// disruption, at once.
func (r *Reconciler) backoffUntil(job *mlv1.TrainingJob) time.Time {
	st := &job.Status
	c := meta.FindStatusCondition(st.Conditions, mlv1.TrainingJobRestarting)
	if st.LastRestartTime == nil || c == nil {
		return time.Time{}
	}
	switch c.Reason {
	case mlv1.ReasonWorkerFailed:
		return st.LastRestartTime.Add(backoffFor(st.Restarts, r.cfg.BackoffBase, r.cfg.BackoffMax))
	case mlv1.ReasonStalled:
		// A stall counted as a failure waits like one; an uncounted one
		// (stallAction RestartUncounted) like a disruption.
		if job.Spec.EffectiveStallAction() == mlv1.StallActionRestart {
			return st.LastRestartTime.Add(backoffFor(st.Restarts, r.cfg.BackoffBase, r.cfg.BackoffMax))
		}
	case mlv1.ReasonPlacementTimeout:
		return st.LastRestartTime.Add(backoffFor(st.PlacementTimeouts, r.cfg.BackoffBase, r.cfg.BackoffMax))
	}
	return time.Time{}
}

// restart records a gang restart: the counters move the job to the next
// attempt, whose label no current pod carries.
func (r *Reconciler) restart(p *pass, d decision) {
	job, st := p.job, &p.job.Status
	kind := "disruption"
	switch d.kind {
	case restartForFailure:
		st.Restarts++
		kind = "failure"
	case restartForPlacement:
		st.PlacementTimeouts++
		kind = "placement timeout"
	default:
		st.Disruptions++
	}
	if d.workers > 0 {
		// An elastic gang shrinks or grows: the next attempt's size.
		kind = "resize"
		st.WorldSize = &mlv1.WorldSize{Current: d.workers, Desired: job.Spec.EffectiveNumWorkers()}
	}
	now := metav1.NewTime(p.now)
	st.LastRestartTime = &now
	st.State = mlv1.StateRestarting
	st.PlacementStartTime = nil
	st.WorkerStatuses, st.Workers = nil, mlv1.WorkerCounts{}
	st.AllocatedGPUs, st.AllocatedNodes = 0, 0
	setCondition(st, restartingCondition(job, d.reason, d.message), now)
	setCondition(st, runningCondition(job), now)
	msg := fmt.Sprintf("gang restart for a %s: %s (restarts %d/%d, disruptions %d, placement timeouts %d; next attempt %d)",
		kind, d.message, st.Restarts, job.Spec.EffectiveBackoffLimit(), st.Disruptions, st.PlacementTimeouts, st.Attempt())
	eventType := corev1.EventTypeNormal
	switch d.kind {
	case restartForFailure:
		msg += fmt.Sprintf(", backoff %s", backoffFor(st.Restarts, r.cfg.BackoffBase, r.cfg.BackoffMax))
		eventType = corev1.EventTypeWarning
	case restartForPlacement:
		msg += fmt.Sprintf(", backoff %s", backoffFor(st.PlacementTimeouts, r.cfg.BackoffBase, r.cfg.BackoffMax))
		eventType = corev1.EventTypeWarning
	}
	if d.stalled {
		// A hung gang burned its GPUs until now: always worth a look.
		eventType = corev1.EventTypeWarning
	}
	p.event(eventType, d.reason, "%s", msg)
	ns, reason := job.Namespace, d.reason
	p.after = append(p.after, func() { jobRestarts.WithLabelValues(ns, ns, reason).Inc() })
}
