package trainingjob

import (
	"encoding/json"
	"fmt"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/internal/podsecurity"
)

var testCfg = Config{
	DefaultImages:   map[string]string{"pytorch": "registry.example.com/pytorch:default"},
	GPUNodeSelector: map[string]string{"node.example.com/gpu": "true"},
	PodSecurity:     podsecurity.NewDefaults(),
}

func testJob(fw mlv1.Framework) *mlv1.TrainingJob {
	// Built by hand: this package's internal tests cannot import testutil,
	// which imports the manager, which imports this package.
	return &mlv1.TrainingJob{
		ObjectMeta: metav1.ObjectMeta{Name: "bert", Namespace: "team-a", UID: "uid-1"},
		Spec: mlv1.TrainingJobSpec{
			Framework: fw, Image: "img", NumWorkers: 2, GPUsPerWorker: ptr.To(int32(2)),
			Command: []string{"python", "train.py"}, Args: []string{"--lr=0.1"},
			Env:   []corev1.EnvVar{{Name: "EXTRA", Value: "1"}},
			Model: "bert-base", Dataset: "wiki",
			Hyperparameters: map[string]mlv1.HyperparameterValue{
				"learningRate": mlv1.NewHyperparameter(0.001), "epochs": mlv1.NewHyperparameter(10),
			},
		},
	}
}

func fieldEnv(name, path string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: path}}}
}

// commonEnv is the env of rank 1 of testJob, written out by hand from API.md.
func commonEnv() []corev1.EnvVar {
	const master = "bert-worker-0.bert-workers.team-a.svc"
	return []corev1.EnvVar{
		{Name: "MASTER_ADDR", Value: master},
		{Name: "MASTER_PORT", Value: "29500"},
		{Name: "WORLD_SIZE", Value: "4"},
		{Name: "RANK", Value: "1"},
		{Name: "NODE_RANK", Value: "1"},
		{Name: "LOCAL_WORLD_SIZE", Value: "2"},
		{Name: "NUM_WORKERS", Value: "2"},
		{Name: "GPUS_PER_WORKER", Value: "2"},
		{Name: "PET_NNODES", Value: "2"},
		{Name: "PET_NPROC_PER_NODE", Value: "2"},
		{Name: "PET_NODE_RANK", Value: "1"},
		{Name: "PET_MASTER_ADDR", Value: master},
		{Name: "PET_MASTER_PORT", Value: "29500"},
		{Name: "MODEL", Value: "bert-base"},
		{Name: "DATASET", Value: "wiki"},
		{Name: "HYPERPARAM_EPOCHS", Value: "10"},
		{Name: "HYPERPARAM_LEARNINGRATE", Value: "0.001"},
		{Name: "CHECKPOINT_DIR", Value: "/checkpoints"},
		{Name: "CHECKPOINT_FREQUENCY", Value: "1"},
		{Name: "CHECKPOINT_KEEP_LAST", Value: "3"},
		fieldEnv("CHECKPOINT_ATTEMPT", "metadata.labels['ml.example.com/restart-attempt']"),
		fieldEnv("POD_NAME", "metadata.name"),
		fieldEnv("POD_IP", "status.podIP"),
		{Name: "PYTHONUNBUFFERED", Value: "1"},
		{Name: "NCCL_ASYNC_ERROR_HANDLING", Value: "1"},
		{Name: "TORCH_NCCL_ASYNC_ERROR_HANDLING", Value: "1"},
		{Name: "NCCL_DEBUG", Value: "WARN"},
	}
}

