package v1

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// The helpers below give the effective value of fields whose default depends
// on other fields. The defaulting webhook writes these values into the spec;
// the controller reads them through the same functions, so a job created
// while the webhook was unavailable behaves the same.

// EffectiveGPUs is gpusPerWorker, DefaultGPUsPerWorker (1) when unset.
func (s *TrainingJobSpec) EffectiveGPUs() int32 {
	if s.GPUsPerWorker == nil {
		return DefaultGPUsPerWorker
	}
	return *s.GPUsPerWorker
}

// EffectiveNumWorkers is numWorkers, MinNumWorkers (1) when unset.
func (s *TrainingJobSpec) EffectiveNumWorkers() int32 {
	if s.NumWorkers < MinNumWorkers {
		return MinNumWorkers
	}
	return s.NumWorkers
}

// EffectiveNProcPerNode is nprocPerNode, or gpusPerWorker, or 1 without GPUs.
func (s *TrainingJobSpec) EffectiveNProcPerNode() int32 {
	if s.NProcPerNode != nil && *s.NProcPerNode > 0 {
		return *s.NProcPerNode
	}
	if g := s.EffectiveGPUs(); g > 0 {
		return g
	}
	return 1
}

// WorldSize is the total number of processes: numWorkers x nprocPerNode.
func (s *TrainingJobSpec) WorldSize() int32 {
	return s.EffectiveNumWorkers() * s.EffectiveNProcPerNode()
}

// EffectiveBackend is networking.backend, or nccl with GPUs, else gloo.
func (s *TrainingJobSpec) EffectiveBackend() CommunicationBackend {
	if s.Networking.Backend != "" {
		return s.Networking.Backend
	}
	if s.EffectiveGPUs() > 0 {
		return BackendNCCL
	}
	return BackendGloo
}

// EffectiveMasterPort is networking.masterPort, 29500 when unset.
func (s *TrainingJobSpec) EffectiveMasterPort() int32 {
	if s.Networking.MasterPort == 0 {
		return 29500
	}
	return s.Networking.MasterPort
}

// EffectiveGPUResourceName is gpuResourceName, nvidia.com/gpu when unset.
func (s *TrainingJobSpec) EffectiveGPUResourceName() corev1.ResourceName {
	if s.GPUResourceName == "" {
		return DefaultGPUResourceName
	}
	return corev1.ResourceName(s.GPUResourceName)
}

// CheckpointAccessModes are the access modes of the checkpoint PVC the
// operator creates: checkpoint.storage.accessModes when set; else
// ReadWriteMany when the gang has more than one pod and the claim's
// StorageClass can give it (sharedClass, see StorageClassReadWriteMany);
// else ReadWriteOnce, and the gang's pods share rank 0's node
// (RanksShareANode).
func (s *TrainingJobSpec) CheckpointAccessModes(sharedClass bool) []corev1.PersistentVolumeAccessMode {
	if len(s.Checkpoint.Storage.AccessModes) > 0 {
		return s.Checkpoint.Storage.AccessModes
	}
	if s.GangSize() > 1 && sharedClass {
		return []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}
	}
	return []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
}

// RanksShareANode reports whether a gang whose checkpoint claim has these
// access modes must run on one node: a claim that no two nodes may mount
// (no ReadWriteMany, no ReadOnlyMany) is mounted by every pod of the gang.
func (s *TrainingJobSpec) RanksShareANode(claimModes []corev1.PersistentVolumeAccessMode) bool {
	if s.GangSize() < 2 || len(claimModes) == 0 {
		return false
	}
	return !slices.Contains(claimModes, corev1.ReadWriteMany) && !slices.Contains(claimModes, corev1.ReadOnlyMany)
}

// GangSize is the number of pods of one attempt: the ranks and, for
// tensorflow, the parameter servers.
func (s *TrainingJobSpec) GangSize() int32 {
	n := s.EffectiveNumWorkers()
	if s.EffectiveFramework() == FrameworkTensorFlow {
		n += s.ParameterServers
	}
	return n
}

// StorageClassReadWriteMany reports whether claims of the StorageClass
// (its provisioner and annotations) may be ReadWriteMany: the class's
// AnnotationReadWriteMany ("true" or "false") when set, else whether its
// provisioner is one of ReadWriteManyProvisioners. Kubernetes publishes no
// StorageClass's access modes; the admin's annotation is the authority.
func StorageClassReadWriteMany(provisioner string, annotations map[string]string) bool {
	switch annotations[AnnotationReadWriteMany] {
	case "true":
		return true
	case "false":
		return false
	}
	return slices.Contains(ReadWriteManyProvisioners, provisioner)
}

