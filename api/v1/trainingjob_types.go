package v1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Framework is the training framework; it decides which distributed-training
// environment the operator injects into every worker.
// +kubebuilder:validation:Enum=pytorch;tensorflow;xgboost;jax
type Framework string

// Supported training frameworks.
const (
	FrameworkPyTorch    Framework = "pytorch"
	FrameworkTensorFlow Framework = "tensorflow"
	FrameworkXGBoost    Framework = "xgboost"
	FrameworkJAX        Framework = "jax"
)

// RestartPolicy decides what a rank failure does to the job.
// +kubebuilder:validation:Enum=OnFailure;Never;ExitCode
type RestartPolicy string

// Restart policies.
const (
	// RestartPolicyOnFailure restarts the whole gang on any rank failure, up to backoffLimit times.
	RestartPolicyOnFailure RestartPolicy = "OnFailure"
	// RestartPolicyNever fails the job on the first rank failure.
	RestartPolicyNever RestartPolicy = "Never"
	// RestartPolicyExitCode fails the job at once on exit codes 1..127 and
	// restarts the gang on 128+ (signals, OOMKilled), up to backoffLimit times.
	RestartPolicyExitCode RestartPolicy = "ExitCode"
)

// CleanPodPolicy decides which pods are deleted when a job finishes.
// +kubebuilder:validation:Enum=None;Running;All
type CleanPodPolicy string

// Clean pod policies.
const (
	CleanPodPolicyNone    CleanPodPolicy = "None"
	CleanPodPolicyRunning CleanPodPolicy = "Running"
	CleanPodPolicyAll     CleanPodPolicy = "All"
)

// CommunicationBackend is the collective-communication backend.
// +kubebuilder:validation:Enum=nccl;gloo;mpi
type CommunicationBackend string

// Communication backends.
const (
	BackendNCCL CommunicationBackend = "nccl"
	BackendGloo CommunicationBackend = "gloo"
	BackendMPI  CommunicationBackend = "mpi"
)

// StorageType is where checkpoints are kept.
// +kubebuilder:validation:Enum=pvc;s3;gcs
type StorageType string

// Checkpoint storage types.
const (
	StorageTypePVC StorageType = "pvc"
	StorageTypeS3  StorageType = "s3"
	StorageTypeGCS StorageType = "gcs"
)

