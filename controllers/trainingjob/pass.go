package trainingjob

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

// pass is one reconcile of one job: what it decided to tell people and when
// it must look again.
type pass struct {
	job       *mlv1.TrainingJob
	now       time.Time
	events    []jobEvent
	after     []func()
	requeueAt time.Time
	// silent drops the pass's events: its namespace is being deleted and
	// the API server would refuse them.
	silent bool
}

// jobEvent is an event to emit on the job once its status is written.
type jobEvent struct {
	eventType, reason, note string
	// action marks an event about something done on the API server (pods
	// created, force-deleted), which a later pass does not do again: it is
	// emitted even when the pass's status write is lost or the pass fails.
	action bool
}

// event records an event about the status this pass writes: emitted only
// once that write lands (a lost pass is redone, and decides it again).
func (p *pass) event(eventType, reason, note string, args ...any) {
	p.events = append(p.events, jobEvent{eventType: eventType, reason: reason, note: fmt.Sprintf(note, args...)})
}

// actionEvent records an event about something this pass did.
func (p *pass) actionEvent(eventType, reason, note string, args ...any) {
	p.events = append(p.events, jobEvent{eventType: eventType, reason: reason, note: fmt.Sprintf(note, args...), action: true})
}

// emit sends the pass's events: all of them once its status write landed,
// and otherwise only those about actions done.
func (r *Reconciler) emit(p *pass, written bool) {
	if p.silent {
		return
	}
	for _, e := range p.events {
		if written || e.action {
			r.recorder.Eventf(p.job, nil, e.eventType, e.reason, e.reason, "%s", e.note)
		}
	}
}

// requeue asks for another pass at t (the earliest of all asks wins).
func (p *pass) requeue(t time.Time) {
	if t.IsZero() {
		return
	}
	if p.requeueAt.IsZero() || t.Before(p.requeueAt) {
		p.requeueAt = t
	}
}

func (p *pass) result() ctrl.Result {
	if p.requeueAt.IsZero() {
		return ctrl.Result{}
	}
	d := p.requeueAt.Sub(p.now)
	if d < time.Second {
		d = time.Second
	}
	return ctrl.Result{RequeueAfter: d}
}