// wantPod is rank 1 of testJob, written out by hand; frameworkEnv is spliced
// in before the user's env.
func wantPod(image string, frameworkEnv ...corev1.EnvVar) *corev1.Pod {
	gpu := resource.MustParse("2")
	env := append(commonEnv(), frameworkEnv...)
	env = append(env, corev1.EnvVar{Name: "HOME", Value: "/home/ml-operator"}, corev1.EnvVar{Name: "EXTRA", Value: "1"})
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      "bert-worker-1",
			Namespace: "team-a",
			Labels: map[string]string{
				"ml.example.com/trainingjob":     "bert",
				"ml.example.com/rank":            "1",
				"ml.example.com/replica-type":    "worker",
				"ml.example.com/restart-attempt": "3",
				"ml.example.com/num-workers":     "2",
				"app.kubernetes.io/managed-by":   "ml-operator",
				// The lab's label (docs/decisions.md).
				"trainingjob.ml.example.com/worker": "bert",
			},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "ml.example.com/v1", Kind: "TrainingJob", Name: "bert", UID: "uid-1",
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: corev1.PodSpec{
			Hostname:      "bert-worker-1",
			Subdomain:     "bert-workers",
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name:    "trainer",
				Image:   image,
				Command: []string{"python", "train.py"},
				Args:    []string{"--lr=0.1"},
				Env:     env,
				Ports: []corev1.ContainerPort{
					{Name: "rendezvous", ContainerPort: 29500, Protocol: corev1.ProtocolTCP},
					{Name: "metrics", ContainerPort: 8000, Protocol: corev1.ProtocolTCP},
				},
				Resources: corev1.ResourceRequirements{
					Limits:   corev1.ResourceList{"nvidia.com/gpu": gpu},
					Requests: corev1.ResourceList{"nvidia.com/gpu": gpu},
				},
				VolumeMounts: []corev1.VolumeMount{
					{Name: "home", MountPath: "/home/ml-operator"},
					{Name: "checkpoints", MountPath: "/checkpoints"},
					{Name: "dshm", MountPath: "/dev/shm"},
				},
				SecurityContext: &corev1.SecurityContext{
					RunAsNonRoot:             ptr.To(true),
					AllowPrivilegeEscalation: ptr.To(false),
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
					SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
				},
			}},
			Volumes: []corev1.Volume{
				{Name: "home", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "checkpoints", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "bert-checkpoints"}}},
				{Name: "dshm", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}},
			},
			NodeSelector: map[string]string{"node.example.com/gpu": "true"},
			Tolerations: []corev1.Toleration{{
				Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule,
			}},
			// No fixed user, group or fsGroup: OpenShift's restricted-v2
			// assigns them from the namespace's range.
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   ptr.To(true),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
		},
	}
}

