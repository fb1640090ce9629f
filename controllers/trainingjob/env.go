package trainingjob

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"sort"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

// workerHost is a rank's stable DNS name inside the headless Service.
func workerHost(job *mlv1.TrainingJob, rank int32) string {
	return fmt.Sprintf("%s.%s.%s.svc", mlv1.WorkerPodName(job.Name, rank), mlv1.WorkersServiceName(job.Name), job.Namespace)
}

// workerEnv is the environment of a rank, in the order API.md lists it,
// followed by the user's spec.env.
func workerEnv(job *mlv1.TrainingJob, rank int32) []corev1.EnvVar {
	spec := &job.Spec
	master := mlv1.MasterAddr(job.Name, job.Namespace)
	port := strconv.Itoa(int(spec.EffectiveMasterPort()))
	nproc := strconv.Itoa(int(spec.EffectiveNProcPerNode()))
	// The ranks of the current attempt: numWorkers, or fewer while an
	// elastic job runs shrunk.
	nnodes := strconv.Itoa(int(job.AttemptWorkers()))
	r := strconv.Itoa(int(rank))

	env := []corev1.EnvVar{
		{Name: mlv1.EnvMasterAddr, Value: master},
		{Name: mlv1.EnvMasterPort, Value: port},
		{Name: mlv1.EnvWorldSize, Value: strconv.Itoa(int(job.AttemptWorldSize()))},
		{Name: mlv1.EnvRank, Value: r},
		{Name: mlv1.EnvNodeRank, Value: r},
		{Name: mlv1.EnvLocalWorldSize, Value: nproc},
		{Name: mlv1.EnvNumWorkers, Value: nnodes},
		{Name: mlv1.EnvGPUsPerWorker, Value: strconv.Itoa(int(spec.EffectiveGPUs()))},
		{Name: mlv1.EnvPETNNodes, Value: spec.TorchrunNNodes(job.AttemptWorkers())},
		{Name: mlv1.EnvPETNProcPerNode, Value: nproc},
		{Name: mlv1.EnvPETNodeRank, Value: r},
		{Name: mlv1.EnvPETMasterAddr, Value: master},
		{Name: mlv1.EnvPETMasterPort, Value: port},
	}
	env = append(env, elasticEnv(job, rank)...)
	if spec.Model != "" {
		env = append(env, corev1.EnvVar{Name: mlv1.EnvModel, Value: spec.Model})
	}
	if spec.Dataset != "" {
		env = append(env, corev1.EnvVar{Name: mlv1.EnvDataset, Value: spec.Dataset})
	}
	env = append(env, hyperparameterEnv(spec)...)
	if spec.CheckpointEnabled() {
		env = append(env,
			corev1.EnvVar{Name: mlv1.EnvCheckpointDir, Value: spec.EffectiveCheckpointPath()},
			corev1.EnvVar{Name: mlv1.EnvCheckpointFrequency, Value: strconv.Itoa(int(spec.EffectiveCheckpointFrequency()))},
			corev1.EnvVar{Name: mlv1.EnvCheckpointKeepLast, Value: strconv.Itoa(int(spec.EffectiveCheckpointKeepLast()))},
			corev1.EnvVar{Name: mlv1.EnvCheckpointAttempt, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{
				APIVersion: "v1", FieldPath: "metadata.labels['" + mlv1.LabelRestartAttempt + "']"}}},
		)
		if spec.EffectiveCheckpointStorageType() != mlv1.StorageTypePVC {
			env = append(env, corev1.EnvVar{Name: mlv1.EnvCheckpointURI, Value: spec.Checkpoint.Storage.URI})
		}
		if cp := job.Status.LastCheckpoint; cp != nil {
			path := cp.Path
			if path == "" {
				path = spec.CheckpointLocation(cp.Epoch)
			}
			env = append(env, corev1.EnvVar{Name: mlv1.EnvResumeFromCheckpoint, Value: path})
		}
	}
	env = append(env,
		corev1.EnvVar{Name: mlv1.EnvPodName, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}},
		corev1.EnvVar{Name: mlv1.EnvPodIP, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "status.podIP"}}},
		corev1.EnvVar{Name: mlv1.EnvPythonUnbuffered, Value: "1"},
	)
	if spec.EffectiveBackend() == mlv1.BackendNCCL {
		// Async error handling makes a rank whose peer died abort its pending
		// collectives instead of hanging, so the gang restart can happen.
		env = append(env,
			corev1.EnvVar{Name: mlv1.EnvNCCLAsyncErrorHandling, Value: "1"},
			corev1.EnvVar{Name: mlv1.EnvTorchNCCLAsyncErrorHandling, Value: "1"},
			corev1.EnvVar{Name: mlv1.EnvNCCLDebug, Value: "WARN"},
		)
	}
	switch spec.EffectiveFramework() {
	case mlv1.FrameworkTensorFlow:
		env = append(env, corev1.EnvVar{Name: mlv1.EnvTFConfig, Value: tfConfig(job, rank)})
	case mlv1.FrameworkXGBoost:
		env = append(env,
			corev1.EnvVar{Name: mlv1.EnvDMLCTrackerURI, Value: master},
			corev1.EnvVar{Name: mlv1.EnvDMLCTrackerPort, Value: port},
			corev1.EnvVar{Name: mlv1.EnvDMLCTaskID, Value: r},
			corev1.EnvVar{Name: mlv1.EnvDMLCNumWorker, Value: nnodes},
		)
	case mlv1.FrameworkJAX:
		// One JAX process per pod; it drives all of the pod's local devices.
		env = append(env,
			corev1.EnvVar{Name: mlv1.EnvJAXCoordinatorAddress, Value: master + ":" + port},
			corev1.EnvVar{Name: mlv1.EnvJAXNumProcesses, Value: nnodes},
			corev1.EnvVar{Name: mlv1.EnvJAXProcessID, Value: r},
		)
	}
	if t := spec.Tracking; t != nil && t.MLflow != nil {
		env = append(env,
			corev1.EnvVar{Name: mlv1.EnvMLflowTrackingURI, Value: t.MLflow.TrackingURI},
			corev1.EnvVar{Name: mlv1.EnvMLflowExperimentName, Value: t.MLflow.ExperimentName},
			corev1.EnvVar{Name: mlv1.EnvMLflowRunName, Value: job.Namespace + "/" + job.Name},
		)
	}
	return append(env, spec.Env...)
}

