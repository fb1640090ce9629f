package manager

import (
	"context"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/ml-operator/ml-operator/controllers/trainingjob"
	"github.com/ml-operator/ml-operator/internal/integrations/mlflow"
	"github.com/ml-operator/ml-operator/internal/integrations/progress"
	"github.com/ml-operator/ml-operator/internal/netguard"
)

// setupTrainingJob registers the TrainingJob controller.
func setupTrainingJob(mgr ctrl.Manager, opts *Options) error {
	scraper := progress.NewHTTPScraper()
	scraper.Client.Transport = netguard.Transport(opts.DialLoopbackOnly, 2*time.Second, false)
	tracking := mlflow.NewHTTPClient()
	tracking.Client.Transport = netguard.Transport(opts.DialLoopbackOnly, 2*time.Second, true)
	return trainingjob.Setup(context.Background(), mgr, trainingjob.Config{
		DefaultImages:           opts.DefaultImages,
		GPUNodeSelector:         opts.GPUNodeSelector,
		PodSecurity:             opts.PodSecurity,
		MaxConcurrentReconciles: opts.MaxConcurrentReconciles,
		Scraper:                 scraper,
		MLflow:                  tracking,
	})
}
