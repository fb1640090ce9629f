package manager

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/ml-operator/ml-operator/controllers/trainingjob"
)

// setupTrainingJob registers the TrainingJob controller.
func setupTrainingJob(mgr ctrl.Manager, opts *Options) error {
	return trainingjob.Setup(context.Background(), mgr, trainingjob.Config{
		DefaultImages:           opts.DefaultImages,
		GPUNodeSelector:         opts.GPUNodeSelector,
		MaxConcurrentReconciles: opts.MaxConcurrentReconciles,
	})
}
