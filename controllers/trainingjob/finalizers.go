package trainingjob

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

// finalize is the pass over a job being deleted: it ends the job's open
// MLflow run and releases the finalizers. The garbage collector deletes the
// children.
func (r *Reconciler) finalize(ctx context.Context, p *pass) error {
	if err := r.endDeletedMLflowRun(ctx, p); err != nil {
		return err
	}
	return r.releaseFinalizer(ctx, p.job)
}

// releaseFinalizer removes the finalizers this controller does not need:
// its own earlier cleanup finalizer (the garbage collector removes every
// child through owner references, and a retained PVC has none) and the Go
// operator lab's (mlv1.LabFinalizer). Jobs that still carry one (set by an
// earlier version, the lab's operator or by hand) must not hang in
// deletion.
func (r *Reconciler) releaseFinalizer(ctx context.Context, job *mlv1.TrainingJob) error {
	if !controllerutil.ContainsFinalizer(job, mlv1.TrainingJobFinalizer) && !controllerutil.ContainsFinalizer(job, mlv1.LabFinalizer) {
		return nil
	}
	orig := job.DeepCopy()
	controllerutil.RemoveFinalizer(job, mlv1.TrainingJobFinalizer)
	controllerutil.RemoveFinalizer(job, mlv1.LabFinalizer)
	if err := r.client.Patch(ctx, job, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("removing finalizer: %w", err)
	}
	return nil
}

// setFinalizer adds or removes a finalizer with a patch of a copy (the patch
// response must not overwrite the status this pass computed), then takes
// the new resourceVersion and finalizers over, so the status write that
// follows is not refused as a conflict.
func (r *Reconciler) setFinalizer(ctx context.Context, job *mlv1.TrainingJob, finalizer string, present bool) error {
	orig := job.DeepCopy()
	cp := job.DeepCopy()
	if present {
		controllerutil.AddFinalizer(cp, finalizer)
	} else {
		controllerutil.RemoveFinalizer(cp, finalizer)
	}
	if err := r.client.Patch(ctx, cp, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		if !present && apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("patching finalizer %s: %w", finalizer, err)
	}
	job.ResourceVersion, job.Finalizers = cp.ResourceVersion, cp.Finalizers
	return nil
}
