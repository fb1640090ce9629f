package trainingjob

import (
	"context"
	"time"

	"k8s.io/utils/clock"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/internal/integrations/mlflow"
	"github.com/ml-operator/ml-operator/internal/integrations/progress"
	"github.com/ml-operator/ml-operator/internal/podsecurity"
)

// Config is the admin's configuration of the TrainingJob controller.
type Config struct {
	// DefaultImages are the worker images per framework for jobs that name none.
	DefaultImages map[string]string
	// DefaultCommands are the launch commands per framework for jobs that
	// name no command and no args (mlv1.LaunchTemplate). A framework
	// without one, or with an empty one, runs the image's entrypoint.
	DefaultCommands map[string]mlv1.LaunchTemplate
	// GPUNodeSelector is added to the node selector of GPU workers.
	GPUNodeSelector map[string]string
	// PodSecurity are the security defaults of worker pods whose template
	// sets no security context, and their writable HOME.
	PodSecurity podsecurity.Defaults
	// Clock is the time source of every decision; tests inject a fake one.
	Clock clock.Clock
	// MaxConcurrentReconciles is the number of jobs reconciled at once.
	MaxConcurrentReconciles int
	// CreateParallelism bounds the pod creations in flight for one job.
	CreateParallelism int
	// BackoffBase and BackoffMax shape the wait before a restarted gang is
	// created: BackoffBase doubling per restart, capped at BackoffMax.
	BackoffBase, BackoffMax time.Duration
	// NodeLostGracePeriod is how long a NotReady node is waited for before its
	// pods count as disrupted and pods stuck Terminating on it are force-deleted.
	NodeLostGracePeriod time.Duration
	// ScrapeInterval is the minimum time between two reads of rank 0's metrics.
	ScrapeInterval time.Duration
	// ScrapeBackoffMax caps the wait between failing scrapes.
	ScrapeBackoffMax time.Duration
	// Scraper reads rank 0's progress.
	Scraper progress.Scraper
	// DCGM, when set, reads a job's GPU utilization from NVIDIA's DCGM
	// exporter (through Prometheus) at each scrape of rank 0; its answer
	// wins over rank 0's own gauge.
	DCGM GPUMeter
	// MLflow is the MLflow tracking client, for jobs with spec.tracking.mlflow.
	MLflow mlflow.Client
	// PlacementTimeout is the placement timeout of jobs that set no
	// spec.scheduling.placementTimeout; 0 means never (placement.go).
	PlacementTimeout time.Duration
	// StatusBatchPeriod is how long a status change that only moves the
	// worker counters may wait, so a gang's pod events share one write.
	StatusBatchPeriod time.Duration
}

// Defaults of Config.
const (
	DefaultBackoffBase         = 10 * time.Second
	DefaultBackoffMax          = 5 * time.Minute
	DefaultNodeLostGracePeriod = 2 * time.Minute
	DefaultScrapeInterval      = 15 * time.Second
	DefaultScrapeBackoffMax    = 5 * time.Minute
	DefaultCreateParallelism   = 16
	// DefaultPlacementTimeout is the manager's --placement-timeout default;
	// a Config without one releases no gang unless the job sets a timeout.
	DefaultPlacementTimeout = 10 * time.Minute
)

func (c Config) withDefaults() Config {
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.MaxConcurrentReconciles < 1 {
		c.MaxConcurrentReconciles = 1
	}
	if c.CreateParallelism < 1 {
		c.CreateParallelism = DefaultCreateParallelism
	}
	if c.BackoffBase <= 0 {
		c.BackoffBase = DefaultBackoffBase
	}
	if c.BackoffMax <= 0 {
		c.BackoffMax = DefaultBackoffMax
	}
	if c.NodeLostGracePeriod <= 0 {
		c.NodeLostGracePeriod = DefaultNodeLostGracePeriod
	}
	if c.ScrapeInterval <= 0 {
		c.ScrapeInterval = DefaultScrapeInterval
	}
	if c.ScrapeBackoffMax <= 0 {
		c.ScrapeBackoffMax = DefaultScrapeBackoffMax
	}
	if c.Scraper == nil {
		c.Scraper = progress.NewHTTPScraper()
	}
	if c.MLflow == nil {
		c.MLflow = mlflow.NewHTTPClient()
	}
	if c.StatusBatchPeriod <= 0 {
		c.StatusBatchPeriod = DefaultStatusBatchPeriod
	}
	return c
}

// GPUMeter reads a job's average GPU utilization in percent; ok is false
// when it has no reading for the job's pods. prometheus.HTTPSource is the
// implementation (DCGM_FI_DEV_GPU_UTIL).
type GPUMeter interface {
	JobGPUUtilization(ctx context.Context, namespace, job string) (percent float64, ok bool, err error)
}
