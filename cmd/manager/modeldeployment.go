package manager

import ctrl "sigs.k8s.io/controller-runtime"

// setupModelDeployment registers the ModelDeployment controller.
func setupModelDeployment(mgr ctrl.Manager, opts *Options) error {
	return nil
}