func TestDesiredWorkerPodPerFramework(t *testing.T) {
	tfConfig := `{"cluster":{"worker":["bert-worker-0.bert-workers.team-a.svc:29500","bert-worker-1.bert-workers.team-a.svc:29500"]},"task":{"type":"worker","index":1}}`
	tests := []struct {
		framework mlv1.Framework
		image     string
		want      *corev1.Pod
	}{
		{mlv1.FrameworkPyTorch, "img", wantPod("img")},
		{mlv1.FrameworkTensorFlow, "img", wantPod("img", corev1.EnvVar{Name: "TF_CONFIG", Value: tfConfig})},
		{mlv1.FrameworkXGBoost, "img", wantPod("img",
			corev1.EnvVar{Name: "DMLC_TRACKER_URI", Value: "bert-worker-0.bert-workers.team-a.svc"},
			corev1.EnvVar{Name: "DMLC_TRACKER_PORT", Value: "29500"},
			corev1.EnvVar{Name: "DMLC_TASK_ID", Value: "1"},
			corev1.EnvVar{Name: "DMLC_NUM_WORKER", Value: "2"})},
		{mlv1.FrameworkJAX, "img", wantPod("img",
			corev1.EnvVar{Name: "JAX_COORDINATOR_ADDRESS", Value: "bert-worker-0.bert-workers.team-a.svc:29500"},
			corev1.EnvVar{Name: "JAX_NUM_PROCESSES", Value: "2"},
			corev1.EnvVar{Name: "JAX_PROCESS_ID", Value: "1"})},
		// No spec.image: the admin's default image for the framework.
		{mlv1.FrameworkPyTorch, "", wantPod("registry.example.com/pytorch:default")},
	}
	for _, tt := range tests {
		t.Run(string(tt.framework)+"/"+tt.image, func(t *testing.T) {
			job := testJob(tt.framework)
			job.Spec.Image = tt.image
			got := desiredWorkerPod(job, 1, 3, &testCfg, false)
			if tt.framework == mlv1.FrameworkTensorFlow {
				tt.want.Labels[mlv1.LabelTFClusterHash] = tfClusterHash(job)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("desiredWorkerPod mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDesiredWorkerPodTemplateAndScheduling(t *testing.T) {
	job := testJob(mlv1.FrameworkPyTorch)
	job.Spec.GPUsPerWorker = ptr.To(int32(0))
	job.Spec.Image = "img"
	job.Spec.Resources = corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}
	job.Spec.DataVolume = &mlv1.DataVolumeSpec{ClaimName: "imagenet", ReadOnly: true}
	job.Spec.Checkpoint.Storage = mlv1.CheckpointStorage{ExistingClaim: "shared-ckpt"}
	job.Spec.Checkpoint.Path = "/ckpt"
	job.Spec.Scheduling = mlv1.SchedulingSpec{
		SchedulerName: "volcano", PriorityClassName: "high", QueueName: "team-q",
		NodeSelector: map[string]string{"zone": "a"},
		Tolerations:  []corev1.Toleration{{Key: "spot", Operator: corev1.TolerationOpExists}},
	}
	job.Spec.Template = mlv1.WorkerTemplate{
		Labels:             map[string]string{"team": "nlp", mlv1.LabelRank: "forged"},
		Annotations:        map[string]string{"note": "x"},
		ServiceAccountName: "trainer",
		ImagePullSecrets:   []corev1.LocalObjectReference{{Name: "pull"}},
		Volumes:            []corev1.Volume{{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		VolumeMounts:       []corev1.VolumeMount{{Name: "cache", MountPath: "/cache"}},
		SecurityContext:    &corev1.SecurityContext{Privileged: ptr.To(true)},
		PodSecurityContext: &corev1.PodSecurityContext{RunAsUser: ptr.To(int64(0))},
		// The time a trainer has to save its checkpoint at SIGTERM.
		TerminationGracePeriodSeconds: ptr.To(int64(120)),
	}
	job.Status.LastCheckpoint = &mlv1.CheckpointStatus{Epoch: 4}

	got := desiredWorkerPod(job, 0, 1, &testCfg, false)

	want := corev1.PodSpec{
		Hostname: "bert-worker-0", Subdomain: "bert-workers", RestartPolicy: corev1.RestartPolicyNever,
		ServiceAccountName: "trainer", ImagePullSecrets: []corev1.LocalObjectReference{{Name: "pull"}},
		SchedulerName: "volcano", PriorityClassName: "high",
		// Without GPUs: no GPU selector and no GPU toleration.
		NodeSelector:                  map[string]string{"zone": "a"},
		Tolerations:                   []corev1.Toleration{{Key: "spot", Operator: corev1.TolerationOpExists}},
		SecurityContext:               &corev1.PodSecurityContext{RunAsUser: ptr.To(int64(0))},
		TerminationGracePeriodSeconds: ptr.To(int64(120)),
		Volumes: []corev1.Volume{
			{Name: "home", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			{Name: "checkpoints", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "shared-ckpt"}}},
			{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "imagenet", ReadOnly: true}}},
			{Name: "dshm", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}},
			{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		},
	}
	c := got.Spec.Containers[0]
	got.Spec.Containers = nil
	if diff := cmp.Diff(want, got.Spec); diff != "" {
		t.Errorf("pod spec mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]corev1.VolumeMount{
		{Name: "home", MountPath: "/home/ml-operator"},
		{Name: "checkpoints", MountPath: "/ckpt"},
		{Name: "data", MountPath: "/data", ReadOnly: true},
		{Name: "dshm", MountPath: "/dev/shm"},
		{Name: "cache", MountPath: "/cache"},
	}, c.VolumeMounts); diff != "" {
		t.Errorf("mounts mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(&corev1.SecurityContext{Privileged: ptr.To(true)}, c.SecurityContext); diff != "" {
		t.Errorf("container security context: the template must replace the default (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}, c.Resources); diff != "" {
		t.Errorf("resources mismatch (-want +got):\n%s", diff)
	}
	wantLabels := map[string]string{
		"team": "nlp", mlv1.LabelRank: "0", mlv1.LabelTrainingJob: "bert", mlv1.LabelReplicaType: "worker",
		mlv1.LabelRestartAttempt: "1", mlv1.LabelManagedBy: mlv1.ManagedByValue, mlv1.LabelNumWorkers: "2",
		mlv1.LabelLabWorker:         "bert",
		"kueue.x-k8s.io/queue-name": "team-q", "kueue.x-k8s.io/pod-group-name": "bert-1",
	}
	if diff := cmp.Diff(wantLabels, got.Labels); diff != "" {
		t.Errorf("labels mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"note": "x", "kueue.x-k8s.io/pod-group-total-count": "2"}, got.Annotations); diff != "" {
		t.Errorf("annotations mismatch (-want +got):\n%s", diff)
	}
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	for name, want := range map[string]string{
		"CHECKPOINT_DIR": "/ckpt", "RESUME_FROM_CHECKPOINT": "/ckpt/epoch-4", "WORLD_SIZE": "2",
		"LOCAL_WORLD_SIZE": "1", "GPUS_PER_WORKER": "0",
	} {
		if env[name] != want {
			t.Errorf("env %s = %q, want %q", name, env[name], want)
		}
	}
	if _, ok := env["NCCL_DEBUG"]; ok {
		t.Errorf("NCCL settings without GPUs (backend gloo)")
	}
}

func TestDesiredServiceConfigMapPVC(t *testing.T) {
	job := testJob(mlv1.FrameworkPyTorch)
	owner := []metav1.OwnerReference{{APIVersion: "ml.example.com/v1", Kind: "TrainingJob", Name: "bert", UID: "uid-1",
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
	labels := map[string]string{"ml.example.com/trainingjob": "bert", "app.kubernetes.io/managed-by": "ml-operator"}

	wantSvc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "bert-workers", Namespace: "team-a", Labels: labels, OwnerReferences: owner},
		Spec: corev1.ServiceSpec{
			ClusterIP: "None", Selector: labels, PublishNotReadyAddresses: true,
			Ports: []corev1.ServicePort{{Name: "rendezvous", Port: 29500, Protocol: corev1.ProtocolTCP}},
		},
	}
	if diff := cmp.Diff(wantSvc, desiredService(job)); diff != "" {
		t.Errorf("service mismatch (-want +got):\n%s", diff)
	}

	wantCM := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "bert-config", Namespace: "team-a", Labels: labels, OwnerReferences: owner},
		Data: map[string]string{
			"model": "bert-base", "dataset": "wiki", "framework": "pytorch", "backend": "nccl", "masterPort": "29500",
			"hyperparameters.json": `{"epochs":10,"learningRate":0.001}`,
		},
	}
	if diff := cmp.Diff(wantCM, desiredConfigMap(job)); diff != "" {
		t.Errorf("configmap mismatch (-want +got):\n%s", diff)
	}

	// Retained (the default): no owner reference, so no garbage collection.
	wantPVC := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "bert-checkpoints", Namespace: "team-a", Labels: labels},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}},
		},
	}
	if diff := cmp.Diff(wantPVC, desiredPVC(job, true)); diff != "" {
		t.Errorf("pvc mismatch (-want +got):\n%s", diff)
	}
	// A StorageClass that serves no shared volumes: ReadWriteOnce, and the
	// ranks share a node (TestRanksShareRankZerosNode).
	wantPVC.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	if diff := cmp.Diff(wantPVC, desiredPVC(job, false)); diff != "" {
		t.Errorf("pvc of a class without shared volumes mismatch (-want +got):\n%s", diff)
	}
	job.Spec.Checkpoint.RetainOnDelete = ptr.To(false)
	job.Spec.NumWorkers = 1
	wantPVC.OwnerReferences = owner
	wantPVC.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	if diff := cmp.Diff(wantPVC, desiredPVC(job, false)); diff != "" {
		t.Errorf("pvc with retainOnDelete false mismatch (-want +got):\n%s", diff)
	}

	// checkpoint.storage's size, storage class and access modes win over
	// the defaults (explicit RWO on a multi-rank job included).
	job.Spec.NumWorkers = 4
	job.Spec.Checkpoint.Storage.Size = ptr.To(resource.MustParse("250Gi"))
	job.Spec.Checkpoint.Storage.StorageClassName = ptr.To("fast-nfs")
	job.Spec.Checkpoint.Storage.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	wantPVC.Spec = corev1.PersistentVolumeClaimSpec{
		AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		StorageClassName: ptr.To("fast-nfs"),
		Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("250Gi")}},
	}
	if diff := cmp.Diff(wantPVC, desiredPVC(job, false)); diff != "" {
		t.Errorf("pvc with storage overrides mismatch (-want +got):\n%s", diff)
	}

	for name, mutate := range map[string]func(*mlv1.TrainingJob){
		"existingClaim": func(j *mlv1.TrainingJob) { j.Spec.Checkpoint.Storage.ExistingClaim = "mine" },
		"s3": func(j *mlv1.TrainingJob) {
			j.Spec.Checkpoint.Storage = mlv1.CheckpointStorage{Type: "s3", URI: "s3://b/p"}
		},
		"disabled": func(j *mlv1.TrainingJob) { j.Spec.Checkpoint.Enabled = ptr.To(false) },
	} {
		j := testJob(mlv1.FrameworkPyTorch)
		mutate(j)
		if pvc := desiredPVC(j, false); pvc != nil {
			t.Errorf("%s: want no checkpoint PVC, got %s", name, pvc.Name)
		}
	}
}

