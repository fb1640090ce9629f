package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

// TrainingJobSpec is the v1alpha1 desired state of a TrainingJob.
type TrainingJobSpec struct {
	// Framework of the training code.
	// +kubebuilder:validation:Enum=pytorch;tensorflow;xgboost
	Framework string `json:"framework"`

	// Image is the worker container image.
	// +kubebuilder:validation:MinLength=1
	Image string `json:"image"`

	// Command run in every worker.
	// +kubebuilder:validation:MinItems=1
	Command []string `json:"command"`

	// Args to the command.
	// +optional
	Args []string `json:"args,omitempty"`

	// Workers is the number of worker pods (v1: numWorkers).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +kubebuilder:default=1
	// +optional
	Workers int32 `json:"workers,omitempty"`

	// GPUPerWorker is the number of GPUs per worker (v1: gpusPerWorker).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=8
	// +kubebuilder:default=0
	// +optional
	GPUPerWorker int32 `json:"gpuPerWorker"`

	// Resources of each worker container.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`

	// DataVolume is a PVC with training data, mounted at /data (v1: dataVolume).
	// +optional
	DataVolume *corev1.PersistentVolumeClaimVolumeSource `json:"dataVolume,omitempty"`

	// CheckpointDir is where checkpoints are written (v1: checkpoint.path).
	// +kubebuilder:validation:Pattern=`^/`
	// +optional
	CheckpointDir string `json:"checkpointDir,omitempty"`

	// CheckpointInterval in epochs (v1: checkpoint.frequency).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:default=1
	// +optional
	CheckpointInterval int32 `json:"checkpointInterval,omitempty"`

	// Hyperparameters are strings, numbers or booleans (at most 256, as in v1).
	// +kubebuilder:validation:MaxProperties=256
	// +optional
	Hyperparameters map[string]mlv1.HyperparameterValue `json:"hyperparameters,omitempty"`

	// RestartPolicy: OnFailure or Never.
	// +kubebuilder:validation:Enum=OnFailure;Never
	// +kubebuilder:default=OnFailure
	// +optional
	RestartPolicy string `json:"restartPolicy,omitempty"`
}

// TrainingJobPhase is the v1alpha1 summary of a job's state.
// +kubebuilder:validation:Enum=Pending;Running;Succeeded;Failed
type TrainingJobPhase string

// v1alpha1 phases.
const (
	PhasePending   TrainingJobPhase = "Pending"
	PhaseRunning   TrainingJobPhase = "Running"
	PhaseSucceeded TrainingJobPhase = "Succeeded"
	PhaseFailed    TrainingJobPhase = "Failed"
)

// TrainingJobStatus is the v1alpha1 observed state.
type TrainingJobStatus struct {
	// Phase: Pending, Running, Succeeded or Failed.
	// +optional
	Phase TrainingJobPhase `json:"phase,omitempty"`
	// StartTime of the job.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// CompletionTime of the job.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
	// WorkerStatuses, one per worker.
	// +optional
	WorkerStatuses []WorkerStatus `json:"workerStatuses,omitempty"`
	// Conditions of the job.
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// ObservedGeneration is the spec generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// WorkerStatus is one worker's pod.
type WorkerStatus struct {
	// WorkerID is the worker's rank.
	WorkerID int32 `json:"workerId"`
	// PodName of the worker.
	PodName string `json:"podName"`
	// Phase of the pod.
	// +optional
	Phase corev1.PodPhase `json:"phase,omitempty"`
	// RestartCount of the worker container.
	// +optional
	RestartCount int32 `json:"restartCount,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:deprecatedversion:warning="ml.example.com/v1alpha1 TrainingJob is deprecated; use ml.example.com/v1"
// +kubebuilder:resource:shortName=tj,categories=ml
// +kubebuilder:printcolumn:name="Framework",type=string,JSONPath=`.spec.framework`
// +kubebuilder:printcolumn:name="Workers",type=integer,JSONPath=`.spec.workers`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// TrainingJob (v1alpha1, deprecated) runs distributed training. Served for
// existing manifests; stored as v1.
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