// ReadWriteManyProvisioners are provisioners of shared file systems, whose
// volumes any number of nodes may mount read-write. Block storage (GCE PD,
// EBS, Azure Disk, kind's local-path, Longhorn's default) is not among
// them.
var ReadWriteManyProvisioners = []string{
	"nfs.csi.k8s.io",
	"k8s-sigs.io/nfs-subdir-external-provisioner",
	"cephfs.csi.ceph.com",
	"rook-ceph.cephfs.csi.ceph.com",
	"openshift-storage.cephfs.csi.ceph.com",
	"efs.csi.aws.com",
	"filestore.csi.storage.gke.io",
	"file.csi.azure.com",
	"kubernetes.io/azure-file",
}

// IsSuspended reports spec.suspend.
func (s *TrainingJobSpec) IsSuspended() bool { return s.Suspend != nil && *s.Suspend }

// CheckpointEnabled reports checkpoint.enabled (true when unset).
func (s *TrainingJobSpec) CheckpointEnabled() bool {
	return s.Checkpoint.Enabled == nil || *s.Checkpoint.Enabled
}

// RetainCheckpoints reports checkpoint.retainOnDelete (true when unset).
func (s *TrainingJobSpec) RetainCheckpoints() bool {
	return s.Checkpoint.RetainOnDelete == nil || *s.Checkpoint.RetainOnDelete
}

// EffectiveBackoffLimit is backoffLimit, 3 when unset.
func (s *TrainingJobSpec) EffectiveBackoffLimit() int32 {
	if s.BackoffLimit == nil {
		return 3
	}
	return *s.BackoffLimit
}

// TotalEpochs is hyperparameters.epochs when it is a whole number, else 0.
func (s *TrainingJobSpec) TotalEpochs() int32 {
	for k, v := range s.Hyperparameters {
		if strings.EqualFold(k, "epochs") {
			if n, ok := v.Int(); ok && n > 0 && n <= 1<<31-1 {
				return int32(n)
			}
		}
	}
	return 0
}

// UsesCheckpointPVC reports whether the operator creates <name>-checkpoints:
// checkpointing on, storage pvc and no existingClaim.
func (s *TrainingJobSpec) UsesCheckpointPVC() bool {
	st := s.Checkpoint.Storage
	return s.CheckpointEnabled() && (st.Type == "" || st.Type == StorageTypePVC) && st.ExistingClaim == ""
}

// Child names. Every name is derived from the job name, which is at most
// MaxNameLength characters; see MaxNameLength for the rule each one meets.

// WorkerPodName is the pod of a rank: <name>-worker-<rank>.
func WorkerPodName(job string, rank int32) string { return fmt.Sprintf("%s-worker-%d", job, rank) }

// PSPodName is a TensorFlow parameter server pod: <name>-ps-<i>.
func PSPodName(job string, i int32) string { return fmt.Sprintf("%s-ps-%d", job, i) }

// GangGroupName is the group of one gang attempt: <name>-<attempt>. It names
// Kueue's pod group (the pods' kueue.x-k8s.io/pod-group-name) and a gang
// scheduler's PodGroup. A restarted gang is a new group.
func GangGroupName(job string, attempt int32) string { return fmt.Sprintf("%s-%d", job, attempt) }

// WorkersServiceName is the headless Service: <name>-workers.
func WorkersServiceName(job string) string { return job + "-workers" }

// ConfigMapName is the job ConfigMap: <name>-config.
func ConfigMapName(job string) string { return job + "-config" }

// CheckpointPVCName is the checkpoint PVC: <name>-checkpoints.
func CheckpointPVCName(job string) string { return job + "-checkpoints" }

// MasterAddr is rank 0's FQDN: <name>-worker-0.<name>-workers.<namespace>.svc.
func MasterAddr(job, namespace string) string {
	return fmt.Sprintf("%s.%s.%s.svc", WorkerPodName(job, 0), WorkersServiceName(job), namespace)
}

// MaxNameLength is the longest TrainingJob name. It keeps the children whose
// names must be DNS labels or label values (at most 63 characters) within
// bounds: the gang's group <name>-<attempt> (PodGroup, and the pod-group
// label value of Kueue and scheduler-plugins), with up to 10 digits of int32
// attempt, is 52+1+10 = 63, the bound that decides 52; the pods' hostnames
// <name>-worker-<rank> (rank <= 99) are at most 62 and <name>-ps-<i>
// (i <= 15) 58; the headless Service <name>-workers (a DNS-1035 label) 60.
// The ConfigMap <name>-config (59) and the PVC <name>-checkpoints (64) are
// DNS subdomains, which may be 253 characters long.
// webhooks/child_names_test.go checks each name.
const MaxNameLength = 52

// EffectiveFramework is framework, pytorch when unset.
func (s *TrainingJobSpec) EffectiveFramework() Framework {
	if s.Framework == "" {
		return FrameworkPyTorch
	}
	return s.Framework
}