func TestDesiredPSPod(t *testing.T) {
	job := testJob(mlv1.FrameworkTensorFlow)
	job.Spec.ParameterServers = 2
	got := desiredPSPod(job, 1, 0, &testCfg, false)
	if got.Name != "bert-ps-1" || got.Spec.Hostname != "bert-ps-1" || got.Spec.Subdomain != "bert-workers" {
		t.Errorf("name %s hostname %s subdomain %s", got.Name, got.Spec.Hostname, got.Spec.Subdomain)
	}
	job.Spec.Scheduling.QueueName = "q"
	if n := desiredPSPod(job, 0, 0, &testCfg, false).Annotations["kueue.x-k8s.io/pod-group-total-count"]; n != "4" {
		t.Errorf("Kueue pod group of 2 workers and 2 parameter servers counts %s pods", n)
	}
	if _, worker := got.Labels[mlv1.LabelLabWorker]; worker || got.Labels[mlv1.LabelReplicaType] != "ps" || got.Labels[mlv1.LabelRestartAttempt] != "0" {
		t.Errorf("labels %v", got.Labels)
	}
	if diff := cmp.Diff(corev1.ResourceRequirements{Limits: corev1.ResourceList{}, Requests: corev1.ResourceList{}}, got.Spec.Containers[0].Resources); diff != "" {
		t.Errorf("parameter servers hold no GPUs (-want +got):\n%s", diff)
	}
	if got.Spec.NodeSelector != nil {
		t.Errorf("parameter servers need no GPU node: %v", got.Spec.NodeSelector)
	}
	var cfg TFConfig
	for _, e := range got.Spec.Containers[0].Env {
		if e.Name == "TF_CONFIG" {
			if err := json.Unmarshal([]byte(e.Value), &cfg); err != nil {
				t.Fatal(err)
			}
		}
	}
	if cfg.Task != (TFTask{Type: "ps", Index: 1}) || len(cfg.Cluster["ps"]) != 2 || cfg.Cluster["ps"][1] != "bert-ps-1.bert-workers.team-a.svc:29500" {
		t.Errorf("TF_CONFIG %+v", cfg)
	}
}

