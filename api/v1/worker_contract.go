package v1

import (
	"slices"
	"strings"
)

// The worker contract: what the operator puts in every worker's environment
// (docs/trainingjob.md#environment), the bounds of the fields that shape a
// gang, and the names spec.env may therefore not set. The controller builds
// the environment from these names, and the admission webhook refuses the
// reserved ones, so both read the one list below.

// Variables the operator sets by their exact name.
const (
	EnvMasterAddr                  = "MASTER_ADDR"
	EnvMasterPort                  = "MASTER_PORT"
	EnvWorldSize                   = "WORLD_SIZE"
	EnvRank                        = "RANK"
	EnvNodeRank                    = "NODE_RANK"
	EnvLocalWorldSize              = "LOCAL_WORLD_SIZE"
	EnvNumWorkers                  = "NUM_WORKERS"
	EnvGPUsPerWorker               = "GPUS_PER_WORKER"
	EnvModel                       = "MODEL"
	EnvDataset                     = "DATASET"
	EnvResumeFromCheckpoint        = "RESUME_FROM_CHECKPOINT"
	EnvPodName                     = "POD_NAME"
	EnvPodIP                       = "POD_IP"
	EnvPythonUnbuffered            = "PYTHONUNBUFFERED"
	EnvTFConfig                    = "TF_CONFIG"
	EnvNCCLAsyncErrorHandling      = "NCCL_ASYNC_ERROR_HANDLING"
	EnvTorchNCCLAsyncErrorHandling = "TORCH_NCCL_ASYNC_ERROR_HANDLING"
)

// Prefixes of the variables the launchers and libraries read: each reads
// every name with its prefix (torchrun each of its flags as PET_<FLAG>, JAX
// each of its options as JAX_<OPTION>, MLflow its client settings such as
// MLFLOW_TRACKING_TOKEN, xgboost's tracker DMLC_*). The operator sets a few
// of each, which are reserved by name (ReservedEnvNames); the others
// (PET_REDIRECTS, PET_TEE, PET_MAX_RESTARTS, JAX_PLATFORMS,
// MLFLOW_TRACKING_TOKEN, DMLC_INTERFACE, ...) stay the user's to set in
// spec.env.
const (
	// EnvPrefixTorchrun is torchrun's PET_*.
	EnvPrefixTorchrun = "PET_"
	// EnvPrefixXGBoost is xgboost's DMLC_* tracker settings.
	EnvPrefixXGBoost = "DMLC_"
	// EnvPrefixJAX is JAX's options.
	EnvPrefixJAX = "JAX_"
	// EnvPrefixMLflow is MLflow's client settings.
	EnvPrefixMLflow = "MLFLOW_"
)

// Prefixes of the variable families that are the operator's own: every
// name with one of them is the operator's.
const (
	// EnvPrefixHyperparameter is HYPERPARAM_<KEY>, one per hyperparameter.
	EnvPrefixHyperparameter = "HYPERPARAM_"
	// EnvPrefixCheckpoint is the checkpoint settings.
	EnvPrefixCheckpoint = "CHECKPOINT_"
)

// The members of the families.
const (
	EnvPETNNodes           = EnvPrefixTorchrun + "NNODES"
	EnvPETNProcPerNode     = EnvPrefixTorchrun + "NPROC_PER_NODE"
	EnvPETNodeRank         = EnvPrefixTorchrun + EnvNodeRank
	EnvPETMasterAddr       = EnvPrefixTorchrun + EnvMasterAddr
	EnvPETMasterPort       = EnvPrefixTorchrun + EnvMasterPort
	EnvCheckpointDir       = EnvPrefixCheckpoint + "DIR"
	EnvCheckpointFrequency = EnvPrefixCheckpoint + "FREQUENCY"
	EnvCheckpointKeepLast  = EnvPrefixCheckpoint + "KEEP_LAST"
	EnvCheckpointURI       = EnvPrefixCheckpoint + "URI"
	// EnvCheckpointAttempt is the attempt the pod belongs to (its
	// LabelRestartAttempt, through the downward API): a trainer stamps it
	// on the checkpoints it writes and reports it back for the checkpoint
	// it resumed from (training_checkpoint_attempt).
	EnvCheckpointAttempt     = EnvPrefixCheckpoint + "ATTEMPT"
	EnvDMLCTrackerURI        = EnvPrefixXGBoost + "TRACKER_URI"
	EnvDMLCTrackerPort       = EnvPrefixXGBoost + "TRACKER_PORT"
	EnvDMLCTaskID            = EnvPrefixXGBoost + "TASK_ID"
	EnvDMLCNumWorker         = EnvPrefixXGBoost + "NUM_WORKER"
	EnvJAXCoordinatorAddress = EnvPrefixJAX + "COORDINATOR_ADDRESS"
	EnvJAXNumProcesses       = EnvPrefixJAX + "NUM_PROCESSES"
	EnvJAXProcessID          = EnvPrefixJAX + "PROCESS_ID"
	EnvMLflowTrackingURI     = EnvPrefixMLflow + "TRACKING_URI"
	EnvMLflowExperimentName  = EnvPrefixMLflow + "EXPERIMENT_NAME"
	EnvMLflowRunName         = EnvPrefixMLflow + "RUN_NAME"
)