// EffectiveImage is spec.image, or the default image for the framework from
// defaults (framework name -> image), or "" when neither exists.
func (s *TrainingJobSpec) EffectiveImage(defaults map[string]string) string {
	if s.Image != "" {
		return s.Image
	}
	return defaults[string(s.EffectiveFramework())]
}

// EffectiveRestartPolicy is restartPolicy, OnFailure when unset.
func (s *TrainingJobSpec) EffectiveRestartPolicy() RestartPolicy {
	if s.RestartPolicy == "" {
		return RestartPolicyOnFailure
	}
	return s.RestartPolicy
}

// EffectiveCleanPodPolicy is runPolicy.cleanPodPolicy, Running when unset.
func (s *TrainingJobSpec) EffectiveCleanPodPolicy() CleanPodPolicy {
	if s.RunPolicy.CleanPodPolicy == "" {
		return CleanPodPolicyRunning
	}
	return s.RunPolicy.CleanPodPolicy
}

// EffectiveCheckpointPath is checkpoint.path, /checkpoints when unset.
func (s *TrainingJobSpec) EffectiveCheckpointPath() string {
	if s.Checkpoint.Path == "" {
		return "/checkpoints"
	}
	return s.Checkpoint.Path
}

// EffectiveCheckpointFrequency is checkpoint.frequency, 1 when unset.
func (s *TrainingJobSpec) EffectiveCheckpointFrequency() int32 {
	if s.Checkpoint.Frequency < 1 {
		return 1
	}
	return s.Checkpoint.Frequency
}

// EffectiveCheckpointKeepLast is checkpoint.keepLast, 3 when unset.
func (s *TrainingJobSpec) EffectiveCheckpointKeepLast() int32 {
	if s.Checkpoint.KeepLast < 1 {
		return 3
	}
	return s.Checkpoint.KeepLast
}

// EffectiveCheckpointStorageType is checkpoint.storage.type, pvc when unset.
func (s *TrainingJobSpec) EffectiveCheckpointStorageType() StorageType {
	if s.Checkpoint.Storage.Type == "" {
		return StorageTypePVC
	}
	return s.Checkpoint.Storage.Type
}

// CheckpointClaimName is the PVC mounted at checkpoint.path: existingClaim,
// or <name>-checkpoints, or "" when checkpoints are off or in object storage.
func (j *TrainingJob) CheckpointClaimName() string {
	s := &j.Spec
	if !s.CheckpointEnabled() || s.EffectiveCheckpointStorageType() != StorageTypePVC {
		return ""
	}
	if s.Checkpoint.Storage.ExistingClaim != "" {
		return s.Checkpoint.Storage.ExistingClaim
	}
	return CheckpointPVCName(j.Name)
}

// CheckpointLocation is where the checkpoint of an epoch lives, as exported
// in RESUME_FROM_CHECKPOINT: <checkpoint.path>/epoch-<N> on a volume, or
// <storage.uri>/epoch-<N> in object storage. Trainers write checkpoints
// under these names (see docs/trainingjob.md).
func (s *TrainingJobSpec) CheckpointLocation(epoch int32) string {
	base := s.EffectiveCheckpointPath()
	if t := s.EffectiveCheckpointStorageType(); t != StorageTypePVC && s.Checkpoint.Storage.URI != "" {
		base = strings.TrimSuffix(s.Checkpoint.Storage.URI, "/")
	}
	return fmt.Sprintf("%s/epoch-%d", strings.TrimSuffix(base, "/"), epoch)
}

// EffectiveMetricsPort is metrics.port, 8000 when unset.
func (s *TrainingJobSpec) EffectiveMetricsPort() int32 {
	if s.Metrics.Port == 0 {
		return 8000
	}
	return s.Metrics.Port
}

// EffectiveMetricsPath is metrics.path, /metrics when unset.
func (s *TrainingJobSpec) EffectiveMetricsPath() string {
	if s.Metrics.Path == "" {
		return "/metrics"
	}
	return s.Metrics.Path
}

// EffectiveDataMountPath is dataVolume.mountPath, /data when unset.
func (d *DataVolumeSpec) EffectiveDataMountPath() string {
	if d.MountPath == "" {
		return "/data"
	}
	return d.MountPath
}

// Attempt is the current gang attempt: every gang restart, for a failure, a
// disruption or a placement timeout, starts a new one. Pods carry it in
// LabelRestartAttempt.
func (s *TrainingJobStatus) Attempt() int32 { return s.Restarts + s.Disruptions + s.PlacementTimeouts }

// V1Alpha1Phase maps a v1 state onto the v1alpha1 phases (Pending, Running,
// Succeeded, Failed). It is the one place this mapping lives: Initializing
// and Suspended read as Pending, Restarting as Running.
func (s TrainingJobState) V1Alpha1Phase() string {
	switch s {
	case StateRunning, StateRestarting:
		return "Running"
	case StateCompleted:
		return "Succeeded"
	case StateFailed:
		return "Failed"
	default:
		return "Pending"
	}
}
