package trainingjob

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

// failUnrunnable fails a job that cannot run as written (no image) or ran
// past runPolicy.activeDeadlineSeconds, and otherwise asks for a pass at the
// deadline. It reports whether it failed the job.
func (r *Reconciler) failUnrunnable(p *pass) bool {
	job, st := p.job, &p.job.Status
	if job.Spec.EffectiveImage(r.cfg.DefaultImages) == "" {
		r.finish(p, mlv1.StateFailed, mlv1.ReasonInvalidSpec, fmt.Sprintf(
			"spec.image: Required value: no image given and the operator has no default image for framework %q",
			job.Spec.EffectiveFramework()))
		return true
	}
	if d := job.Spec.RunPolicy.ActiveDeadlineSeconds; d != nil && st.StartTime != nil {
		deadline := st.StartTime.Add(time.Duration(*d) * time.Second)
		if !p.now.Before(deadline) {
			r.finish(p, mlv1.StateFailed, mlv1.ReasonDeadlineExceeded, fmt.Sprintf(
				"spec.runPolicy.activeDeadlineSeconds: the job ran longer than %ds (started %s)", *d, st.StartTime.UTC().Format(time.RFC3339)))
			return true
		}
		p.requeue(deadline)
	}
	return false
}

// finish moves the job to Completed or Failed.
func (r *Reconciler) finish(p *pass, state mlv1.TrainingJobState, reason, message string) {
	job, st := p.job, &p.job.Status
	now := metav1.NewTime(p.now)
	st.State = state
	st.CompletionTime = &now
	st.Duration = runDuration(st)
	if state == mlv1.StateCompleted {
		setCondition(st, succeededCondition(job, reason, message), now)
		if st.TotalEpochs > 0 {
			st.CurrentEpoch = st.TotalEpochs
			st.Progress = "100%"
		}
		p.event(corev1.EventTypeNormal, mlv1.EventCompleted, "%s", message)
	} else {
		setCondition(st, failedCondition(job, reason, message), now)
		p.event(corev1.EventTypeWarning, mlv1.EventFailed, "%s: %s", reason, message)
	}
	if c := meta.FindStatusCondition(st.Conditions, mlv1.TrainingJobRestarting); c != nil && c.Status == metav1.ConditionTrue {
		setCondition(st, metav1.Condition{Type: mlv1.TrainingJobRestarting, Status: metav1.ConditionFalse,
			Reason: mlv1.ReasonJobFinished, Message: "the job finished", ObservedGeneration: job.Generation}, now)
	}
	setCondition(st, runningCondition(job), now)
	ns := job.Namespace
	var started time.Time
	if st.StartTime != nil {
		started = st.StartTime.Time
	}
	p.after = append(p.after, func() {
		if state == mlv1.StateCompleted {
			jobsCompleted.WithLabelValues(ns, ns).Inc()
		} else {
			jobsFailed.WithLabelValues(ns, ns, reason).Inc()
		}
		if !started.IsZero() {
			jobDuration.WithLabelValues(ns, ns, string(state)).Observe(p.now.Sub(started).Seconds())
		}
	})
}

// cleanUpFinished ends the MLflow run of a finished job and applies
// cleanPodPolicy and ttlSecondsAfterFinished. It runs in the passes after
// the one that finished the job: deleting pods first and then losing that
// status write would make the next pass read the deletions as a
// disruption.
func (r *Reconciler) cleanUpFinished(ctx context.Context, p *pass, pods []*corev1.Pod) error {
	job := p.job
	r.endMLflowRun(ctx, p)
	var doomed []*corev1.Pod
	for _, pod := range pods {
		if finishedJobDeletes(job.Spec.EffectiveCleanPodPolicy(), pod) {
			doomed = append(doomed, pod)
		}
	}
	if err := r.deletePods(ctx, job, doomed, p.now); err != nil {
		return err
	}
	if ttl := job.Spec.RunPolicy.TTLSecondsAfterFinished; ttl != nil && job.Status.CompletionTime != nil {
		expiry := job.Status.CompletionTime.Add(time.Duration(*ttl) * time.Second)
		if p.now.Before(expiry) {
			p.requeue(expiry)
			return nil
		}
		log.FromContext(ctx).Info("deleting finished job after ttlSecondsAfterFinished", "ttl", *ttl)
		err := r.client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground),
			client.Preconditions{UID: &job.UID})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting job after its TTL: %w", err)
		}
	}
	return nil
}

// finishedJobDeletes reports whether a finished job's pod goes, under the
// job's cleanPodPolicy. Parameter servers never exit by themselves, so a
// live one goes under every policy, None included: kept, it would hold its
// node's resources for ever.
func finishedJobDeletes(policy mlv1.CleanPodPolicy, pod *corev1.Pod) bool {
	switch {
	case policy == mlv1.CleanPodPolicyAll:
		return true
	case policy == mlv1.CleanPodPolicyRunning, isPS(pod):
		return !isTerminal(pod)
	}
	return false
}

// runDuration is status.duration: from startTime to completionTime, in whole
// seconds; nil until both are known (a job refused before it started has no
// start).
func runDuration(st *mlv1.TrainingJobStatus) *metav1.Duration {
	if st.StartTime == nil || st.CompletionTime == nil {
		return nil
	}
	d := st.CompletionTime.Sub(st.StartTime.Time).Truncate(time.Second)
	return &metav1.Duration{Duration: max(0, d)}
}