// JAXInitializeCall is the one line a JAX trainer calls on the operator's
// pods (after `import os, jax`). jax.distributed.initialize() reads
// JAX_COORDINATOR_ADDRESS itself but never JAX_NUM_PROCESSES or
// JAX_PROCESS_ID: with no arguments it takes the process count and id from
// its cluster detection (Open MPI, Slurm, Cloud TPU, or a Kubernetes batch
// Job with completionMode Indexed, the `kubernetes` Python client and RBAC
// to list pods), none of which a TrainingJob's pods are. So the call passes
// both, and turns the detection off so that an installed `kubernetes`
// client is never consulted. Read from JAX v0.11.0 (commit a1521744c6dc):
// jax/_src/distributed.py lines 76-93 and 98-111, jax/_src/clusters/
// cluster.py lines 65-86, jax/_src/clusters/k8s_cluster.py lines 72-89,
// 145, 183 and 274-280; cluster_detection_method="deactivate" exists since
// JAX 0.4.36. docs/trainingjob.md and docs/decisions.md say the same.
const JAXInitializeCall = `jax.distributed.initialize(num_processes=int(os.environ["` + EnvJAXNumProcesses +
	`"]), process_id=int(os.environ["` + EnvJAXProcessID + `"]), cluster_detection_method="deactivate")`

// EnvNCCLDebug is set to WARN with the nccl backend as a default only: the
// user's spec.env comes after it and may turn NCCL's logging up, so it is
// not reserved (docs/admission.md).
const EnvNCCLDebug = "NCCL_DEBUG"

// EnvHome points at a writable emptyDir (the admin's --pod-home, default
// /home/ml-operator) so caches work whatever UID the pod runs as; spec.env
// may point it elsewhere.
const EnvHome = "HOME"

// ReservedEnvNames are the variables the operator sets by exact name; a
// TrainingJob may not set them in spec.env.
var ReservedEnvNames = []string{
	EnvMasterAddr, EnvMasterPort, EnvWorldSize, EnvRank, EnvNodeRank, EnvLocalWorldSize,
	EnvNumWorkers, EnvGPUsPerWorker, EnvModel, EnvDataset, EnvResumeFromCheckpoint,
	EnvPodName, EnvPodIP, EnvPythonUnbuffered, EnvTFConfig,
	EnvNCCLAsyncErrorHandling, EnvTorchNCCLAsyncErrorHandling,
	EnvPETNNodes, EnvPETNProcPerNode, EnvPETNodeRank, EnvPETMasterAddr, EnvPETMasterPort,
	EnvDMLCTrackerURI, EnvDMLCTrackerPort, EnvDMLCTaskID, EnvDMLCNumWorker,
	EnvJAXCoordinatorAddress, EnvJAXNumProcesses, EnvJAXProcessID,
	EnvMLflowTrackingURI, EnvMLflowExperimentName, EnvMLflowRunName,
}

// ReservedEnvPrefixes are the prefixes of the operator's own variable
// families: hyperparameters and checkpoint settings. The launchers'
// prefixes (PET_, JAX_, MLFLOW_, DMLC_) are not reserved: only the names of
// them the operator sets are (ReservedEnvNames).
var ReservedEnvPrefixes = []string{EnvPrefixHyperparameter, EnvPrefixCheckpoint}

// OverridableEnvNames are the variables the operator sets as defaults that
// spec.env may override (it comes after them).
var OverridableEnvNames = []string{EnvNCCLDebug, EnvHome}

// IsReservedEnvName reports whether the operator sets the variable name, so
// spec.env may not.
func IsReservedEnvName(name string) bool {
	if slices.Contains(ReservedEnvNames, name) {
		return true
	}
	return slices.ContainsFunc(ReservedEnvPrefixes, func(p string) bool { return strings.HasPrefix(name, p) })
}

// HyperparameterEnvName is the variable a hyperparameter is exported as:
// HYPERPARAM_<KEY upper-cased>.
func HyperparameterEnvName(key string) string { return EnvPrefixHyperparameter + strings.ToUpper(key) }

// Bounds of the fields that shape a gang. The CRD schema's markers on
// TrainingJobSpec repeat them for clusters without the webhooks (markers
// cannot name a constant; TestBoundsMatchTheSchema keeps them equal).
const (
	// MinNumWorkers is the fewest ranks, and numWorkers' default.
	MinNumWorkers = 1
	// MaxNumWorkers is the most ranks.
	MaxNumWorkers = 100
	// DefaultGPUsPerWorker is gpusPerWorker when unset.
	DefaultGPUsPerWorker = 1
	// MaxGPUsPerWorker is the most GPUs one worker may request.
	MaxGPUsPerWorker = 8
	// MaxTerminationGracePeriodSeconds bounds
	// spec.template.terminationGracePeriodSeconds (0 up to it): an hour
	// to save a checkpoint at SIGTERM, longer than any drain or spot
	// notice waits (docs/decisions.md).
	MaxTerminationGracePeriodSeconds = 3600
)

// Bounds of spec.hyperparameters. Every hyperparameter is an environment
// variable of every worker and a line of the job's ConfigMap: Linux refuses
// to start a process with one variable over 128 KiB, a ConfigMap holds at
// most 1 MiB, and a job object at most 1.5 MiB in etcd. Hyperparameters are
// scalars (a learning rate, an optimizer's name); bigger configuration
// belongs in the image, the dataset or a volume.
const (
	// MaxHyperparameters is the number of keys (the v1 and v1alpha1 schemas'
	// maxProperties too, for clusters without the webhooks).
	MaxHyperparameters = 256
	// MaxHyperparameterValueBytes bounds one value's JSON text.
	MaxHyperparameterValueBytes = 4096
	// MaxHyperparametersBytes bounds all keys and values together.
	MaxHyperparametersBytes = 64 * 1024
)

// DefaultCheckpointSize is the size of the checkpoint PVC when
// checkpoint.storage.size is not given.
const DefaultCheckpointSize = "10Gi"
