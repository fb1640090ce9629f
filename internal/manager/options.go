// Package manager builds and runs the ml-operator controller manager. It is
// shared by cmd/main.go and by the tests that start the manager for real.
package manager

import (
	"flag"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/zapr"
	"go.uber.org/zap/zapcore"
	ctrlzap "sigs.k8s.io/controller-runtime/pkg/log/zap"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/controllers/trainingjob"
	"github.com/ml-operator/ml-operator/internal/podsecurity"
	"github.com/ml-operator/ml-operator/internal/storageinit"
)

// Options are the manager's command-line settings.
type Options struct {
	// MetricsAddr is where /metrics is served; "0" disables it. Empty means
	// the default for MetricsSecure: :8443 for HTTPS, :8080 for plain HTTP.
	MetricsAddr string
	// MetricsSecure serves metrics over HTTPS behind authentication and
	// authorization (TokenReview/SubjectAccessReview).
	MetricsSecure bool
	// MetricsCertDir holds tls.crt/tls.key for the metrics server; a
	// self-signed certificate is generated when empty.
	MetricsCertDir string
	// ProbeAddr is where /healthz and /readyz are served.
	ProbeAddr string
	// PprofAddr is where Go's profiler (/debug/pprof/) is served, plain
	// HTTP without authentication; empty (the default) serves none.
	PprofAddr string
	// LeaderElect enables leader election.
	LeaderElect bool
	// LeaderElectionID is the name of the lease.
	LeaderElectionID string
	// LeaderElectionNamespace is the lease namespace; the pod's own when empty.
	LeaderElectionNamespace string
	// LeaseDuration, RenewDeadline and RetryPeriod time leader election. A
	// standby takes over at most about LeaseDuration + 2 x RetryPeriod x 1.2
	// after the leader dies without releasing the lease (killed, node lost);
	// the defaults keep that under 20 s (docs/chaos.md measures it).
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// QPS and Burst bound the manager's API client.
	QPS   float64
	Burst int
	// MaxConcurrentReconciles per controller.
	MaxConcurrentReconciles int
	// EnableWebhooks serves the admission and conversion webhooks.
	EnableWebhooks bool
	// WebhookPort and WebhookCertDir configure the webhook server; the
	// certificate is reloaded when it changes on disk.
	WebhookPort    int
	WebhookCertDir string
	WebhookHost    string
	// GPUNodeSelector is added to every GPU worker pod (key=value,...).
	GPUNodeSelector map[string]string
	// DefaultImages are the per-framework images used when a TrainingJob
	// names none (framework=image,...).
	DefaultImages map[string]string
	// DefaultCommands are the per-framework launch commands of TrainingJobs
	// that name no command and no args (framework=template;...).
	DefaultCommands map[string]mlv1.LaunchTemplate
	// PodSecurity are the security defaults of the pods the operator
	// creates (workers, model servers) when their owner sets none.
	PodSecurity podsecurity.Defaults
	// StorageInitializerImage is the image of the init container that
	// fetches a ModelDeployment version's http(s):// or s3:// modelPath.
	StorageInitializerImage string
	// PrometheusURL, when set, is read for ModelDeployment rollback metrics.
	PrometheusURL string
	// PrometheusBearerTokenFile and PrometheusCAFile authenticate to
	// Prometheus (a Thanos querier behind an authenticating proxy) and
	// verify its certificate.
	PrometheusBearerTokenFile string
	PrometheusCAFile          string
	// DefaultGateway is the Gateway API Gateway a ModelDeployment's HTTPRoute
	// attaches to when its spec names none; with it, router auto picks the
	// Gateway API.
	DefaultGateway *mlv1.GatewayReference
	// IstioMesh says every namespace's clients are in Istio's mesh, so
	// router auto picks Istio whenever it is installed, not only in
	// namespaces labeled for sidecar injection.
	IstioMesh bool
	// SyncPeriod is the informers' resync period.
	SyncPeriod time.Duration
	// PlacementTimeout is the placementTimeout of TrainingJobs that set
	// none (spec.scheduling.placementTimeout); 0 means never.
	PlacementTimeout time.Duration
	// DialLoopbackOnly keeps the manager's own outbound connections
	// (progress scrapes, MLflow, Prometheus) on 127.0.0.0/8: the local
	// cluster's rule (internal/netguard).
	DialLoopbackOnly bool
	// GCPercent is the garbage collector's target (Go's GOGC), set at
	// start unless the GOGC environment variable is set (gc.go).
	GCPercent int

	zap ctrlzap.Options
}

