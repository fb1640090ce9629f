package manager

import (
	"context"
	"fmt"
	"os"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	mlv1alpha1 "github.com/ml-operator/ml-operator/api/v1alpha1"
)

// NewScheme returns the scheme with the built-in kinds and both ml.example.com versions.
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(mlv1.AddToScheme(s))
	utilruntime.Must(mlv1alpha1.AddToScheme(s))
	return s
}

// managedSelector selects the children this operator creates. The cache holds
// only those, so memory does not grow with unrelated pods in the cluster.
var managedSelector = labels.SelectorFromSet(labels.Set{mlv1.LabelManagedBy: mlv1.ManagedByValue})

// clientConfig is a copy of cfg with the client rate limits of opts.
func clientConfig(cfg *rest.Config, opts *Options) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS = float32(opts.QPS)
	cfg.Burst = opts.Burst
	return cfg
}

// New builds the manager with every controller and webhook registered.
func New(cfg *rest.Config, opts *Options) (ctrl.Manager, error) {
	if err := opts.PodSecurity.Validate(); err != nil {
		return nil, err
	}
	if strings.TrimSpace(opts.StorageInitializerImage) == "" {
		return nil, fmt.Errorf("--storage-initializer-image is empty: it must name the storage initializer's image")
	}
	cfg = clientConfig(cfg, opts)
	if opts.PodSecurity.AutoIDs {
		openShift, err := IsOpenShift(cfg)
		if err != nil {
			return nil, err
		}
		o := *opts
		o.PodSecurity = opts.PodSecurity.ForCluster(openShift)
		opts = &o
		ctrl.Log.WithName("setup").Info("pod security defaults chosen for the cluster", "openShift", openShift,
			"runAsUser", ptrString(opts.PodSecurity.RunAsUser))
	}

	metricsOpts := metricsserver.Options{
		BindAddress:   opts.MetricsBindAddress(),
		SecureServing: opts.MetricsSecure,
		CertDir:       opts.MetricsCertDir,
	}
	if opts.MetricsSecure {
		metricsOpts.FilterProvider = filters.WithAuthenticationAndAuthorization
	}

	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                        NewScheme(),
		Metrics:                       metricsOpts,
		HealthProbeBindAddress:        opts.ProbeAddr,
		PprofBindAddress:              opts.PprofAddr,
		LeaderElection:                opts.LeaderElect,
		LeaderElectionID:              opts.LeaderElectionID,
		LeaderElectionNamespace:       opts.LeaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 positive(opts.LeaseDuration),
		RenewDeadline:                 positive(opts.RenewDeadline),
		RetryPeriod:                   positive(opts.RetryPeriod),
		Controller:                    config.Controller{MaxConcurrentReconciles: opts.MaxConcurrentReconciles},
		WebhookServer: webhook.NewServer(webhook.Options{
			Host:    opts.WebhookHost,
			Port:    opts.WebhookPort,
			CertDir: opts.WebhookCertDir,
		}),
		Cache: CacheOptions(opts),
	})
	if err != nil {
		return nil, fmt.Errorf("creating manager: %w", err)
	}

	for _, setup := range []struct {
		name string
		fn   func(ctrl.Manager, *Options) error
	}{
		{"trainingjob controller", setupTrainingJob},
		{"modeldeployment controller", setupModelDeployment},
		{"webhooks", setupWebhooks},
	} {
		if err := setup.fn(mgr, opts); err != nil {
			return nil, fmt.Errorf("setting up %s: %w", setup.name, err)
		}
	}

	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return nil, fmt.Errorf("adding health check: %w", err)
	}
	readyz := healthz.Ping
	if opts.EnableWebhooks {
		readyz = mgr.GetWebhookServer().StartedChecker()
	}
	if err := mgr.AddReadyzCheck("readyz", readyz); err != nil {
		return nil, fmt.Errorf("adding ready check: %w", err)
	}
	return mgr, nil
}

// CacheOptions are the manager's cache options: only the children this
// operator labels are cached, without their managedFields, pods only with
// what the controllers read, namespaces only with their deletion
// timestamp and nodes only with their cordon (cache.go).
func CacheOptions(opts *Options) cache.Options {
	narrow := cache.ByObject{Label: managedSelector}
	narrowPods := cache.ByObject{Label: managedSelector, Transform: transformPod}
	syncPeriod := opts.SyncPeriod
	return cache.Options{
		SyncPeriod:       &syncPeriod,
		DefaultTransform: transformObject,
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}:                            narrowPods,
			&corev1.Service{}:                        narrow,
			&corev1.ConfigMap{}:                      narrow,
			&corev1.PersistentVolumeClaim{}:          narrow,
			&appsv1.Deployment{}:                     narrow,
			&autoscalingv2.HorizontalPodAutoscaler{}: narrow,
			// Metadata only (controllers/namespaces); not ours, so no selector.
			&corev1.Namespace{}: {Transform: transformNamespace},
			// Not ours either: trimmed to the identity and the cordon.
			&corev1.Node{}: {Transform: transformNode},
		},
	}
}

// Run builds the manager and runs it until ctx is done.
func Run(ctx context.Context, cfg *rest.Config, opts *Options) error {
	mgr, err := New(cfg, opts)
	if err != nil {
		return err
	}
	log := ctrl.Log.WithName("setup")
	gc, gcFromEnv := applyGCPercent(opts.GCPercent, os.LookupEnv)
	log.Info("starting manager", "pid", os.Getpid(), "leaderElection", opts.LeaderElect,
		"qps", opts.QPS, "burst", opts.Burst, "webhooks", opts.EnableWebhooks, "gcPercent", gc, "gcPercentFromGOGC", gcFromEnv)
	return mgr.Start(ctx)
}

// openShiftSecurityGroup is the API group of OpenShift's
// SecurityContextConstraints: served only on OpenShift.
const openShiftSecurityGroup = "security.openshift.io"

// IsOpenShift says whether the API server serves OpenShift's
// SecurityContextConstraints group.
func IsOpenShift(cfg *rest.Config) (bool, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return false, fmt.Errorf("discovery client: %w", err)
	}
	groups, err := dc.ServerGroups()
	if err != nil {
		return false, fmt.Errorf("listing the API groups (to choose the pod security defaults): %w", err)
	}
	for _, g := range groups.Groups {
		if g.Name == openShiftSecurityGroup {
			return true, nil
		}
	}
	return false, nil
}

func ptrString(p *int64) string {
	if p == nil {
		return "none"
	}
	return fmt.Sprint(*p)
}
