package trainingjob

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/internal/eventnote"
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
	// refusedPods is the API server's answer to a pod create it refused in
	// this pass (empty when none was).
	refusedPods string
	// shareNode says the gang's checkpoint claim is one no two nodes may
	// mount, so every pod runs on rank 0's node (ensureResources).
	shareNode bool
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
			r.recorder.Eventf(p.job, nil, e.eventType, e.reason, e.reason, "%s", eventnote.Fit(e.note))
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

// reconcile is one pass over a job, in named steps. A job being deleted
// only does its finalizer work, and a new job is only recorded. Otherwise
// the pass observes the job's pods and their nodes; handles the states that
// need no decision about the gang (finished, unrunnable, suspended,
// resuming); decides what the current attempt's pods mean; and acts on it.
func (r *Reconciler) reconcile(ctx context.Context, p *pass) error {
	if p.job.DeletionTimestamp != nil {
		return r.finalize(ctx, p)
	}
	if r.recordSpec(p) {
		return nil
	}
	obs, err := r.observe(ctx, p)
	if err != nil {
		return err
	}
	if p.job.Status.State.IsFinished() {
		return r.cleanUpFinished(ctx, p, obs.pods)
	}
	if r.failUnrunnable(p) {
		return nil
	}
	if refused, err := r.ensureResources(ctx, p); err != nil || refused {
		return err
	}
	if p.job.Spec.IsSuspended() {
		return r.suspend(ctx, p, obs.pods)
	}
	if !r.resume(p, obs.pods) {
		return nil
	}
	g := splitByAttempt(obs.pods, p.job.Status.Attempt())
	if err := r.deleteStale(ctx, p.job, g, p.now); err != nil {
		return err
	}
	if err := r.observePlacement(ctx, p); err != nil {
		return err
	}
	if r.act(p, decide(r.gangState(p, g, obs.nodes)), g) {
		return nil
	}
	return r.runGang(ctx, p, g)
}

// recordSpec notes the generation and the total epochs the pass works
// from. A new job is first only recorded as Pending (seen, nothing
// created): that status write triggers the pass that creates its children.
// It reports whether the pass ends there; a new job without an image goes
// on, to be failed.
func (r *Reconciler) recordSpec(p *pass) (recordedOnly bool) {
	job, st := p.job, &p.job.Status
	st.ObservedGeneration = job.Generation
	if total := job.Spec.TotalEpochs(); total > 0 {
		st.TotalEpochs = total
	}
	if st.State != "" {
		return false
	}
	st.State = mlv1.StatePending
	return job.Spec.EffectiveImage(r.cfg.DefaultImages) != ""
}

// act carries out a decision that ends the pass: the job completes or
// fails, or the gang restarts. Only the decision is written in this pass:
// the status write moves the job on, and the pass it triggers deletes the
// pods, so a lost write never leaves a deleted gang uncounted. To keep
// going, act only asks for a look again when a node's grace period ends,
// and reports false.
func (r *Reconciler) act(p *pass, d decision, g attemptPods) (ended bool) {
	gpus := p.job.Spec.EffectiveGPUResourceName()
	if d.stalled {
		setCondition(&p.job.Status, stalledCondition(p.job, d.message), metav1.NewTime(p.now))
	}
	switch d.kind {
	case complete:
		observeWorkers(&p.job.Status, g.current, gpus)
		r.finish(p, mlv1.StateCompleted, d.reason, d.message)
		return true
	case fail:
		observeWorkers(&p.job.Status, g.current, gpus)
		r.finish(p, mlv1.StateFailed, d.reason, d.message)
		return true
	case restartForFailure, restartForDisruption, restartForPlacement:
		r.restart(p, d)
		return true
	}
	p.requeue(d.recheckAt)
	return false
}