// NewOptions returns the defaults.
func NewOptions() *Options {
	return &Options{
		MetricsAddr:             "",
		MetricsSecure:           true,
		ProbeAddr:               ":8081",
		LeaderElect:             true,
		LeaderElectionID:        "ml-operator.ml.example.com",
		LeaseDuration:           10 * time.Second,
		RenewDeadline:           8 * time.Second,
		RetryPeriod:             2 * time.Second,
		QPS:                     50,
		Burst:                   100,
		MaxConcurrentReconciles: 10,
		EnableWebhooks:          true,
		WebhookPort:             9443,
		GPUNodeSelector:         map[string]string{},
		DefaultImages:           DefaultFrameworkImages(),
		DefaultCommands:         DefaultFrameworkCommands(),
		PodSecurity:             podsecurity.NewDefaults(),
		StorageInitializerImage: storageinit.DefaultImage,
		SyncPeriod:              10 * time.Hour,
		PlacementTimeout:        trainingjob.DefaultPlacementTimeout,
		GCPercent:               DefaultGCPercent,
		zap:                     ctrlzap.Options{Development: false, TimeEncoder: zapcore.ISO8601TimeEncoder},
	}
}

// MetricsBindAddress is where the metrics server listens: MetricsAddr when
// set, else :8443 for HTTPS and :8080 for plain HTTP.
func (o *Options) MetricsBindAddress() string {
	switch {
	case o.MetricsAddr != "":
		return o.MetricsAddr
	case o.MetricsSecure:
		return ":8443"
	default:
		return ":8080"
	}
}

// DefaultFrameworkCommands are the launch commands of TrainingJobs that
// name no command and no args, unless the admin overrides them with
// --default-command (mlv1.DefaultLaunchTemplates).
func DefaultFrameworkCommands() map[string]mlv1.LaunchTemplate {
	out := map[string]mlv1.LaunchTemplate{}
	for fw, t := range mlv1.DefaultLaunchTemplates() {
		out[string(fw)] = t
	}
	return out
}

// DefaultFrameworkImages are the worker images used when a TrainingJob names
// none and the admin has not overridden them with --default-image.
func DefaultFrameworkImages() map[string]string {
	return map[string]string{
		"pytorch":    "docker.io/pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime",
		"tensorflow": "docker.io/tensorflow/tensorflow:2.18.0-gpu",
		"xgboost":    "docker.io/rapidsai/base:24.12-cuda12.5-py3.12",
		"jax":        "ghcr.io/nvidia/jax:jax-2025-01-15",
	}
}

// positive is d, or nil (controller-runtime's default) when d is not set.
func positive(d time.Duration) *time.Duration {
	if d <= 0 {
		return nil
	}
	return &d
}

