package trainingjob

import (
	"encoding/json"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/internal/integrations/podgroups"
	"github.com/ml-operator/ml-operator/internal/podsecurity"
)

// Names and paths the pods are built with. They are part of the documented
// contract (docs/trainingjob.md).
const (
	// TrainerContainerName is the worker container.
	TrainerContainerName = "trainer"
	// ShmMountPath is where the memory-backed emptyDir is mounted.
	ShmMountPath = "/dev/shm"

	checkpointVolume = "checkpoints"
	dataVolume       = "data"
	shmVolume        = "dshm"
	rendezvousPort   = "rendezvous"
	metricsPort      = "metrics"
)

// childLabels are the labels every child of a job carries. The manager's
// cache only sees objects with LabelManagedBy.
func childLabels(job *mlv1.TrainingJob) map[string]string {
	return map[string]string{
		mlv1.LabelTrainingJob: job.Name,
		mlv1.LabelManagedBy:   mlv1.ManagedByValue,
	}
}

// ownerRef makes job the controlling owner of a child.
func ownerRef(job *mlv1.TrainingJob) metav1.OwnerReference {
	return *metav1.NewControllerRef(job, mlv1.GroupVersion.WithKind("TrainingJob"))
}

// desiredWorkerPod is the pod of one rank in one gang attempt. With
// shareNode (the checkpoint claim no two nodes may mount), every rank but
// rank 0 runs on rank 0's node.
func desiredWorkerPod(job *mlv1.TrainingJob, rank, attempt int32, cfg *Config, shareNode bool) *corev1.Pod {
	spec := &job.Spec
	name := mlv1.WorkerPodName(job.Name, rank)

	labels := map[string]string{}
	for k, v := range spec.Template.Labels {
		labels[k] = v
	}
	// Our labels are set last so a template cannot take them away.
	for k, v := range childLabels(job) {
		labels[k] = v
	}
	labels[mlv1.LabelRank] = strconv.Itoa(int(rank))
	labels[mlv1.LabelReplicaType] = mlv1.ReplicaTypeWorker
	labels[mlv1.LabelLabWorker] = job.Name
	labels[mlv1.LabelRestartAttempt] = strconv.Itoa(int(attempt))
	// The gang's shape, as this pod is created for it: a resize is seen by
	// comparing these labels with the spec, never by reading the env back.
	labels[mlv1.LabelNumWorkers] = strconv.Itoa(int(job.AttemptWorkers()))
	if spec.EffectiveFramework() == mlv1.FrameworkTensorFlow {
		labels[mlv1.LabelTFClusterHash] = tfClusterHash(job)
	}

	var annotations map[string]string
	if len(spec.Template.Annotations) > 0 {
		annotations = map[string]string{}
		for k, v := range spec.Template.Annotations {
			annotations[k] = v
		}
	}

	gpus := spec.EffectiveGPUs()
	var nodeSelector map[string]string
	if gpus > 0 && len(cfg.GPUNodeSelector) > 0 {
		nodeSelector = map[string]string{}
		for k, v := range cfg.GPUNodeSelector {
			nodeSelector[k] = v
		}
	}
	if len(spec.Scheduling.NodeSelector) > 0 {
		if nodeSelector == nil {
			nodeSelector = map[string]string{}
		}
		for k, v := range spec.Scheduling.NodeSelector {
			nodeSelector[k] = v
		}
	}
	var tolerations []corev1.Toleration
	if gpus > 0 {
		// GPU nodes are conventionally tainted with the resource name.
		tolerations = append(tolerations, corev1.Toleration{
			Key:      string(spec.EffectiveGPUResourceName()),
			Operator: corev1.TolerationOpExists,
			Effect:   corev1.TaintEffectNoSchedule,
		})
	}
	tolerations = append(tolerations, spec.Scheduling.Tolerations...)

	// The admin's defaults (internal/podsecurity), unless the template
	// sets its own.
	podSC := spec.Template.PodSecurityContext
	if podSC == nil {
		podSC = cfg.PodSecurity.PodSecurityContext()
	}
	containerSC := spec.Template.SecurityContext
	if containerSC == nil {
		containerSC = podsecurity.ContainerSecurityContext()
	}

	volumes, mounts := workerVolumes(job)
	env := workerEnv(job, rank)
	if vol, mount, home, ok := cfg.PodSecurity.HomeVolume(); ok {
		// A writable HOME whatever UID runs: spec.env may point it
		// elsewhere (it comes after), template volumes follow.
		volumes = append([]corev1.Volume{vol}, volumes...)
		mounts = append([]corev1.VolumeMount{mount}, mounts...)
		n := len(env) - len(spec.Env)
		env = slices.Concat(env[:n:n], []corev1.EnvVar{home}, spec.Env)
	}

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:            name,
			Namespace:       job.Namespace,
			Labels:          labels,
			Annotations:     annotations,
			OwnerReferences: []metav1.OwnerReference{ownerRef(job)},
		},
		Spec: corev1.PodSpec{
			Hostname:      name,
			Subdomain:     mlv1.WorkersServiceName(job.Name),
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name:    TrainerContainerName,
				Image:   spec.EffectiveImage(cfg.DefaultImages),
				Command: workerCommand(spec, cfg),
				Args:    spec.Args,
				Env:     env,
				Ports: []corev1.ContainerPort{
					{Name: rendezvousPort, ContainerPort: spec.EffectiveMasterPort(), Protocol: corev1.ProtocolTCP},
					{Name: metricsPort, ContainerPort: spec.EffectiveMetricsPort(), Protocol: corev1.ProtocolTCP},
				},
				Resources:       workerResources(spec),
				VolumeMounts:    mounts,
				SecurityContext: containerSC,
			}},
			Volumes:            volumes,
			ServiceAccountName: spec.Template.ServiceAccountName,
			ImagePullSecrets:   spec.Template.ImagePullSecrets,
			SchedulerName:      spec.Scheduling.SchedulerName,
			PriorityClassName:  spec.Scheduling.PriorityClassName,
			NodeSelector:       nodeSelector,
			Tolerations:        tolerations,
			Affinity:           spec.Scheduling.Affinity,
			SecurityContext:    podSC,
			// How long SIGTERM precedes SIGKILL when the gang is ended: the
			// trainer's time to save a checkpoint (unset: the pod default).
			TerminationGracePeriodSeconds: copyInt64(spec.Template.TerminationGracePeriodSeconds),
		},
	}
	if q := spec.Scheduling.QueueName; q != "" {
		// Kueue's plain-pod group integration admits the gang as one unit. The
		// group is per attempt: a restarted gang is a new workload.
		podgroups.JoinKueueGroup(pod, q, mlv1.GangGroupName(job.Name, attempt), job.AttemptGangSize())
	}
	if shareNode && rank != 0 {
		onRankZerosNode(pod, job, attempt)
	}
	return pod
}