// elasticEnv is torchrun's elastic rendezvous for an elastic job (none for
// another): c10d on rank 0's stable DNS name at the rendezvous port, the
// job's UID as the rendezvous id (its name if it has none yet), rank 0's
// agent hosting the rendezvous store (mlv1.ElasticRendezvousConf), and no
// restarts by torchrun, since the operator restarts gangs. PET_NNODES,
// "<minWorkers>:<maxWorkers>", is set with the static variables.
func elasticEnv(job *mlv1.TrainingJob, rank int32) []corev1.EnvVar {
	if job.Spec.Elastic == nil {
		return nil
	}
	id := string(job.UID)
	if id == "" {
		id = job.Name
	}
	return []corev1.EnvVar{
		{Name: mlv1.EnvPETRdzvBackend, Value: mlv1.ElasticRendezvousBackend},
		{Name: mlv1.EnvPETRdzvEndpoint, Value: job.Spec.ElasticRendezvousEndpoint(job.Name, job.Namespace)},
		{Name: mlv1.EnvPETRdzvID, Value: id},
		{Name: mlv1.EnvPETRdzvConf, Value: mlv1.ElasticRendezvousConf(rank)},
		{Name: mlv1.EnvPETMaxRestarts, Value: strconv.Itoa(mlv1.ElasticMaxRestarts)},
	}
}

// hyperparameterEnv is mlv1.HyperparameterEnvName(key) for every
// hyperparameter, sorted by key.
func hyperparameterEnv(spec *mlv1.TrainingJobSpec) []corev1.EnvVar {
	keys := make([]string, 0, len(spec.Hyperparameters))
	for k := range spec.Hyperparameters {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	env := make([]corev1.EnvVar, 0, len(keys))
	for _, k := range keys {
		env = append(env, corev1.EnvVar{Name: mlv1.HyperparameterEnvName(k), Value: spec.Hyperparameters[k].String()})
	}
	return env
}

// TFConfig is TensorFlow's TF_CONFIG: the cluster spec of every task and
// this task's place in it, as tf.distribute.cluster_resolver.TFConfigClusterResolver reads it.
type TFConfig struct {
	Cluster map[string][]string `json:"cluster"`
	Task    TFTask              `json:"task"`
}

// TFTask is the task part of TF_CONFIG.
type TFTask struct {
	Type  string `json:"type"`
	Index int32  `json:"index"`
}

// TensorFlow task types of TF_CONFIG.
const (
	tfTaskChief  = "chief"
	tfTaskWorker = "worker"
	tfTaskPS     = "ps"
)

// tfConfig is the TF_CONFIG of a worker rank. Without parameter servers
// every rank is a worker with index = rank (MultiWorkerMirroredStrategy,
// where worker 0 acts as chief). With parameter servers rank 0 is the
// `chief` task, the coordinator ParameterServerStrategy and Estimator
// training need, and rank r >= 1 is worker r-1.
func tfConfig(job *mlv1.TrainingJob, rank int32) string {
	if job.Spec.ParameterServers == 0 {
		return tfConfigFor(job, tfTaskWorker, rank)
	}
	if rank == 0 {
		return tfConfigFor(job, tfTaskChief, 0)
	}
	return tfConfigFor(job, tfTaskWorker, rank-1)
}

// tfConfigFor is the TF_CONFIG of a task of type chief, worker or ps. The
// cluster is the same for every task of the gang.
func tfConfigFor(job *mlv1.TrainingJob, taskType string, index int32) string {
	b, _ := json.Marshal(TFConfig{Cluster: tfCluster(job), Task: TFTask{Type: taskType, Index: index}})
	return string(b)
}

// tfCluster is the cluster part of TF_CONFIG: every task's address by type.
func tfCluster(job *mlv1.TrainingJob) map[string][]string {
	port := job.Spec.EffectiveMasterPort()
	cluster := map[string][]string{}
	for i := int32(0); i < job.AttemptWorkers(); i++ {
		kind := tfTaskWorker
		if i == 0 && job.Spec.ParameterServers > 0 {
			kind = tfTaskChief
		}
		cluster[kind] = append(cluster[kind], fmt.Sprintf("%s:%d", workerHost(job, i), port))
	}
	for i := int32(0); i < job.Spec.ParameterServers; i++ {
		cluster[tfTaskPS] = append(cluster[tfTaskPS], fmt.Sprintf("%s.%s.%s.svc:%d",
			mlv1.PSPodName(job.Name, i), mlv1.WorkersServiceName(job.Name), job.Namespace, port))
	}
	return cluster
}

// tfClusterHash is the LabelTFClusterHash of the job's pods: a short hash of
// its TF_CONFIG cluster (encoding/json sorts the task types, so the text is
// stable).
func tfClusterHash(job *mlv1.TrainingJob) string {
	b, _ := json.Marshal(tfCluster(job))
	h := fnv.New64a()
	h.Write(b)
	return strconv.FormatUint(h.Sum64(), 16)
}
