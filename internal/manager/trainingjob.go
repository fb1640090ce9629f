package manager

import (
	"context"
	"fmt"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/controllers/trainingjob"
	"github.com/ml-operator/ml-operator/internal/integrations/mlflow"
	"github.com/ml-operator/ml-operator/internal/integrations/progress"
	"github.com/ml-operator/ml-operator/internal/netguard"
)

// setupTrainingJob registers the TrainingJob controller.
func setupTrainingJob(mgr ctrl.Manager, opts *Options) error {
	if d := opts.PlacementTimeout; d != 0 && (d < mlv1.MinPlacementTimeout || d > mlv1.MaxPlacementTimeout) {
		return fmt.Errorf("--placement-timeout %s: must be 0 (never) or between %s and %s", d, mlv1.MinPlacementTimeout, mlv1.MaxPlacementTimeout)
	}
	scraper := progress.NewHTTPScraper()
	scraper.Client.Transport = netguard.Transport(opts.DialLoopbackOnly, 2*time.Second, false)
	tracking := mlflow.NewHTTPClient()
	tracking.Client.Transport = netguard.Transport(opts.DialLoopbackOnly, 2*time.Second, true)
	cfg := trainingjob.Config{
		DefaultImages:           opts.DefaultImages,
		DefaultCommands:         opts.DefaultCommands,
		GPUNodeSelector:         opts.GPUNodeSelector,
		PodSecurity:             opts.PodSecurity,
		MaxConcurrentReconciles: opts.MaxConcurrentReconciles,
		Scraper:                 scraper,
		MLflow:                  tracking,
		PlacementTimeout:        opts.PlacementTimeout,
	}
	if opts.PrometheusURL != "" {
		src, err := prometheusSource(opts)
		if err != nil {
			return err
		}
		cfg.DCGM = src
	}
	return trainingjob.Setup(context.Background(), mgr, cfg)
}