// reconcile is one pass over a job.
func (r *Reconciler) reconcile(ctx context.Context, p *pass) error {
	job := p.job
	if job.DeletionTimestamp != nil {
		if err := r.endDeletedMLflowRun(ctx, p); err != nil {
			return err
		}
		return r.releaseFinalizer(ctx, job)
	}
	st := &job.Status
	st.ObservedGeneration = job.Generation
	if total := job.Spec.TotalEpochs(); total > 0 {
		st.TotalEpochs = total
	}
	if st.State == "" {
		// A new job is first recorded as Pending (seen, nothing created);
		// that status write triggers the pass that creates its children.
		st.State = mlv1.StatePending
		if job.Spec.EffectiveImage(r.cfg.DefaultImages) != "" {
			return nil
		}
	}

	pods, err := r.listPods(ctx, job)
	if err != nil {
		return err
	}
	nodes, err := r.nodeInfos(ctx, pods)
	if err != nil {
		return err
	}
	// Whatever deleted them (a restart, suspend, cleanup or someone else),
	// pods stuck Terminating on a lost node must not block the job.
	if err := r.forceDeleteStuck(ctx, p, pods, nodes); err != nil {
		return err
	}
	if st.State.IsFinished() {
		return r.reconcileFinished(ctx, p, pods)
	}
	// Below, a pass that finishes the job only records it: cleanup happens in
	// the pass its status write triggers. Deleting pods first and then losing
	// the write would make the next pass read the deletions as a disruption.
	if job.Spec.EffectiveImage(r.cfg.DefaultImages) == "" {
		r.finish(p, mlv1.StateFailed, mlv1.ReasonInvalidSpec, fmt.Sprintf(
			"spec.image: Required value: no image given and the operator has no default image for framework %q",
			job.Spec.EffectiveFramework()))
		return nil
	}
	if d := job.Spec.RunPolicy.ActiveDeadlineSeconds; d != nil && st.StartTime != nil {
		deadline := st.StartTime.Add(time.Duration(*d) * time.Second)
		if !p.now.Before(deadline) {
			r.finish(p, mlv1.StateFailed, mlv1.ReasonDeadlineExceeded, fmt.Sprintf(
				"spec.runPolicy.activeDeadlineSeconds: the job ran longer than %ds (started %s)", *d, st.StartTime.UTC().Format(time.RFC3339)))
			return nil
		}
		p.requeue(deadline)
	}

	if err := r.ensureResources(ctx, p); err != nil {
		return err
	}
	if job.Spec.IsSuspended() {
		return r.reconcileSuspended(ctx, p, pods)
	}
	if st.State == mlv1.StateSuspended {
		for _, pod := range pods {
			// Resumed before the suspended gang was gone: wait for it, so the
			// new gang never meets the old one; its deletion requeues. A pod
			// neither deleted nor being deleted was created by a resume pass
			// whose status write failed: it belongs to the new gang.
			if pod.DeletionTimestamp != nil || r.expect.pendingDelete(job.UID, pod.UID, p.now) {
				return nil
			}
		}
		st.State = mlv1.StatePending
		setCondition(st, suspendedCondition(job, false), metav1.NewTime(p.now))
		p.event(corev1.EventTypeNormal, mlv1.EventResumed, "spec.suspend is false: recreating the gang (attempt %d)", st.Attempt())
	}

	attempt := st.Attempt()
	var current, ps, stale []*corev1.Pod
	for _, pod := range pods {
		switch {
		case attemptOf(pod) != attempt:
			stale = append(stale, pod)
		case isPS(pod):
			ps = append(ps, pod)
		default:
			current = append(current, pod)
		}
	}
	if err := r.deletePods(ctx, job, stale, p.now); err != nil {
		return err
	}

	// A rank created by an earlier pass that the cache does not show yet was
	// not deleted: it just has not arrived.
	seen := seenRanks(st)
	for rank := range seen {
		if r.expect.pendingCreate(job.UID, createKey(mlv1.WorkerPodName(job.Name, rank), attempt), p.now) {
			delete(seen, rank)
		}
	}
	d := decide(gangState{job: job, pods: current, ps: ps, nodes: nodes, seenRanks: seen,
		now: p.now, nodeGrace: r.cfg.NodeLostGracePeriod})
	switch d.kind {
	case complete:
		observeWorkers(st, current, job.Spec.EffectiveGPUResourceName())
		r.finish(p, mlv1.StateCompleted, d.reason, d.message)
		return nil
	case fail:
		observeWorkers(st, current, job.Spec.EffectiveGPUResourceName())
		r.finish(p, mlv1.StateFailed, d.reason, d.message)
		return nil
	case restartForFailure, restartForDisruption:
		// Only the decision is written in this pass. The status write moves
		// the job to the next attempt, and the pass it triggers deletes the
		// old gang: a failed write never leaves a deleted gang uncounted.
		r.restart(p, d)
		return nil
	}
	p.requeue(d.recheckAt)

	if len(stale) > 0 {
		// The old attempt's pods are still going; their deletion requeues.
		st.WorkerStatuses, st.Workers = nil, mlv1.WorkerCounts{}
		return nil
	}
	if st.State == mlv1.StateRestarting {
		if wait := r.backoffUntil(job); p.now.Before(wait) {
			p.requeue(wait)
			return nil
		}
	}
	inFlight, err := r.createMissing(ctx, p, current, ps, attempt)
	if err != nil {
		return err
	}
	// Count pods the API server has but the cache does not show yet, so the
	// pass that sees them arrive has nothing new to write.
	observeWorkers(st, append(current, inFlight...), job.Spec.EffectiveGPUResourceName())
	r.updateActiveState(p, current)
	r.ensureMLflowRun(ctx, p)
	if st.State == mlv1.StateRunning {
		r.scrapeProgress(ctx, p, current)
	}
	return nil
}
