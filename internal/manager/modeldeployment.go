package manager

import (
	"fmt"
	"net/http"
	"time"

	"k8s.io/client-go/discovery"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/ml-operator/ml-operator/controllers/modeldeployment"
	"github.com/ml-operator/ml-operator/internal/integrations/prometheus"
	"github.com/ml-operator/ml-operator/internal/netguard"
)

// routerDetectionInterval is how often the router detector re-checks which
// router APIs are served.
const routerDetectionInterval = time.Minute

// setupModelDeployment registers the ModelDeployment controller, its router
// detector and, with --prometheus-url, its Prometheus reader.
func setupModelDeployment(mgr ctrl.Manager, opts *Options) error {
	dc, err := discovery.NewDiscoveryClientForConfig(mgr.GetConfig())
	if err != nil {
		return fmt.Errorf("creating discovery client: %w", err)
	}
	routers := modeldeployment.NewRouterDetector(dc, routerDetectionInterval)
	if _, err := routers.Detect(); err != nil {
		// Not fatal: router auto falls back to service until the timer succeeds.
		ctrl.Log.WithName("setup").Error(err, "discovering traffic routers; router=auto uses service until discovery succeeds")
	}
	if err := mgr.Add(routers); err != nil {
		return fmt.Errorf("adding router detector: %w", err)
	}
	r := &modeldeployment.Reconciler{
		Client:   mgr.GetClient(),
		Recorder: mgr.GetEventRecorder(modeldeployment.ControllerName),
		Clock:    clock.RealClock{},
		Routers:  routers,
		Routing:  modeldeployment.RoutingDefaults{Gateway: opts.DefaultGateway, IstioMesh: opts.IstioMesh},
		// The same defaults as the workers' (internal/podsecurity).
		PodSecurity:             opts.PodSecurity,
		StorageInitializerImage: opts.StorageInitializerImage,
	}
	if opts.PrometheusURL != "" {
		src, err := prometheusSource(opts)
		if err != nil {
			return err
		}
		r.Metrics = src
	}
	return r.SetupWithManager(mgr, opts.MaxConcurrentReconciles)
}

// prometheusSource is the reader of --prometheus-url, with its
// authentication: ModelDeployment's rollback metrics and TrainingJob's GPU
// utilization from DCGM.
func prometheusSource(opts *Options) (*prometheus.HTTPSource, error) {
	base := http.DefaultTransport.(*http.Transport)
	if opts.DialLoopbackOnly {
		base = netguard.Transport(true, 2*time.Second, true)
	}
	rt, err := prometheus.Transport(base, prometheus.Auth{
		BearerTokenFile: opts.PrometheusBearerTokenFile,
		CAFile:          opts.PrometheusCAFile,
	})
	if err != nil {
		return nil, err
	}
	return prometheus.NewHTTPSource(opts.PrometheusURL, rt)
}