// TrainingJobSpec is the desired state of a TrainingJob.
// +kubebuilder:validation:XValidation:rule="self.framework == oldSelf.framework",message="framework is immutable",fieldPath=".framework"
// +kubebuilder:validation:XValidation:rule="has(self.model) == has(oldSelf.model) && (!has(self.model) || self.model == oldSelf.model)",message="model is immutable",fieldPath=".model"
// +kubebuilder:validation:XValidation:rule="has(self.dataset) == has(oldSelf.dataset) && (!has(self.dataset) || self.dataset == oldSelf.dataset)",message="dataset is immutable",fieldPath=".dataset"
// +kubebuilder:validation:XValidation:rule="has(self.gpuResourceName) == has(oldSelf.gpuResourceName) && (!has(self.gpuResourceName) || self.gpuResourceName == oldSelf.gpuResourceName)",message="gpuResourceName is immutable",fieldPath=".gpuResourceName"
// +kubebuilder:validation:XValidation:rule="!has(self.parameterServers) || self.parameterServers == 0 || self.framework == 'tensorflow'",message="parameterServers is only supported with framework tensorflow",fieldPath=".parameterServers"
// +kubebuilder:validation:XValidation:rule="(has(oldSelf.suspend) && oldSelf.suspend) || (has(self.image) == has(oldSelf.image) && (!has(self.image) || self.image == oldSelf.image))",message="may only change while the job is suspended (spec.suspend: true)",fieldPath=".image"
// +kubebuilder:validation:XValidation:rule="(has(oldSelf.suspend) && oldSelf.suspend) || (has(self.command) == has(oldSelf.command) && (!has(self.command) || self.command == oldSelf.command))",message="may only change while the job is suspended (spec.suspend: true)",fieldPath=".command"
// +kubebuilder:validation:XValidation:rule="(has(oldSelf.suspend) && oldSelf.suspend) || (has(self.args) == has(oldSelf.args) && (!has(self.args) || self.args == oldSelf.args))",message="may only change while the job is suspended (spec.suspend: true)",fieldPath=".args"
// +kubebuilder:validation:XValidation:rule="(has(oldSelf.suspend) && oldSelf.suspend) || (has(self.resources) == has(oldSelf.resources) && (!has(self.resources) || self.resources == oldSelf.resources))",message="may only change while the job is suspended (spec.suspend: true)",fieldPath=".resources"
// +kubebuilder:validation:XValidation:rule="(has(oldSelf.suspend) && oldSelf.suspend) || (has(self.elastic) == has(oldSelf.elastic) && (!has(self.elastic) || self.elastic == oldSelf.elastic))",message="may only change while the job is suspended (spec.suspend: true)",fieldPath=".elastic"
// +kubebuilder:validation:XValidation:rule="!has(self.elastic) || !has(self.framework) || self.framework == 'pytorch'",message="elastic is only supported with framework pytorch",fieldPath=".elastic"
// +kubebuilder:validation:XValidation:rule="!has(self.elastic) || !has(self.elastic.minWorkers) || !has(self.elastic.maxWorkers) || ((has(self.numWorkers) ? self.numWorkers : 1) >= self.elastic.minWorkers && (has(self.numWorkers) ? self.numWorkers : 1) <= self.elastic.maxWorkers)",message="must be between spec.elastic.minWorkers and spec.elastic.maxWorkers",fieldPath=".numWorkers"
type TrainingJobSpec struct {
	// Framework decides which distributed-training environment is injected:
	// torchrun (PET_*) for pytorch, TF_CONFIG for tensorflow, DMLC_* for xgboost,
	// JAX_* for jax. Immutable.
	// +kubebuilder:default=pytorch
	// +optional
	Framework Framework `json:"framework,omitempty"`

	// Image is the worker container image. When empty, the operator's default
	// image for the framework is used (set by the cluster admin); the job is
	// rejected when neither exists. Mutable only while suspended.
	// +optional
	Image string `json:"image,omitempty"`

	// Command overrides the image entrypoint. Mutable only while suspended.
	// +optional
	Command []string `json:"command,omitempty"`

	// Args are the arguments to the command. Mutable only while suspended.
	// +optional
	Args []string `json:"args,omitempty"`

	// Env is extra environment for every worker. Names the operator injects
	// (MASTER_ADDR, RANK, WORLD_SIZE, PET_NNODES, TF_CONFIG, HYPERPARAM_*,
	// CHECKPOINT_*, ...) are reserved and rejected; the launchers' other
	// options (PET_REDIRECTS, JAX_PLATFORMS, MLFLOW_TRACKING_TOKEN, ...) may
	// be set. Mutable only while suspended.
	// +optional
	Env []corev1.EnvVar `json:"env,omitempty"`

	// Model names the model being trained; exported as MODEL and written to the
	// job ConfigMap. Immutable.
	// +kubebuilder:validation:MaxLength=2048
	// +optional
	Model string `json:"model,omitempty"`

	// Dataset names the training data; exported as DATASET and written to the
	// job ConfigMap. Immutable.
	// +kubebuilder:validation:MaxLength=2048
	// +optional
	Dataset string `json:"dataset,omitempty"`

	// NumWorkers is the number of ranks, one pod each. It may change at any
	// time: a running job re-forms its gang at the new size from the latest
	// checkpoint (counted as a disruption, not against backoffLimit).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +kubebuilder:default=1
	// +optional
	NumWorkers int32 `json:"numWorkers,omitempty"`

	// Elastic lets a pytorch gang go on with fewer ranks: when some rank
	// of an attempt stays unschedulable past a grace period (2m, or the
	// placement timeout when that is shorter), typically the replacement
	// of a rank lost to node loss or preemption, the next attempt runs
	// with the ranks that were placed, if they are at least minWorkers,
	// from the latest checkpoint; at a checkpoint written by a shrunk
	// attempt it grows back to numWorkers. numWorkers must lie between
	// minWorkers and maxWorkers. torchrun gets an elastic rendezvous
	// (PET_NNODES "<minWorkers>:<maxWorkers>", c10d on rank 0).
	// status.worldSize shows the current size. Mutable only while
	// suspended.
	// +optional
	Elastic *ElasticSpec `json:"elastic,omitempty"`

	// GPUsPerWorker is the number of GPUs each worker requests (requests =
	// limits) of gpuResourceName. Mutable only while suspended.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=8
	// +kubebuilder:default=1
	// +optional
	GPUsPerWorker *int32 `json:"gpusPerWorker,omitempty"`

	// GPUResourceName is the extended resource name of the GPUs, for example
	// amd.com/gpu. Immutable.
	// +kubebuilder:default="nvidia.com/gpu"
	// +kubebuilder:validation:MaxLength=253
	// +optional
	GPUResourceName string `json:"gpuResourceName,omitempty"`

	// NProcPerNode is the number of processes per worker pod (torchrun
	// --nproc-per-node). Defaults to gpusPerWorker, or 1 without GPUs.
	// WORLD_SIZE is numWorkers x nprocPerNode. Mutable only while suspended.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=64
	// +optional
	NProcPerNode *int32 `json:"nprocPerNode,omitempty"`

	// Resources are the worker container's compute resources. GPU entries must
	// agree with gpusPerWorker. Mutable only while suspended.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`

	// Hyperparameters are strings, numbers or booleans. Each becomes the
	// environment variable HYPERPARAM_<KEY upper-cased>; all are written to
	// hyperparameters.json in the job ConfigMap. The key "epochs" sets
	// status.totalEpochs.
	// +kubebuilder:validation:MaxProperties=256
	// +optional
	Hyperparameters map[string]HyperparameterValue `json:"hyperparameters,omitempty"`

	// Checkpoint configures where checkpoints are written and kept.
	// +kubebuilder:default={}
	// +optional
	Checkpoint CheckpointSpec `json:"checkpoint,omitempty"`

	// DataVolume is an existing PVC with training data, mounted in every worker.
	// +optional
	DataVolume *DataVolumeSpec `json:"dataVolume,omitempty"`

	// BackoffLimit is the number of gang restarts for failures before the job
	// is Failed (reason BackoffLimitExceeded). Disruptions do not count.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10
	// +kubebuilder:default=3
	// +optional
	BackoffLimit *int32 `json:"backoffLimit,omitempty"`

	// FailurePolicy decides what the operator does about a gang that hangs.
	// May change at any time.
	// +optional
	FailurePolicy *FailurePolicy `json:"failurePolicy,omitempty"`

	// RestartPolicy decides what a rank failure does: OnFailure restarts the
	// gang, Never fails the job, ExitCode fails on exit codes 1..127 and
	// restarts on 128+.
	// +kubebuilder:default=OnFailure
	// +optional
	RestartPolicy RestartPolicy `json:"restartPolicy,omitempty"`

	// Suspend deletes the job's pods (keeping its PVC, ConfigMap and Service)
	// while true; setting it back to false starts the gang again from the
	// latest checkpoint.
	// +kubebuilder:default=false
	// +optional
	Suspend *bool `json:"suspend,omitempty"`

	// Networking configures the rendezvous between ranks.
	// +kubebuilder:default={}
	// +optional
	Networking NetworkingSpec `json:"networking,omitempty"`

	// RunPolicy bounds the job's run time and decides cleanup after it finishes.
	// +kubebuilder:default={}
	// +optional
	RunPolicy RunPolicy `json:"runPolicy,omitempty"`

	// Scheduling places the workers. GPU jobs always get a toleration for the
	// GPU taint. Mutable only while suspended, except placementTimeout.
	// +optional
	Scheduling SchedulingSpec `json:"scheduling,omitempty"`

	// Metrics is where rank 0 serves its progress gauges in the Prometheus
	// text format.
	// +kubebuilder:default={}
	// +optional
	Metrics MetricsEndpointSpec `json:"metrics,omitempty"`

	// ParameterServers is the number of TensorFlow parameter-server pods
	// (<name>-ps-<i>), listed as "ps" in TF_CONFIG. tensorflow only.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=16
	// +optional
	ParameterServers int32 `json:"parameterServers,omitempty"`

	// Tracking configures experiment tracking.
	// +optional
	Tracking *TrackingSpec `json:"tracking,omitempty"`

	// Template is merged into every worker pod. Mutable only while suspended.
	// +optional
	Template WorkerTemplate `json:"template,omitempty"`
}

