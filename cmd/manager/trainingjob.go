package manager

import ctrl "sigs.k8s.io/controller-runtime"

// setupTrainingJob registers the TrainingJob controller.
func setupTrainingJob(mgr ctrl.Manager, opts *Options) error {
	return nil
}
