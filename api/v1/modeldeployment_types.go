package v1

import (
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ModelFramework is the framework a model was built with.
// +kubebuilder:validation:Enum=tensorflow;pytorch;sklearn;onnx;xgboost;custom
type ModelFramework string

// Model frameworks.
const (
	ModelFrameworkTensorFlow ModelFramework = "tensorflow"
	ModelFrameworkPyTorch    ModelFramework = "pytorch"
	ModelFrameworkSKLearn    ModelFramework = "sklearn"
	ModelFrameworkONNX       ModelFramework = "onnx"
	ModelFrameworkXGBoost    ModelFramework = "xgboost"
	ModelFrameworkCustom     ModelFramework = "custom"
)

// TrafficRouter is how weighted traffic reaches the versions.
// +kubebuilder:validation:Enum=auto;gatewayapi;istio;service
type TrafficRouter string

// Traffic routers.
const (
	// RouterAuto picks by what is configured: the Gateway API (or Istio) for a
	// gateway named in the spec, the Gateway API for the manager's default
	// Gateway, Istio for a namespace in its mesh, else service.
	RouterAuto TrafficRouter = "auto"
	// RouterGatewayAPI writes an HTTPRoute with weighted backendRefs.
	RouterGatewayAPI TrafficRouter = "gatewayapi"
	// RouterIstio writes a VirtualService and a DestinationRule.
	RouterIstio TrafficRouter = "istio"
	// RouterService splits by replica counts behind the stable Service.
	RouterService TrafficRouter = "service"
)

// ModelDeploymentSpec is the desired state of a ModelDeployment.
// +kubebuilder:validation:XValidation:rule="self.modelName == oldSelf.modelName",message="modelName is immutable",fieldPath=".modelName"
// +kubebuilder:validation:XValidation:rule="self.framework == oldSelf.framework",message="framework is immutable",fieldPath=".framework"
type ModelDeploymentSpec struct {
	// ModelName is the model's name, exported as MODEL_NAME. Immutable.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	ModelName string `json:"modelName,omitempty"`

	// Framework the model was built with, exported as FRAMEWORK. Immutable.
	// +required
	Framework ModelFramework `json:"framework,omitempty"`

	// Image is the model server image; a version may override it.
	// +kubebuilder:validation:MinLength=1
	// +required
	Image string `json:"image,omitempty"`

	// Port the model server listens on.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +kubebuilder:default=8080
	// +optional
	Port int32 `json:"port,omitempty"`

	// Versions are the model versions served side by side, with their traffic
	// weights. Weights must sum to 100; a single version without a weight gets 100.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=10
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:XValidation:rule="(self.size() == 1 && !has(self[0].weight)) || self.map(v, has(v.weight) ? v.weight : 0).sum() == 100",messageExpression="'version weights must sum to 100, got %d'.format([self.map(v, has(v.weight) ? v.weight : 0).sum()])"
	// +required
	Versions []ModelVersion `json:"versions,omitempty"`

	// Resources of each model server container.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`

	// Scaling configures each version's HorizontalPodAutoscaler.
	// +kubebuilder:default={}
	// +optional
	Scaling ScalingSpec `json:"scaling,omitempty"`

	// HealthCheck builds the readiness, liveness and startup probes and the
	// operator's own health evaluation.
	// +kubebuilder:default={}
	// +optional
	HealthCheck HealthCheckSpec `json:"healthCheck,omitempty"`

	// Storage adds a model cache PVC mounted in every server.
	// +optional
	Storage *ModelStorageSpec `json:"storage,omitempty"`

	// Config is written to a ConfigMap mounted into every server at /etc/model-config.
	// +optional
	Config map[string]string `json:"config,omitempty"`

	// Traffic configures how weighted traffic reaches the versions.
	// +kubebuilder:default={}
	// +optional
	Traffic TrafficSpec `json:"traffic,omitempty"`

	// Rollout configures automated rollback.
	// +kubebuilder:default={}
	// +optional
	Rollout RolloutSpec `json:"rollout,omitempty"`

	// PodSecurityContext replaces the model server pods' default
	// (runAsNonRoot, RuntimeDefault seccomp, and the user and groups the
	// admin set with --pod-run-as-user and friends, none by default). An
	// image whose USER is a name the kubelet cannot check against
	// runAsNonRoot (TorchServe's model-server) needs runAsUser here.
	// +optional
	PodSecurityContext *corev1.PodSecurityContext `json:"podSecurityContext,omitempty"`

	// SecurityContext replaces the model server container's default
	// (runAsNonRoot, no privilege escalation, every capability dropped,
	// RuntimeDefault seccomp), and the storage initializer's, which runs
	// with the server's.
	// +optional
	SecurityContext *corev1.SecurityContext `json:"securityContext,omitempty"`
}

// ModelVersion is one version of the model.
// +kubebuilder:validation:XValidation:rule="!has(self.modelSecretName) || (has(self.modelPath) && !self.modelPath.startsWith('pvc://'))",message="modelSecretName needs a modelPath the storage initializer fetches (http://, https:// or s3://); a pvc:// claim is mounted, not fetched",fieldPath=".modelSecretName"
type ModelVersion struct {
	// Name of the version, a DNS label unique within the ModelDeployment.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// Weight is the share of traffic, 0..100, once the version is Ready.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	Weight *int32 `json:"weight,omitempty"`

	// ModelPath is where the model comes from: pvc://<claim>[/<path>] (the
	// claim is mounted read-only at /mnt/model), http(s)://<url> (one file)
	// or s3://<bucket>[/<key>] (an object, or every object under the key as
	// a prefix). A storage initializer init container fetches http(s) and
	// s3 models into an emptyDir mounted at /mnt/model before the server
	// starts. The server's MODEL_PATH is the local copy:
	// /mnt/model/<the URL's or key's last segment> (/mnt/model/<path> for
	// pvc://); MODEL_URI is this value.
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^(s3|pvc|https?)://.+`
	// +optional
	ModelPath string `json:"modelPath,omitempty"`

	// ModelSecretName is a Secret in the ModelDeployment's namespace whose
	// keys become the storage initializer's environment: for s3://,
	// AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, optionally
	// AWS_SESSION_TOKEN, AWS_REGION and AWS_ENDPOINT_URL (an S3-compatible
	// server: MinIO, Ceph); for http(s)://, HTTP_AUTHORIZATION (the
	// Authorization header sent). Not allowed with pvc://.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +optional
	ModelSecretName string `json:"modelSecretName,omitempty"`

	// Image overrides spec.image for this version.
	// +optional
	Image string `json:"image,omitempty"`
}

// ScalingSpec configures a version's HorizontalPodAutoscaler.
// +kubebuilder:validation:XValidation:rule="!has(self.maxReplicas) || (has(self.minReplicas) ? self.minReplicas : 1) <= self.maxReplicas",message="minReplicas must be less than or equal to maxReplicas",fieldPath=".minReplicas"
type ScalingSpec struct {
	// MinReplicas per version.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:default=1
	// +optional
	MinReplicas int32 `json:"minReplicas,omitempty"`

	// MaxReplicas per version. Defaults to max(minReplicas, 1).
	// +kubebuilder:validation:Minimum=1
	// +optional
	MaxReplicas *int32 `json:"maxReplicas,omitempty"`

	// TargetCPUUtilization is the HPA's average CPU utilization target, in percent.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +kubebuilder:default=80
	// +optional
	TargetCPUUtilization int32 `json:"targetCPUUtilization,omitempty"`

	// Metrics are extra autoscaling/v2 metrics (queue depth, GPU utilization,
	// requests per second), passed to each version's HPA as they are.
	// +kubebuilder:validation:MaxItems=10
	// +optional
	Metrics []autoscalingv2.MetricSpec `json:"metrics,omitempty"`
}

// HealthCheckSpec configures probes and health evaluation.
// +kubebuilder:validation:XValidation:rule="(has(self.timeoutSeconds) ? self.timeoutSeconds : 5) < (has(self.intervalSeconds) ? self.intervalSeconds : 30)",message="timeoutSeconds must be less than intervalSeconds",fieldPath=".timeoutSeconds"
type HealthCheckSpec struct {
	// Endpoint is the HTTP path of the health check.
	// +kubebuilder:default="/health"
	// +kubebuilder:validation:Pattern=`^/`
	// +optional
	Endpoint string `json:"endpoint,omitempty"`

	// Port of the health check; defaults to spec.port.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	Port *int32 `json:"port,omitempty"`

	// IntervalSeconds between probes, and between the operator's health evaluations.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=3600
	// +kubebuilder:default=30
	// +optional
	IntervalSeconds int32 `json:"intervalSeconds,omitempty"`

	// TimeoutSeconds of each probe; less than intervalSeconds.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:default=5
	// +optional
	TimeoutSeconds int32 `json:"timeoutSeconds,omitempty"`

	// FailureThreshold is the number of failed probes (and, for the operator,
	// container restarts) before a pod is considered broken.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:default=3
	// +optional
	FailureThreshold int32 `json:"failureThreshold,omitempty"`
}

// ModelStorageSpec is the optional model cache PVC.
type ModelStorageSpec struct {
	// Size of the model cache PVC.
	// +kubebuilder:default="10Gi"
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).isGreaterThan(quantity('0'))",message="must be greater than zero"
	// +optional
	Size *resource.Quantity `json:"size,omitempty"`

	// StorageClassName of the PVC; the cluster default when empty.
	// +optional
	StorageClassName *string `json:"storageClassName,omitempty"`

	// RetainOnDelete keeps the PVC after the ModelDeployment is deleted.
	// +kubebuilder:default=true
	// +optional
	RetainOnDelete *bool `json:"retainOnDelete,omitempty"`
}