// ElasticSpec bounds an elastic gang's size (spec.elastic).
// +kubebuilder:validation:XValidation:rule="!has(self.minWorkers) || !has(self.maxWorkers) || self.minWorkers <= self.maxWorkers",message="must be less than or equal to maxWorkers",fieldPath=".minWorkers"
type ElasticSpec struct {
	// MinWorkers is the fewest ranks the gang goes on with; below it, the
	// job waits for capacity as a fixed-size job does.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	MinWorkers int32 `json:"minWorkers"`

	// MaxWorkers is the most ranks torchrun's rendezvous admits
	// (--nnodes=<minWorkers>:<maxWorkers>); numWorkers may not exceed it.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	MaxWorkers int32 `json:"maxWorkers"`
}

// HyperparameterValue is a string, number or boolean hyperparameter. It keeps
// the JSON value as written, so numbers keep their precision and a round trip
// through any API version is lossless.
// +kubebuilder:validation:Type=""
// +kubebuilder:validation:XPreserveUnknownFields
type HyperparameterValue struct {
	// Raw is the JSON encoding of the value.
	Raw []byte `json:"-"`
}

// CheckpointSpec configures checkpointing.
type CheckpointSpec struct {
	// Enabled turns checkpoint storage and resume on.
	// +kubebuilder:default=true
	// +optional
	Enabled *bool `json:"enabled,omitempty"`

	// Frequency is how often, in epochs, the trainer should checkpoint;
	// exported as CHECKPOINT_FREQUENCY.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:default=1
	// +optional
	Frequency int32 `json:"frequency,omitempty"`

	// Path is the absolute mount path of the checkpoint volume; exported as
	// CHECKPOINT_DIR.
	// +kubebuilder:default="/checkpoints"
	// +kubebuilder:validation:Pattern=`^/`
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Path string `json:"path,omitempty"`

	// Storage is where checkpoints live. Immutable.
	// +kubebuilder:default={}
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="checkpoint.storage is immutable"
	// +kubebuilder:validation:XValidation:rule="!has(self.type) || self.type == 'pvc' || has(self.uri)",message="uri is required when type is s3 or gcs",fieldPath=".uri"
	// +optional
	Storage CheckpointStorage `json:"storage,omitempty"`

	// RetainOnDelete keeps the checkpoint PVC after the job is deleted. The
	// operator never deletes user data unless this is false.
	// +kubebuilder:default=true
	// +optional
	RetainOnDelete *bool `json:"retainOnDelete,omitempty"`

	// KeepLast is how many checkpoints trainers should keep; exported as
	// CHECKPOINT_KEEP_LAST.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:default=3
	// +optional
	KeepLast int32 `json:"keepLast,omitempty"`
}