// copyInt64 is a copy of p, so that a pod never shares memory with its job.
func copyInt64(p *int64) *int64 {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// onRankZerosNode adds to pod a required affinity for the node of rank 0's
// pod of the same attempt, after the job's own affinity terms.
func onRankZerosNode(pod *corev1.Pod, job *mlv1.TrainingJob, attempt int32) {
	aff := pod.Spec.Affinity.DeepCopy()
	if aff == nil {
		aff = &corev1.Affinity{}
	}
	if aff.PodAffinity == nil {
		aff.PodAffinity = &corev1.PodAffinity{}
	}
	aff.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution = append(aff.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution,
		corev1.PodAffinityTerm{
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{
				mlv1.LabelTrainingJob:    job.Name,
				mlv1.LabelReplicaType:    mlv1.ReplicaTypeWorker,
				mlv1.LabelRank:           "0",
				mlv1.LabelRestartAttempt: strconv.Itoa(int(attempt)),
			}},
			TopologyKey: corev1.LabelHostname,
		})
	pod.Spec.Affinity = aff
}

// workerCommand is spec.command, or, when the job names neither a command
// nor args, the admin's default launch command for its framework
// (mlv1.LaunchTemplate) expanded for the job. A job with args only runs
// them under the image's entrypoint, as a Kubernetes container does.
func workerCommand(spec *mlv1.TrainingJobSpec, cfg *Config) []string {
	if len(spec.Command) > 0 || len(spec.Args) > 0 {
		return spec.Command
	}
	return cfg.DefaultCommands[string(spec.EffectiveFramework())].Expand(spec)
}