// TrafficSpec configures the router.
type TrafficSpec struct {
	// Router: auto, gatewayapi, istio or service. Auto picks a router that
	// can split traffic with what is configured: for a gateway named here,
	// the Gateway API when served (else Istio); else, for the manager's
	// --default-gateway, the Gateway API; else Istio when the namespace is in
	// its mesh (labeled istio-injection=enabled or istio.io/rev, or the
	// manager runs with --istio-mesh); else service (replica counts). The
	// TrafficRouted condition says whether the router in use splits traffic.
	// +kubebuilder:default=auto
	// +optional
	Router TrafficRouter `json:"router,omitempty"`

	// Gateway is the Gateway the HTTPRoute attaches to (gatewayapi; the
	// manager's --default-gateway when unset), or the Istio gateway
	// (namespace/name) the VirtualService binds (istio).
	// +optional
	Gateway *GatewayReference `json:"gateway,omitempty"`

	// Hostnames the route answers to.
	// +kubebuilder:validation:MaxItems=16
	// +optional
	Hostnames []string `json:"hostnames,omitempty"`
}

// GatewayReference names a Gateway.
type GatewayReference struct {
	// Name of the Gateway.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// Namespace of the Gateway; the ModelDeployment's when empty.
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// SectionName is the Gateway listener.
	// +optional
	SectionName string `json:"sectionName,omitempty"`
}