// CheckpointStorage says where checkpoints are stored.
type CheckpointStorage struct {
	// Type is pvc (a PersistentVolumeClaim mounted at checkpoint.path), s3 or
	// gcs (object storage at uri, exported as CHECKPOINT_URI).
	// +kubebuilder:default=pvc
	// +optional
	Type StorageType `json:"type,omitempty"`

	// URI is the object-storage location (s3://bucket/prefix, gs://bucket/prefix).
	// Required for s3 and gcs.
	// +kubebuilder:validation:MaxLength=2048
	// +optional
	URI string `json:"uri,omitempty"`

	// Size of the checkpoint PVC (pvc only).
	// +kubebuilder:default="10Gi"
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).isGreaterThan(quantity('0'))",message="must be greater than zero"
	// +optional
	Size *resource.Quantity `json:"size,omitempty"`

	// StorageClassName of the checkpoint PVC; the cluster default when empty.
	// +optional
	StorageClassName *string `json:"storageClassName,omitempty"`

	// AccessModes of the checkpoint PVC. When unset, the operator chooses
	// at creation: ReadWriteMany for a job of more than one pod whose
	// StorageClass serves shared volumes, else ReadWriteOnce. With a claim
	// no two nodes may mount, every pod of the job runs on rank 0's node.
	// +optional
	AccessModes []corev1.PersistentVolumeAccessMode `json:"accessModes,omitempty"`

	// ExistingClaim uses this PVC for checkpoints; the operator creates none
	// and never deletes it.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	ExistingClaim string `json:"existingClaim,omitempty"`
}

// DataVolumeSpec mounts an existing PVC with training data.
type DataVolumeSpec struct {
	// ClaimName is the PVC to mount.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	ClaimName string `json:"claimName"`

	// ReadOnly mounts the volume read-only.
	// +optional
	ReadOnly bool `json:"readOnly,omitempty"`

	// MountPath is where the data is mounted.
	// +kubebuilder:default="/data"
	// +kubebuilder:validation:Pattern=`^/`
	// +optional
	MountPath string `json:"mountPath,omitempty"`
}

// NetworkingSpec configures rank rendezvous.
type NetworkingSpec struct {
	// MasterPort is the rendezvous port on rank 0 (MASTER_PORT).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +kubebuilder:default=29500
	// +optional
	MasterPort int32 `json:"masterPort,omitempty"`

	// Backend is the collective backend. Default nccl with GPUs, else gloo.
	// +optional
	Backend CommunicationBackend `json:"backend,omitempty"`
}