// desiredPSPod is a TensorFlow parameter server of a gang attempt: the
// worker pod's settings, without GPUs, named <name>-ps-<i>, with TF_CONFIG
// task type ps.
func desiredPSPod(job *mlv1.TrainingJob, index, attempt int32, cfg *Config, shareNode bool) *corev1.Pod {
	pod := desiredWorkerPod(job, index, attempt, cfg, false)
	if shareNode {
		onRankZerosNode(pod, job, attempt)
	}
	name := mlv1.PSPodName(job.Name, index)
	pod.Name, pod.Spec.Hostname = name, name
	pod.Labels[mlv1.LabelReplicaType] = mlv1.ReplicaTypePS
	delete(pod.Labels, mlv1.LabelLabWorker)
	c := &pod.Spec.Containers[0]
	gpu := job.Spec.EffectiveGPUResourceName()
	delete(c.Resources.Limits, gpu)
	delete(c.Resources.Requests, gpu)
	for k := range cfg.GPUNodeSelector {
		if _, user := job.Spec.Scheduling.NodeSelector[k]; !user {
			delete(pod.Spec.NodeSelector, k)
		}
	}
	if len(pod.Spec.NodeSelector) == 0 {
		pod.Spec.NodeSelector = nil
	}
	for i := range c.Env {
		if c.Env[i].Name == mlv1.EnvTFConfig {
			c.Env[i].Value = tfConfigFor(job, tfTaskPS, index)
		}
	}
	return pod
}

// desiredGang is a gang attempt as a gang scheduler's PodGroup describes
// it: every pod of the attempt (ranks and parameter servers) is a member.
func desiredGang(job *mlv1.TrainingJob, attempt int32, pods []*corev1.Pod) podgroups.Gang {
	labels := childLabels(job)
	labels[mlv1.LabelRestartAttempt] = strconv.Itoa(int(attempt))
	return podgroups.Gang{
		Namespace:         job.Namespace,
		Name:              mlv1.GangGroupName(job.Name, attempt),
		Labels:            labels,
		Siblings:          map[string]string{mlv1.LabelTrainingJob: job.Name},
		Owner:             ownerRef(job),
		MinMember:         job.AttemptGangSize(),
		Pods:              pods,
		PriorityClassName: job.Spec.Scheduling.PriorityClassName,
	}
}

// workerResources are spec.resources with the GPUs set as requests = limits.
func workerResources(spec *mlv1.TrainingJobSpec) corev1.ResourceRequirements {
	res := *spec.Resources.DeepCopy()
	gpus := spec.EffectiveGPUs()
	if gpus == 0 {
		return res
	}
	q := *resource.NewQuantity(int64(gpus), resource.DecimalSI)
	name := spec.EffectiveGPUResourceName()
	if res.Limits == nil {
		res.Limits = corev1.ResourceList{}
	}
	if res.Requests == nil {
		res.Requests = corev1.ResourceList{}
	}
	res.Limits[name] = q
	res.Requests[name] = q
	return res
}

// workerVolumes are the checkpoint, data, /dev/shm and template volumes, and
// the trainer container's mounts of them.
func workerVolumes(job *mlv1.TrainingJob) ([]corev1.Volume, []corev1.VolumeMount) {
	spec := &job.Spec
	var volumes []corev1.Volume
	var mounts []corev1.VolumeMount
	if claim := job.CheckpointClaimName(); claim != "" {
		volumes = append(volumes, corev1.Volume{Name: checkpointVolume, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim},
		}})
		mounts = append(mounts, corev1.VolumeMount{Name: checkpointVolume, MountPath: spec.EffectiveCheckpointPath()})
	}
	if dv := spec.DataVolume; dv != nil {
		volumes = append(volumes, corev1.Volume{Name: dataVolume, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: dv.ClaimName, ReadOnly: dv.ReadOnly},
		}})
		mounts = append(mounts, corev1.VolumeMount{Name: dataVolume, MountPath: dv.EffectiveDataMountPath(), ReadOnly: dv.ReadOnly})
	}
	// NCCL and PyTorch data loaders need more shared memory than the
	// container runtime's 64Mi default.
	volumes = append(volumes, corev1.Volume{Name: shmVolume, VolumeSource: corev1.VolumeSource{
		EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory},
	}})
	mounts = append(mounts, corev1.VolumeMount{Name: shmVolume, MountPath: ShmMountPath})
	volumes = append(volumes, spec.Template.Volumes...)
	mounts = append(mounts, spec.Template.VolumeMounts...)
	return volumes, mounts
}