// RolloutSpec configures automated rollback.
type RolloutSpec struct {
	// AutoRollback moves a failing version's traffic to the last healthy version.
	// +kubebuilder:default=true
	// +optional
	AutoRollback *bool `json:"autoRollback,omitempty"`

	// MaxErrorRate (0..1) above which a version is rolled back, read from
	// Prometheus when the manager has --prometheus-url.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1
	// +kubebuilder:default=0.05
	// +optional
	MaxErrorRate *float64 `json:"maxErrorRate,omitempty"`

	// MaxLatencyMs above which a version is rolled back (Prometheus).
	// +kubebuilder:validation:Minimum=1
	// +optional
	MaxLatencyMs *int32 `json:"maxLatencyMs,omitempty"`

	// ProgressDeadlineSeconds after which a version with no Ready pod counts
	// as a failed rollout.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:default=600
	// +optional
	ProgressDeadlineSeconds int32 `json:"progressDeadlineSeconds,omitempty"`

	// Analysis chooses the Prometheus queries that measure a version's
	// request rate, error rate and latency against maxErrorRate and
	// maxLatencyMs: a preset for the model server's own metric names, or
	// queries of your own.
	// +optional
	Analysis *AnalysisSpec `json:"analysis,omitempty"`
}

// AnalysisPreset names the metric names a model server exports.
// +kubebuilder:validation:Enum=auto;generic;mlserver;torchserve;triton;kserve;custom
type AnalysisPreset string

// Analysis presets.
const (
	// AnalysisAuto picks the preset by spec.framework (FrameworkAnalysisPreset).
	AnalysisAuto AnalysisPreset = "auto"
	// AnalysisGeneric: http_requests_total{code} and the
	// http_request_duration_seconds histogram, the conventional HTTP metrics
	// (and the project's own contract for model servers).
	AnalysisGeneric AnalysisPreset = "generic"
	// AnalysisMLServer: Seldon MLServer's model_infer_request_success/failure
	// counters and its REST server's request duration histogram.
	AnalysisMLServer AnalysisPreset = "mlserver"
	// AnalysisTorchServe: TorchServe's ts_inference_requests_total,
	// ts_inference_latency_microseconds and Requests2XX/4XX/5XX.
	AnalysisTorchServe AnalysisPreset = "torchserve"
	// AnalysisTriton: Triton's nv_inference_request_success/failure and
	// nv_inference_request_duration_us.
	AnalysisTriton AnalysisPreset = "triton"
	// AnalysisKServe: KServe's Python runtimes (sklearnserver, xgbserver,
	// lgbserver, huggingfaceserver, ...): the request_*_seconds histograms.
	// They count no errors, so only latency is judged.
	AnalysisKServe AnalysisPreset = "kserve"
	// AnalysisCustom: the queries in rollout.analysis.queries only.
	AnalysisCustom AnalysisPreset = "custom"
)

