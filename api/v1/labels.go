package v1

// Labels, annotations and finalizers the operator puts on the objects it owns.
// They are part of the public contract: selectors, dashboards and other
// controllers may rely on them.
const (
	// LabelTrainingJob carries the owning TrainingJob's name on every child.
	LabelTrainingJob = "ml.example.com/trainingjob"
	// LabelRank carries a worker pod's rank (0-based).
	LabelRank = "ml.example.com/rank"
	// LabelReplicaType is "worker" or "ps" (TensorFlow parameter server).
	LabelReplicaType = "ml.example.com/replica-type"
	// LabelRestartAttempt carries the gang attempt a pod belongs to. Pods of an
	// older attempt than the job's current one are deleted, never reused.
	LabelRestartAttempt = "ml.example.com/restart-attempt"
	// LabelNumWorkers carries the numWorkers of the gang a pod was created
	// for. A gang whose pods carry another value than spec.numWorkers is
	// re-formed at the new size (reason Rescaled).
	LabelNumWorkers = "ml.example.com/num-workers"
	// LabelLabWorker is on every worker pod (not on parameter servers),
	// with the job's name: the Go operator lab's selector `kubectl get pods
	// -l trainingjob.ml.example.com/worker` (and `kubectl logs -l ...`)
	// finds the workers, `-l trainingjob.ml.example.com/worker=<job>` one
	// job's.
	LabelLabWorker = "trainingjob.ml.example.com/worker"
	// LabelTFClusterHash carries, on the pods of a TensorFlow job, a hash of
	// the TF_CONFIG cluster (every task's address) the gang was created
	// with. A gang whose hash is not the one the spec gives now (for example
	// parameterServers changed) is re-formed (reason Rescaled).
	LabelTFClusterHash = "ml.example.com/tf-cluster-hash"
	// LabelModelDeployment carries the owning ModelDeployment's name.
	LabelModelDeployment = "ml.example.com/modeldeployment"
	// LabelModelVersion carries the ModelDeployment version a child serves.
	LabelModelVersion = "ml.example.com/model-version"
	// LabelManagedBy is the standard managed-by label, set to ManagedByValue.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedByValue identifies this operator in LabelManagedBy.
	ManagedByValue = "ml-operator"

	// ReplicaTypeWorker marks worker pods.
	ReplicaTypeWorker = "worker"
	// ReplicaTypePS marks TensorFlow parameter-server pods.
	ReplicaTypePS = "ps"

	// TrainingJobFinalizer is held while the operator has cleanup to do that the
	// garbage collector cannot do (for example releasing a retained PVC).
	TrainingJobFinalizer = "ml.example.com/trainingjob-cleanup"

	// LabFinalizer is the Go operator lab's finalizer. This operator never
	// adds it; a job that carries it (added by the lab's operator, or by
	// hand following the lab) has it removed when deleted, so the
	// deletion completes (docs/decisions.md).
	LabFinalizer = "trainingjob.ml.example.com/finalizer"

	// MLflowRunFinalizer is held by a job tracked in MLflow while its run is
	// open, so that deleting the job still ends the run (KILLED) instead of
	// leaving it RUNNING. It never holds a deletion for long: when MLflow
	// cannot be reached after a few calls, an event says so and the
	// finalizer goes.
	MLflowRunFinalizer = "ml.example.com/mlflow-run"

	// AnnotationV1Spec keeps the v1-only parts of a TrainingJob on its
	// v1alpha1 form, so a v1 -> v1alpha1 -> v1 round trip is lossless.
	AnnotationV1Spec = "ml.example.com/v1-spec"
	// AnnotationV1Status keeps the v1-only status on the v1alpha1 form.
	AnnotationV1Status = "ml.example.com/v1-status"

	// AnnotationReadWriteMany on a StorageClass says whether its claims may
	// be ReadWriteMany ("true") or not ("false"), for provisioners
	// StorageClassReadWriteMany does not know. It decides the access mode of
	// the checkpoint claims of multi-pod jobs that set none.
	AnnotationReadWriteMany = "ml.example.com/read-write-many"

	// DefaultGPUResourceName is the extended resource used for GPUs.
	DefaultGPUResourceName = "nvidia.com/gpu"
)