// desiredService is the headless Service that gives every rank a stable DNS
// name. Addresses are published before pods are ready: ranks rendezvous
// before any readiness could be reported.
func desiredService(job *mlv1.TrainingJob) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name:            mlv1.WorkersServiceName(job.Name),
			Namespace:       job.Namespace,
			Labels:          childLabels(job),
			OwnerReferences: []metav1.OwnerReference{ownerRef(job)},
		},
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			Selector:                 childLabels(job),
			PublishNotReadyAddresses: true,
			Ports: []corev1.ServicePort{{
				Name:     rendezvousPort,
				Port:     job.Spec.EffectiveMasterPort(),
				Protocol: corev1.ProtocolTCP,
			}},
		},
	}
}

// desiredConfigMap holds the job's settings for tools and trainers that read
// files rather than the environment.
func desiredConfigMap(job *mlv1.TrainingJob) *corev1.ConfigMap {
	spec := &job.Spec
	hp := spec.Hyperparameters
	if hp == nil {
		hp = map[string]mlv1.HyperparameterValue{}
	}
	// encoding/json sorts map keys, so the document is stable.
	hpJSON, _ := json.Marshal(hp)
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name:            mlv1.ConfigMapName(job.Name),
			Namespace:       job.Namespace,
			Labels:          childLabels(job),
			OwnerReferences: []metav1.OwnerReference{ownerRef(job)},
		},
		Data: map[string]string{
			"model":                spec.Model,
			"dataset":              spec.Dataset,
			"framework":            string(spec.EffectiveFramework()),
			"backend":              string(spec.EffectiveBackend()),
			"masterPort":           strconv.Itoa(int(spec.EffectiveMasterPort())),
			"hyperparameters.json": string(hpJSON),
		},
	}
}

// desiredPVC is the checkpoint PVC, or nil when the job uses none of its
// own. sharedClass says whether its StorageClass serves volumes many nodes
// may mount (mlv1.TrainingJobSpec.CheckpointAccessModes).
// A retained PVC (checkpoint.retainOnDelete, the default) has no owner
// reference, only the job's labels: any owner reference would let the garbage
// collector delete it, and a foreground deletion (kubectl
// --cascade=foreground, Argo CD) deletes dependents before any finalizer of
// ours could release them.
func desiredPVC(job *mlv1.TrainingJob, sharedClass bool) *corev1.PersistentVolumeClaim {
	spec := &job.Spec
	if !spec.UsesCheckpointPVC() {
		return nil
	}
	size := resource.MustParse(mlv1.DefaultCheckpointSize)
	if s := spec.Checkpoint.Storage.Size; s != nil {
		size = *s
	}
	var owners []metav1.OwnerReference
	if !spec.RetainCheckpoints() {
		owners = []metav1.OwnerReference{ownerRef(job)}
	}
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name:            mlv1.CheckpointPVCName(job.Name),
			Namespace:       job.Namespace,
			Labels:          childLabels(job),
			OwnerReferences: owners,
		},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      spec.CheckpointAccessModes(sharedClass),
			StorageClassName: spec.Checkpoint.Storage.StorageClassName,
			Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: size},
			},
		},
	}
}

// DesiredWorkerPod is the pod the operator creates for a rank in a gang
// attempt whose checkpoint claim many nodes may mount (without the affinity
// for rank 0's node a ReadWriteOnce claim adds). It is exported for tests
// that run the generated environment and command under real launchers
// (test/torch).
func DesiredWorkerPod(job *mlv1.TrainingJob, rank, attempt int32, cfg Config) *corev1.Pod {
	return desiredWorkerPod(job, rank, attempt, &cfg, false)
}