// Every attempt is its own Kueue pod group: a restarted gang is admitted as
// a new unit, never counted into the old attempt's group.
func TestKueuePodGroupPerAttempt(t *testing.T) {
	job := testJob(mlv1.FrameworkPyTorch)
	job.Spec.Scheduling.QueueName = "team-q"
	for _, attempt := range []int32{0, 1, 2} {
		want := fmt.Sprintf("bert-%d", attempt)
		for rank := range job.Spec.EffectiveNumWorkers() {
			p := desiredWorkerPod(job, rank, attempt, &testCfg, false)
			if p.Labels["kueue.x-k8s.io/queue-name"] != "team-q" || p.Labels["kueue.x-k8s.io/pod-group-name"] != want {
				t.Errorf("attempt %d rank %d: labels %v, want queue team-q and group %s", attempt, rank, p.Labels, want)
			}
			if n := p.Annotations["kueue.x-k8s.io/pod-group-total-count"]; n != strconv.Itoa(int(job.Spec.EffectiveNumWorkers())) {
				t.Errorf("attempt %d rank %d: group count %s", attempt, rank, n)
			}
		}
	}
	job.Spec.Scheduling.QueueName = ""
	if p := desiredWorkerPod(job, 0, 0, &testCfg, false); p.Labels["kueue.x-k8s.io/pod-group-name"] != "" || p.Annotations["kueue.x-k8s.io/pod-group-total-count"] != "" {
		t.Errorf("no queue, no Kueue pod group: %v %v", p.Labels, p.Annotations)
	}
}
