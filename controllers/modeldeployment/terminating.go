package modeldeployment

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/controllers/namespaces"
)

// leftToNamespaceDeletion reports a ModelDeployment whose namespace is being
// deleted. Its pass is skipped: the namespace controller deletes its
// Deployments, Services and HPAs and then the ModelDeployment, and a pass
// would apply them again, which the API server refuses. Nothing is written,
// emitted, counted or retried; the ModelDeployment's own deletion is the
// next thing to reconcile.
func (r *Reconciler) leftToNamespaceDeletion(ctx context.Context, md *mlv1.ModelDeployment) (bool, error) {
	return namespaces.Terminating(ctx, r.Client, md.Namespace)
}

// refusedInTerminatingNamespace reports a pass that ended on the API
// server's refusal to create in a namespace being deleted (the cache had
// not seen the deletion yet): like a skipped pass, it is not an error.
func refusedInTerminatingNamespace(ctx context.Context, err error) bool {
	if !namespaces.Refused(err) {
		return false
	}
	ctrl.LoggerFrom(ctx).V(1).Info("the namespace is being deleted: the pass ends without creating anything", "refusal", err.Error())
	return true
}