// RunPolicy bounds a job's run and cleanup.
type RunPolicy struct {
	// ActiveDeadlineSeconds fails the job (reason DeadlineExceeded) this long
	// after it started.
	// +kubebuilder:validation:Minimum=1
	// +optional
	ActiveDeadlineSeconds *int64 `json:"activeDeadlineSeconds,omitempty"`

	// TTLSecondsAfterFinished deletes the job this long after it finished.
	// +kubebuilder:validation:Minimum=0
	// +optional
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`

	// CleanPodPolicy decides which pods are deleted when the job finishes:
	// None, Running (those still running) or All.
	// +kubebuilder:default=Running
	// +optional
	CleanPodPolicy CleanPodPolicy `json:"cleanPodPolicy,omitempty"`
}

// SchedulingSpec places worker pods.
type SchedulingSpec struct {
	// SchedulerName is the scheduler for the workers (for example volcano or a
	// coscheduling scheduler, which get a PodGroup).
	// +optional
	SchedulerName string `json:"schedulerName,omitempty"`

	// PriorityClassName of the worker pods.
	// +optional
	PriorityClassName string `json:"priorityClassName,omitempty"`

	// NodeSelector for the worker pods, merged over the admin's GPU node selector.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// Tolerations for the worker pods, added to the GPU toleration.
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// Affinity of the worker pods.
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`

	// QueueName is the Kueue LocalQueue; pods carry the kueue.x-k8s.io/queue-name
	// label and Kueue's pod-group annotations, so the gang is admitted as one.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	QueueName string `json:"queueName,omitempty"`

	// PlacementTimeout bounds how long an attempt's ranks may wait to be
	// placed when no gang scheduler places them all at once
	// (status.gangPlacement PlacementTimeout). If a rank is still
	// unschedulable this long after the attempt's pods were created
	// (status.placementStartTime), the whole gang is deleted, so that no GPU
	// stays held, and created again after a backoff that does not count
	// against backoffLimit (status.placementTimeouts). Unset: the manager's
	// --placement-timeout; "0s": never. May change at any time.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) == duration('0s') || (duration(self) >= duration('10s') && duration(self) <= duration('24h'))",message="must be 0s (never) or between 10s and 24h"
	// +optional
	PlacementTimeout *metav1.Duration `json:"placementTimeout,omitempty"`
}

// FailurePolicy decides what the operator does about a gang that hangs.
type FailurePolicy struct {
	// StallTimeout is how long rank 0's progress (the training_step gauge,
	// else training_epoch) may stay the same, as seen by the operator's
	// scrapes, before the job is Stalled: condition Stalled, a Warning event
	// and, by stallAction, a gang restart from the latest checkpoint. Unset
	// or "0s": off. Otherwise between 30s and 24h.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) == duration('0s') || (duration(self) >= duration('30s') && duration(self) <= duration('24h'))",message="must be 0s (off) or between 30s and 24h"
	// +optional
	StallTimeout *metav1.Duration `json:"stallTimeout,omitempty"`

	// StallAction is what a stall does: Restart (the default) restarts the
	// gang from the latest checkpoint and counts it against backoffLimit,
	// like a failed rank; RestartUncounted restarts it without counting (in
	// status.disruptions); Fail fails the job (reason Stalled).
	// +kubebuilder:validation:Enum=Restart;RestartUncounted;Fail
	// +optional
	StallAction StallAction `json:"stallAction,omitempty"`
}

// StallAction is what the operator does when a job stalls
// (spec.failurePolicy.stallAction).
type StallAction string

// The stall actions.
const (
	// StallActionRestart restarts the gang and counts it against
	// backoffLimit (status.restarts), with the failure backoff. The default.
	StallActionRestart StallAction = "Restart"
	// StallActionRestartUncounted restarts the gang without counting it
	// (status.disruptions) and without backoff.
	StallActionRestartUncounted StallAction = "RestartUncounted"
	// StallActionFail fails the job, reason Stalled.
	StallActionFail StallAction = "Fail"
)

// MetricsEndpointSpec is where rank 0 serves its progress gauges.
type MetricsEndpointSpec struct {
	// Port on rank 0.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +kubebuilder:default=8000
	// +optional
	Port int32 `json:"port,omitempty"`

	// Path of the Prometheus text endpoint.
	// +kubebuilder:default="/metrics"
	// +kubebuilder:validation:Pattern=`^/`
	// +optional
	Path string `json:"path,omitempty"`
}

