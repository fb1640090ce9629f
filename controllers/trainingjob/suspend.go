package trainingjob

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

// suspend deletes the gang of a job with spec.suspend and keeps everything
// else (Service, ConfigMap, checkpoints).
func (r *Reconciler) suspend(ctx context.Context, p *pass, pods []*corev1.Pod) error {
	job, st := p.job, &p.job.Status
	if err := r.deletePods(ctx, job, pods, p.now); err != nil {
		return err
	}
	st.WorkerStatuses, st.Workers = nil, mlv1.WorkerCounts{}
	st.AllocatedGPUs, st.AllocatedNodes = 0, 0
	st.PlacementStartTime = nil
	if st.State != mlv1.StateSuspended {
		now := metav1.NewTime(p.now)
		st.State = mlv1.StateSuspended
		setCondition(st, suspendedCondition(job, true), now)
		setCondition(st, runningCondition(job), now)
		p.event(corev1.EventTypeNormal, mlv1.EventSuspended, "spec.suspend is true: deleted %d pods; Service, ConfigMap and checkpoints kept", len(pods))
	}
	return nil
}

// resume moves a job whose spec.suspend went back to false from Suspended
// to Pending, once the suspended gang is gone, so the new gang never meets
// the old one. It reports whether the pass goes on: while old pods remain
// it ends, and their deletion requeues.
func (r *Reconciler) resume(p *pass, pods []*corev1.Pod) bool {
	job, st := p.job, &p.job.Status
	if st.State != mlv1.StateSuspended {
		return true
	}
	for _, pod := range pods {
		// A pod neither deleted nor being deleted was created by a resume
		// pass whose status write failed: it belongs to the new gang.
		if pod.DeletionTimestamp != nil || r.expect.pendingDelete(job.UID, pod.UID, p.now) {
			return false
		}
	}
	st.State = mlv1.StatePending
	setCondition(st, suspendedCondition(job, false), metav1.NewTime(p.now))
	p.event(corev1.EventTypeNormal, mlv1.EventResumed, "spec.suspend is false: recreating the gang (attempt %d)", st.Attempt())
	return true
}