// BindFlags registers the options on fs.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.MetricsAddr, "metrics-bind-address", o.MetricsAddr,
		"Address of the metrics endpoint; empty means :8443 with --metrics-secure (the default) and :8080 with --metrics-secure=false; 0 disables it.")
	fs.BoolVar(&o.MetricsSecure, "metrics-secure", o.MetricsSecure,
		"Serve metrics over HTTPS with authentication and authorization. With false, plain HTTP (use :8080).")
	fs.StringVar(&o.MetricsCertDir, "metrics-cert-path", o.MetricsCertDir, "Directory with tls.crt and tls.key for the metrics server.")
	fs.StringVar(&o.ProbeAddr, "health-probe-bind-address", o.ProbeAddr, "Address of the /healthz and /readyz probes.")
	fs.StringVar(&o.PprofAddr, "pprof-bind-address", o.PprofAddr,
		"Address of Go's profiler (/debug/pprof/), plain HTTP without authentication, so bind it to loopback (127.0.0.1:<port>); empty serves none.")
	fs.BoolVar(&o.LeaderElect, "leader-elect", o.LeaderElect, "Enable leader election, so only one replica reconciles.")
	fs.StringVar(&o.LeaderElectionID, "leader-election-id", o.LeaderElectionID, "Name of the leader-election lease.")
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", o.LeaderElectionNamespace, "Namespace of the lease (the pod's own when empty).")
	fs.DurationVar(&o.LeaseDuration, "leader-election-lease-duration", o.LeaseDuration,
		"How long a standby waits after the last renewal before it takes the lease of a leader that died.")
	fs.DurationVar(&o.RenewDeadline, "leader-election-renew-deadline", o.RenewDeadline,
		"How long the leader keeps retrying a failing renewal before it gives up leadership (and exits); less than the lease duration.")
	fs.DurationVar(&o.RetryPeriod, "leader-election-retry-period", o.RetryPeriod, "Time between leader-election attempts and renewals.")
	fs.Float64Var(&o.QPS, "kube-api-qps", o.QPS, "Client queries per second to the API server.")
	fs.IntVar(&o.Burst, "kube-api-burst", o.Burst, "Client burst to the API server.")
	fs.IntVar(&o.MaxConcurrentReconciles, "max-concurrent-reconciles", o.MaxConcurrentReconciles, "Concurrent reconciles per controller.")
	fs.BoolVar(&o.EnableWebhooks, "enable-webhooks", o.EnableWebhooks, "Serve the admission and conversion webhooks.")
	fs.IntVar(&o.WebhookPort, "webhook-port", o.WebhookPort, "Port of the webhook server.")
	fs.StringVar(&o.WebhookCertDir, "webhook-cert-path", o.WebhookCertDir, "Directory with the webhook server's tls.crt and tls.key (reloaded on change).")
	fs.StringVar(&o.WebhookHost, "webhook-host", o.WebhookHost, "Address the webhook server binds to (all when empty).")
	fs.Var(mapFlag(o.GPUNodeSelector), "gpu-node-selector", "Node selector added to GPU worker pods, as key=value[,key=value].")
	fs.Var(mapFlag(o.DefaultImages), "default-image", "Default worker image per framework when a TrainingJob names none, as framework=image[,framework=image]; repeatable.")
	fs.Var(commandsFlag(o.DefaultCommands), "default-command",
		"Launch command per framework of TrainingJobs that name no command and no args, as framework=template[;framework=template]; repeatable. A template is words split at white space; a word holding {model}, {dataset} or {checkpointDir} is left out when that value is empty, and the word {hyperparameters} becomes --<key>=<value> per hyperparameter. An empty template runs the image's entrypoint.")
	fs.Var(idFlag{&o.PodSecurity.RunAsUser, &o.PodSecurity.AutoIDs}, "pod-run-as-user",
		"runAsUser of the worker and model server pods whose owner sets no pod security context. Unset (with --pod-run-as-group and --pod-fs-group): 1000 for all three, except on OpenShift (security.openshift.io served), where none is fixed and restricted-v2 assigns one from the namespace's range. Set to empty: none on every cluster (the image's numeric USER runs).")
	fs.Var(idFlag{&o.PodSecurity.RunAsGroup, &o.PodSecurity.AutoIDs}, "pod-run-as-group",
		"runAsGroup of those pods (see --pod-run-as-user for unset and empty).")
	fs.Var(idFlag{&o.PodSecurity.FSGroup, &o.PodSecurity.AutoIDs}, "pod-fs-group",
		"fsGroup of those pods, so volumes are writable by that group (see --pod-run-as-user for unset and empty).")
	fs.StringVar(&o.PodSecurity.Home, "pod-home", o.PodSecurity.Home,
		"HOME of the worker and model server containers, an emptyDir mounted there so caches are writable under any UID; empty: the image's own HOME, no volume.")
	fs.StringVar(&o.StorageInitializerImage, "storage-initializer-image", o.StorageInitializerImage,
		"Image of the storage initializer, the init container that fetches a ModelDeployment version's http(s):// or s3:// modelPath into the model volume (the project's ./cmd/storage-initializer).")
	fs.StringVar(&o.PrometheusURL, "prometheus-url", o.PrometheusURL, "Prometheus base URL for ModelDeployment error-rate and latency rollback, and for TrainingJob GPU utilization from NVIDIA DCGM exporter.")
	fs.StringVar(&o.PrometheusBearerTokenFile, "prometheus-bearer-token-file", o.PrometheusBearerTokenFile,
		"File with a bearer token sent with every Prometheus query (read again for each query, so a rotated token works).")
	fs.StringVar(&o.PrometheusCAFile, "prometheus-ca-file", o.PrometheusCAFile,
		"File with PEM CA certificates that verify Prometheus' serving certificate (the system roots when empty).")
	fs.Var(gatewayFlag{&o.DefaultGateway}, "default-gateway",
		"Gateway API Gateway (namespace/name[/sectionName]) a ModelDeployment's HTTPRoute attaches to when spec.traffic.gateway is unset; with it, traffic.router auto picks the Gateway API.")
	fs.BoolVar(&o.IstioMesh, "istio-mesh", o.IstioMesh,
		"Every namespace's clients are in Istio's mesh: traffic.router auto picks Istio whenever it is installed, not only in namespaces labeled istio-injection=enabled or istio.io/rev.")
	fs.DurationVar(&o.SyncPeriod, "sync-period", o.SyncPeriod, "Informer resync period.")
	fs.DurationVar(&o.PlacementTimeout, "placement-timeout", o.PlacementTimeout,
		"How long a TrainingJob's ranks may stay unschedulable, without a gang scheduler, before the whole gang is released and retried, for jobs that set no spec.scheduling.placementTimeout; 0 means never (10s..24h otherwise).")
	fs.BoolVar(&o.DialLoopbackOnly, "dial-loopback-only", o.DialLoopbackOnly,
		"Refuse every outbound connection of the manager's own (progress scrapes, MLflow, Prometheus) outside 127.0.0.0/8, before any DNS lookup. The local cluster sets it.")
	fs.IntVar(&o.GCPercent, "gc-percent", o.GCPercent,
		"The garbage collector's target: how far the heap may grow beyond what the last collection left, in percent, before the next (Go's GOGC, 100 by default; the GOGC environment variable wins when set). The manager's heap is mostly its caches, which no collection frees: at 50 its anonymous memory per worker pod measured a quarter lower than at 100, for no CPU a burst showed (docs/benchmarks.md). -1 turns collection off.")
	o.zap.BindFlags(fs)
	// controller-runtime's help text gives its own default (epoch); this
	// manager starts from ISO 8601 times.
	if f := fs.Lookup("zap-time-encoding"); f != nil {
		f.DefValue = "iso8601"
		f.Usage = strings.Replace(f.Usage, "Defaults to 'epoch'.", "Defaults to 'iso8601'.", 1)
	}
}

// Logger returns a zap logger (JSON in production, console with --zap-devel,
// as the --zap-* flags say) behind logr, through zapr.
func (o *Options) Logger() logr.Logger {
	return zapr.NewLogger(ctrlzap.NewRaw(ctrlzap.UseFlagOptions(&o.zap)))
}