// AnalysisSpec selects the queries that judge a version.
// +kubebuilder:validation:XValidation:rule="!has(self.preset) || self.preset != 'custom' || (has(self.queries) && has(self.queries.requestRate) && (has(self.queries.errorRate) || has(self.queries.latencyMs)))",message="preset custom needs queries.requestRate and queries.errorRate or queries.latencyMs",fieldPath=".queries"
type AnalysisSpec struct {
	// Preset is the model server's metric names: auto picks by
	// spec.framework (pytorch: torchserve; sklearn, xgboost: mlserver;
	// tensorflow, onnx: triton; custom: generic).
	// +kubebuilder:default=auto
	// +optional
	Preset AnalysisPreset `json:"preset,omitempty"`

	// Queries replace the preset's queries one by one; preset custom uses
	// only these. Each is PromQL in which $namespace, $pods (a regex of the
	// version's pod names) and $window are replaced before it is sent.
	// +optional
	Queries *AnalysisQueries `json:"queries,omitempty"`

	// Window is the range of the rates in every query (a Prometheus
	// duration: 30s, 1m, 5m).
	// +kubebuilder:default="1m"
	// +kubebuilder:validation:Pattern=`^[1-9][0-9]*(s|m|h)$`
	// +optional
	Window string `json:"window,omitempty"`
}

// AnalysisQueries are PromQL queries for one version.
type AnalysisQueries struct {
	// RequestRate answers the version's requests per second. A version
	// without traffic is not judged.
	// +kubebuilder:validation:MaxLength=2048
	// +optional
	RequestRate string `json:"requestRate,omitempty"`
	// ErrorRate answers the share (0..1) of failed requests, compared with
	// maxErrorRate.
	// +kubebuilder:validation:MaxLength=2048
	// +optional
	ErrorRate string `json:"errorRate,omitempty"`
	// LatencyMs answers the average latency in milliseconds, compared with
	// maxLatencyMs.
	// +kubebuilder:validation:MaxLength=2048
	// +optional
	LatencyMs string `json:"latencyMs,omitempty"`
}

// DefaultAnalysisWindow is the rate window when rollout.analysis.window is unset.
const DefaultAnalysisWindow = "1m"

// FrameworkAnalysisPreset is the preset auto picks for a framework: the
// server that commonly serves it (TorchServe for PyTorch; MLServer for
// scikit-learn and XGBoost; Triton for TensorFlow and ONNX); generic for
// custom servers.
func FrameworkAnalysisPreset(f ModelFramework) AnalysisPreset {
	switch f {
	case ModelFrameworkPyTorch:
		return AnalysisTorchServe
	case ModelFrameworkSKLearn, ModelFrameworkXGBoost:
		return AnalysisMLServer
	case ModelFrameworkTensorFlow, ModelFrameworkONNX:
		return AnalysisTriton
	}
	return AnalysisGeneric
}

// ModelDeploymentPhase is the summary state of a ModelDeployment.
// +kubebuilder:validation:Enum=Pending;Running;Degraded;Failed
type ModelDeploymentPhase string

// ModelDeployment phases.
const (
	PhasePending  ModelDeploymentPhase = "Pending"
	PhaseRunning  ModelDeploymentPhase = "Running"
	PhaseDegraded ModelDeploymentPhase = "Degraded"
	PhaseFailed   ModelDeploymentPhase = "Failed"
)

