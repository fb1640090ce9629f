package trainingjob

import (
	"context"
	"errors"

	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/ml-operator/ml-operator/controllers/namespaces"
)

// errNamespaceTerminating ends a pass in a namespace being deleted. Such a
// pass writes no status, emits no event, counts no error and is not
// retried: the namespace controller deletes the job's pods and then the
// job, and the job's deletion brings the pass that does its finalizer work.
var errNamespaceTerminating = errors.New("the namespace is being deleted")

// reconcileUnlessNamespaceTerminating runs the pass unless the job's
// namespace is being deleted. There, a job not (yet) being deleted is left
// alone: a pass would read its deleted pods as a disruption and create them
// again, which the API server refuses. A job being deleted there still does
// its finalizer work (the MLflow run, the legacy finalizer), silently: the
// API server would refuse its events too. A create refused for a namespace
// being deleted (the cache had not seen it yet) ends the pass the same way.
func (r *Reconciler) reconcileUnlessNamespaceTerminating(ctx context.Context, p *pass) error {
	terminating, err := namespaces.Terminating(ctx, r.client, p.job.Namespace)
	if err != nil {
		return err
	}
	if terminating {
		p.silent = true
		if p.job.DeletionTimestamp == nil {
			return errNamespaceTerminating
		}
	}
	err = r.reconcile(ctx, p)
	if namespaces.Refused(err) {
		log.FromContext(ctx).V(1).Info("the namespace is being deleted: the pass ends without creating anything", "refusal", err.Error())
		return errNamespaceTerminating
	}
	return err
}
