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

// Prefixes of the variable families the operator sets: every name with one
// of them is the operator's.
const (
	// EnvPrefixTorchrun is torchrun's PET_* (its command-line flags).
	EnvPrefixTorchrun = "PET_"
	// EnvPrefixHyperparameter is HYPERPARAM_<KEY>, one per hyperparameter.
	EnvPrefixHyperparameter = "HYPERPARAM_"
	// EnvPrefixCheckpoint is the checkpoint settings.
	EnvPrefixCheckpoint = "CHECKPOINT_"
	// EnvPrefixXGBoost is xgboost's DMLC_* tracker settings.
	EnvPrefixXGBoost = "DMLC_"
	// EnvPrefixJAX is jax.distributed's settings.
	EnvPrefixJAX = "JAX_"
	// EnvPrefixMLflow is MLflow's tracking settings.
	EnvPrefixMLflow = "MLFLOW_"
)

// The members of the families.
const (
	EnvPETNNodes             = EnvPrefixTorchrun + "NNODES"
	EnvPETNProcPerNode       = EnvPrefixTorchrun + "NPROC_PER_NODE"
	EnvPETNodeRank           = EnvPrefixTorchrun + EnvNodeRank
	EnvPETMasterAddr         = EnvPrefixTorchrun + EnvMasterAddr
	EnvPETMasterPort         = EnvPrefixTorchrun + EnvMasterPort
	EnvCheckpointDir         = EnvPrefixCheckpoint + "DIR"
	EnvCheckpointFrequency   = EnvPrefixCheckpoint + "FREQUENCY"
	EnvCheckpointKeepLast    = EnvPrefixCheckpoint + "KEEP_LAST"
	EnvCheckpointURI         = EnvPrefixCheckpoint + "URI"
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

// EnvNCCLDebug is set to WARN with the nccl backend as a default only: the
// user's spec.env comes after it and may turn NCCL's logging up, so it is
// not reserved (docs/admission.md).
const EnvNCCLDebug = "NCCL_DEBUG"

// ReservedEnvNames are the variables the operator sets by exact name; a
// TrainingJob may not set them in spec.env.
var ReservedEnvNames = []string{
	EnvMasterAddr, EnvMasterPort, EnvWorldSize, EnvRank, EnvNodeRank, EnvLocalWorldSize,
	EnvNumWorkers, EnvGPUsPerWorker, EnvModel, EnvDataset, EnvResumeFromCheckpoint,
	EnvPodName, EnvPodIP, EnvPythonUnbuffered, EnvTFConfig,
	EnvNCCLAsyncErrorHandling, EnvTorchNCCLAsyncErrorHandling,
}

// ReservedEnvPrefixes are the prefixes of the variable families the operator
// sets: torchrun's PET_*, hyperparameters, checkpoint settings, xgboost's
// DMLC_*, JAX_* and MLFLOW_*.
var ReservedEnvPrefixes = []string{
	EnvPrefixTorchrun, EnvPrefixHyperparameter, EnvPrefixCheckpoint, EnvPrefixXGBoost, EnvPrefixJAX, EnvPrefixMLflow,
}

// OverridableEnvNames are the variables the operator sets as defaults that
// spec.env may override (it comes after them).
var OverridableEnvNames = []string{EnvNCCLDebug}

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
