package trainingjob

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

// reconcileSuspended deletes the gang and keeps everything else.
func (r *Reconciler) reconcileSuspended(ctx context.Context, p *pass, pods []*corev1.Pod) error {
	job, st := p.job, &p.job.Status
	if err := r.deletePods(ctx, job, pods, p.now); err != nil {
		return err
	}
	st.WorkerStatuses, st.Workers = nil, mlv1.WorkerCounts{}
	st.AllocatedGPUs, st.AllocatedNodes = 0, 0
	if st.State != mlv1.StateSuspended {
		now := metav1.NewTime(p.now)
		st.State = mlv1.StateSuspended
		setCondition(st, suspendedCondition(job, true), now)
		setCondition(st, runningCondition(job), now)
		p.event(corev1.EventTypeNormal, mlv1.EventSuspended, "spec.suspend is true: deleted %d pods; Service, ConfigMap and checkpoints kept", len(pods))
	}
	return nil
}