// TrackingSpec configures experiment tracking.
type TrackingSpec struct {
	// MLflow tracks the job as an MLflow run.
	// +optional
	MLflow *MLflowSpec `json:"mlflow,omitempty"`
}

// MLflowSpec configures MLflow tracking.
type MLflowSpec struct {
	// TrackingURI is the MLflow tracking server (MLFLOW_TRACKING_URI).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:Pattern=`^https?://`
	TrackingURI string `json:"trackingURI"`

	// ExperimentName is the MLflow experiment (MLFLOW_EXPERIMENT_NAME).
	// +optional
	ExperimentName string `json:"experimentName,omitempty"`
}

// WorkerTemplate is merged into every worker pod.
type WorkerTemplate struct {
	// Labels added to every worker pod.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// Annotations added to every worker pod.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`

	// ServiceAccountName of the worker pods.
	// +optional
	ServiceAccountName string `json:"serviceAccountName,omitempty"`

	// ImagePullSecrets of the worker pods.
	// +optional
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`

	// Volumes added to every worker pod.
	// +optional
	Volumes []corev1.Volume `json:"volumes,omitempty"`

	// VolumeMounts added to the worker container.
	// +optional
	VolumeMounts []corev1.VolumeMount `json:"volumeMounts,omitempty"`

	// SecurityContext replaces the worker container's default (non-root, no
	// privilege escalation, all capabilities dropped, RuntimeDefault seccomp).
	// +optional
	SecurityContext *corev1.SecurityContext `json:"securityContext,omitempty"`

	// PodSecurityContext replaces the worker pod's default (runAsNonRoot,
	// RuntimeDefault seccomp).
	// +optional
	PodSecurityContext *corev1.PodSecurityContext `json:"podSecurityContext,omitempty"`

	// TerminationGracePeriodSeconds is how long each worker pod has, from
	// SIGTERM to SIGKILL, when its gang is ended (a restart, a preemption, a
	// drain, a suspend): the time a trainer has to save its checkpoint at
	// SIGTERM. 0 to 3600; unset, the pod default (30 s).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=3600
	// +optional
	TerminationGracePeriodSeconds *int64 `json:"terminationGracePeriodSeconds,omitempty"`
}

// TrainingJobState is the lifecycle state of a TrainingJob.
// +kubebuilder:validation:Enum=Pending;Initializing;Running;Restarting;Suspended;Completed;Failed
type TrainingJobState string

// TrainingJob states.
const (
	// StatePending: validated, nothing created yet.
	StatePending TrainingJobState = "Pending"
	// StateInitializing: resources created, not every rank running.
	StateInitializing TrainingJobState = "Initializing"
	// StateRunning: every rank running.
	StateRunning TrainingJobState = "Running"
	// StateRestarting: the gang is being torn down and recreated.
	StateRestarting TrainingJobState = "Restarting"
	// StateSuspended: spec.suspend is true; no pods.
	StateSuspended TrainingJobState = "Suspended"
	// StateCompleted: every rank exited 0.
	StateCompleted TrainingJobState = "Completed"
	// StateFailed: the job failed; the Failed condition says why.
	StateFailed TrainingJobState = "Failed"
)

// IsFinished reports whether the state is terminal.
func (s TrainingJobState) IsFinished() bool {
	return s == StateCompleted || s == StateFailed
}

// TrainingJobStatus is the observed state of a TrainingJob.
type TrainingJobStatus struct {
	// State is the lifecycle state.
	// +optional
	State TrainingJobState `json:"state,omitempty"`

	// Progress is the share of epochs done, for example "45%".
	// +optional
	Progress string `json:"progress,omitempty"`

	// CurrentEpoch is the epoch rank 0 reports.
	// +optional
	CurrentEpoch int32 `json:"currentEpoch,omitempty"`

	// TotalEpochs is hyperparameters.epochs, or what rank 0 reports.
	// +optional
	TotalEpochs int32 `json:"totalEpochs,omitempty"`

	// Metrics are the latest training metrics rank 0 reports.
	// +optional
	Metrics *TrainingMetrics `json:"metrics,omitempty"`

	// Workers counts the current attempt's pods by phase.
	// +optional
	Workers WorkerCounts `json:"workers,omitempty"`

	// WorkerStatuses has one entry per rank of the current attempt.
	// +listType=map
	// +listMapKey=rank
	// +optional
	WorkerStatuses []WorkerStatus `json:"workerStatuses,omitempty"`

	// Restarts is the number of gang restarts caused by failures; counted
	// against backoffLimit.
	// +optional
	Restarts int32 `json:"restarts,omitempty"`

	// Disruptions is the number of gang restarts caused by preemption,
	// eviction, node loss or rescaling; not counted against backoffLimit.
	// +optional
	Disruptions int32 `json:"disruptions,omitempty"`

	// PlacementTimeouts is the number of gangs released because a rank was
	// still unschedulable when spec.scheduling.placementTimeout expired; not
	// counted against backoffLimit.
	// +optional
	PlacementTimeouts int32 `json:"placementTimeouts,omitempty"`

	// PlacementStartTime is when the current attempt's pods were created:
	// spec.scheduling.placementTimeout runs from here.
	// +optional
	PlacementStartTime *metav1.Time `json:"placementStartTime,omitempty"`

	// WorldSize is the number of ranks (worker pods; WORLD_SIZE is that
	// times nprocPerNode) the current attempt runs with, and the number the
	// job asks for (numWorkers). They differ while an elastic job runs
	// shrunk.
	// +optional
	WorldSize *WorldSize `json:"worldSize,omitempty"`

	// GangPlacement is how the current gang is placed all-or-nothing: Kueue,
	// Volcano or Coscheduling (a gang scheduler admits every pod at once),
	// Native (Kubernetes' own gang scheduling: a scheduling.k8s.io/v1alpha2
	// Workload and PodGroup per attempt), PlacementTimeout (the operator
	// releases a gang not placed in time) or None (placementTimeout 0s and
	// no gang scheduler).
	// +optional
	GangPlacement GangPlacement `json:"gangPlacement,omitempty"`

	// LastRestartTime is when the latest gang restart (failure or disruption)
	// was decided; the next gang is created once the backoff since this time
	// has passed.
	// +optional
	LastRestartTime *metav1.Time `json:"lastRestartTime,omitempty"`

	// LastCheckpoint is the latest checkpoint rank 0 reported; later attempts
	// resume from it.
	// +optional
	LastCheckpoint *CheckpointStatus `json:"lastCheckpoint,omitempty"`

	// AllocatedGPUs is the number of GPUs held by the current attempt's pods.
	// +optional
	AllocatedGPUs int32 `json:"allocatedGPUs,omitempty"`

	// AllocatedNodes is the number of distinct nodes the current ranks run on.
	// +optional
	AllocatedNodes int32 `json:"allocatedNodes,omitempty"`

	// EstimatedCompletionTime extrapolates the current attempt's epoch rate.
	// +optional
	EstimatedCompletionTime *metav1.Time `json:"estimatedCompletionTime,omitempty"`

	// MLflowRunID is the MLflow run tracking this job.
	// +optional
	MLflowRunID string `json:"mlflowRunID,omitempty"`

	// StartTime is when the job's first pods were created.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`

	// CompletionTime is when the job finished (Completed or Failed).
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`

	// Duration is how long the job ran, from startTime to completionTime; set
	// when it finishes (while it runs, startTime tells).
	// +optional
	Duration *metav1.Duration `json:"duration,omitempty"`

	// Resources is how busy the job's GPUs are, and where that was read.
	// +optional
	Resources *ResourceUsage `json:"resources,omitempty"`

	// ObservedGeneration is the spec generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Created, Running, Restarting, Suspended, Succeeded, Failed.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// TrainingMetrics are the latest metrics rank 0 reported.
type TrainingMetrics struct {
	// Loss is training_loss.
	// +optional
	Loss *float64 `json:"loss,omitempty"`
	// Accuracy is training_accuracy.
	// +optional
	Accuracy *float64 `json:"accuracy,omitempty"`
	// Throughput is training_throughput_samples_per_second.
	// +optional
	Throughput *float64 `json:"throughput,omitempty"`
	// StepTime is training_step_time_seconds: how long rank 0's latest
	// training step took.
	// +optional
	StepTime *metav1.Duration `json:"stepTime,omitempty"`
	// LastScrapeTime is when these values were read.
	// +optional
	LastScrapeTime *metav1.Time `json:"lastScrapeTime,omitempty"`
}

// GPUUtilizationSource names where status.resources.gpuUtilization was read.
// +kubebuilder:validation:Enum=DCGM;Trainer
type GPUUtilizationSource string

const (
	// GPUUtilizationSourceDCGM: NVIDIA DCGM exporter's DCGM_FI_DEV_GPU_UTIL
	// for the job's pods, averaged, read from the Prometheus the manager is
	// given (--prometheus-url). Preferred when it answers.
	GPUUtilizationSourceDCGM GPUUtilizationSource = "DCGM"
	// GPUUtilizationSourceTrainer: rank 0's training_gpu_utilization_percent
	// gauge (the progress contract).
	GPUUtilizationSourceTrainer GPUUtilizationSource = "Trainer"
)

// ResourceUsage is what the job's resources are doing.
type ResourceUsage struct {
	// GPUUtilization is the job's average GPU utilization, in percent.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	GPUUtilization *int32 `json:"gpuUtilization,omitempty"`
	// GPUUtilizationSource is where gpuUtilization was read: DCGM or Trainer.
	// +optional
	GPUUtilizationSource GPUUtilizationSource `json:"gpuUtilizationSource,omitempty"`
}

// WorkerCounts counts pods by phase.
type WorkerCounts struct {
	// Pending pods (created, not running).
	Pending int32 `json:"pending"`
	// Active (running) pods.
	Active int32 `json:"active"`
	// Succeeded pods.
	Succeeded int32 `json:"succeeded"`
	// Failed pods.
	Failed int32 `json:"failed"`
}

// WorkerStatus is one rank's pod.
type WorkerStatus struct {
	// Rank of the worker.
	Rank int32 `json:"rank"`
	// PodName of the rank's pod.
	PodName string `json:"podName"`
	// Phase of the pod.
	// +optional
	Phase corev1.PodPhase `json:"phase,omitempty"`
	// RestartCount of the pod's training container.
	// +optional
	RestartCount int32 `json:"restartCount,omitempty"`
	// Node the pod runs on.
	// +optional
	Node string `json:"node,omitempty"`
}

// WorldSize is the current and desired number of ranks (status.worldSize).
type WorldSize struct {
	// Current is the number of ranks of the current attempt.
	Current int32 `json:"current"`
	// Desired is the number of ranks the job asks for: numWorkers. An
	// elastic job running shrunk grows back to it at a checkpoint.
	Desired int32 `json:"desired"`
}

// CheckpointStatus is a checkpoint rank 0 reported.
type CheckpointStatus struct {
	// Epoch the checkpoint was taken at.
	Epoch int32 `json:"epoch"`
	// Step is the training step the checkpoint was taken at
	// (training_checkpoint_step), when rank 0 reports one: a checkpoint saved
	// mid-epoch, at SIGTERM, has a step past its epoch's last.
	// +optional
	Step *int64 `json:"step,omitempty"`
	// Attempt is the attempt (status.restarts + disruptions +
	// placementTimeouts when it ran) whose trainer wrote the checkpoint
	// (training_checkpoint_attempt), when rank 0 reports it. A checkpoint
	// saved at SIGTERM is reported by the next attempt, which resumed from
	// it, so this is the only way to tell who wrote it.
	// +optional
	Attempt *int32 `json:"attempt,omitempty"`
	// Time the checkpoint was written.
	// +optional
	Time *metav1.Time `json:"time,omitempty"`
	// Path of the checkpoint, when known; exported as RESUME_FROM_CHECKPOINT.
	// +optional
	Path string `json:"path,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:resource:shortName=tj,categories=ml
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`
// +kubebuilder:printcolumn:name="Progress",type=string,JSONPath=`.status.progress`
// +kubebuilder:printcolumn:name="Epoch",type=integer,JSONPath=`.status.currentEpoch`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Workers",type=integer,JSONPath=`.spec.numWorkers`,priority=1
// +kubebuilder:printcolumn:name="Restarts",type=integer,JSONPath=`.status.restarts`,priority=1
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 52",message="metadata.name must be at most 52 characters so that every generated child name is a valid DNS label"

// TrainingJob runs distributed training as one pod per rank, with gang
// restarts, checkpoint resume and progress in status.
type TrainingJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired training run.
	// +optional
	Spec TrainingJobSpec `json:"spec,omitempty"`
	// Status is the observed state of the run.
	// +optional
	Status TrainingJobStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// TrainingJobList contains a list of TrainingJob.
type TrainingJobList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TrainingJob `json:"items"`
}

func init() {
	SchemeBuilder.Register(&TrainingJob{}, &TrainingJobList{})
}