// ModelDeploymentStatus is the observed state of a ModelDeployment.
type ModelDeploymentStatus struct {
	// Phase summarises the state.
	// +optional
	Phase ModelDeploymentPhase `json:"phase,omitempty"`

	// Conditions: Ready, Healthy, Scaled, Progressing, RolledBack, TrafficRouted.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// ActiveVersions are the versions being served, with effective weights.
	// +optional
	ActiveVersions []VersionStatus `json:"activeVersions,omitempty"`

	// History holds the last 10 version sets applied, newest first.
	// +kubebuilder:validation:MaxItems=10
	// +optional
	History []HistoryEntry `json:"history,omitempty"`

	// FailedVersions are versions rolled back for the generation they failed
	// at; a later spec change retries them.
	// +optional
	FailedVersions []FailedVersion `json:"failedVersions,omitempty"`

	// Metrics are read from Prometheus when the manager is configured with one.
	// +optional
	Metrics *ServingMetrics `json:"metrics,omitempty"`

	// URL of the stable endpoint.
	// +optional
	URL string `json:"url,omitempty"`

	// Router is the router in use (auto resolved).
	// +optional
	Router TrafficRouter `json:"router,omitempty"`

	// ObservedGeneration is the spec generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// VersionStatus is one served version.
type VersionStatus struct {
	// Name of the version.
	Name string `json:"name"`
	// Replicas of the version's Deployment.
	Replicas int32 `json:"replicas"`
	// HealthyReplicas are Ready pods.
	HealthyReplicas int32 `json:"healthyReplicas"`
	// Weight is the effective traffic weight (0 until the version is Ready).
	Weight int32 `json:"weight"`
	// Ready is true when the version has Ready pods and receives traffic.
	Ready bool `json:"ready"`
	// RolloutStartTime is when the version's current pod template was first
	// applied (or retried after a rollback); the progress deadline counts from it.
	// +optional
	RolloutStartTime *metav1.Time `json:"rolloutStartTime,omitempty"`
	// RolloutComplete is true once the version has had a Ready pod since
	// RolloutStartTime.
	// +optional
	RolloutComplete bool `json:"rolloutComplete,omitempty"`
	// TemplateHash identifies the pod template the rollout is for.
	// +optional
	TemplateHash string `json:"templateHash,omitempty"`
	// Remediations counts the health checks that deleted crash-looping pods of
	// this version since it was last fully Ready. A crash loop that survives a
	// remediation is a failed rollout.
	// +optional
	Remediations int32 `json:"remediations,omitempty"`
	// LastRemediationTime is when crash-looping pods were last deleted. Only
	// pods created since then count as the crash loop surviving remediation.
	// +optional
	LastRemediationTime *metav1.Time `json:"lastRemediationTime,omitempty"`
	// DrainStartTime is set when the version left the spec: it gets weight 0
	// and its children are deleted one health interval later.
	// +optional
	DrainStartTime *metav1.Time `json:"drainStartTime,omitempty"`
}

// HistoryEntry is one applied version set.
type HistoryEntry struct {
	// Generation of the spec that was applied.
	Generation int64 `json:"generation"`
	// Versions and their requested weights.
	Versions []VersionRecord `json:"versions"`
	// Time the set was applied.
	Time metav1.Time `json:"time"`
	// Outcome: Progressing, Succeeded, RolledBack or Superseded.
	Outcome string `json:"outcome"`
}

// VersionRecord records a version as applied.
type VersionRecord struct {
	// Name of the version.
	Name string `json:"name"`
	// Weight requested.
	Weight int32 `json:"weight"`
	// Image served.
	// +optional
	Image string `json:"image,omitempty"`
	// ModelPath served.
	// +optional
	ModelPath string `json:"modelPath,omitempty"`
}

// FailedVersion is a version that was rolled back.
type FailedVersion struct {
	// Name of the version.
	Name string `json:"name"`
	// Generation at which it failed.
	Generation int64 `json:"generation"`
	// Reason it failed, for example ProgressDeadlineExceeded, CrashLoop, ErrorRate, Latency.
	Reason string `json:"reason"`
	// Message for humans.
	// +optional
	Message string `json:"message,omitempty"`
	// Time of the rollback.
	Time metav1.Time `json:"time"`
}

// ServingMetrics are request metrics from Prometheus.
type ServingMetrics struct {
	// RequestsPerSecond across versions.
	// +optional
	RequestsPerSecond *float64 `json:"requestsPerSecond,omitempty"`
	// AverageLatencyMs across versions.
	// +optional
	AverageLatencyMs *float64 `json:"averageLatencyMs,omitempty"`
	// ErrorRate (0..1) across versions.
	// +optional
	ErrorRate *float64 `json:"errorRate,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=md,categories=ml
// +kubebuilder:printcolumn:name="Framework",type=string,JSONPath=`.spec.framework`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.status.activeVersions[0].replicas`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// ModelDeployment serves a model as versioned model servers with weighted
// traffic, health remediation and automated rollback.
type ModelDeployment struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired serving state.
	Spec ModelDeploymentSpec `json:"spec"`
	// Status is the observed serving state.
	// +optional
	Status ModelDeploymentStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// ModelDeploymentList contains a list of ModelDeployment.
type ModelDeploymentList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ModelDeployment `json:"items"`
}

func init() {
	SchemeBuilder.Register(&ModelDeployment{}, &ModelDeploymentList{})
}
