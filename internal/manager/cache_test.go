package manager

import (
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

func workerPod() *corev1.Pod {
	now := metav1.Now()
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "llm-worker-0", Namespace: "ns", UID: "u1", ResourceVersion: "7",
			Labels:            map[string]string{mlv1.LabelTrainingJob: "llm", mlv1.LabelRank: "0"},
			Annotations:       map[string]string{"a": "b"},
			OwnerReferences:   []metav1.OwnerReference{{APIVersion: "ml.example.com/v1", Kind: "TrainingJob", Name: "llm", UID: "j1"}},
			CreationTimestamp: now, DeletionTimestamp: &now,
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:status":{}}`)}}},
		},
		Spec: corev1.PodSpec{
			NodeName: "n1", Hostname: "llm-worker-0", Subdomain: "llm-workers",
			Volumes:     []corev1.Volume{{Name: "ckpt"}},
			Tolerations: []corev1.Toleration{{Key: "nvidia.com/gpu"}},
			InitContainers: []corev1.Container{{Name: "init", Image: "img",
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"cpu": resource.MustParse("1")}}}},
			Containers: []corev1.Container{{
				Name: "trainer", Image: "img", Command: []string{"python"},
				Env: []corev1.EnvVar{{Name: "NUM_WORKERS", Value: "8"}, {Name: "TF_CONFIG", Value: "{}"}},
				Resources: corev1.ResourceRequirements{
					Limits:   corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("2")},
					Requests: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("2"), "cpu": resource.MustParse("4")},
				},
				VolumeMounts: []corev1.VolumeMount{{Name: "ckpt", MountPath: "/ckpt"}},
				Ports:        []corev1.ContainerPort{{ContainerPort: 29500}},
			}, {Name: "sidecar", Image: "proxy"}},
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodFailed, Reason: "Evicted", Message: "m", PodIP: "10.0.0.1",
			PodIPs: []corev1.PodIP{{IP: "10.0.0.1"}}, HostIP: "10.1.0.1", HostIPs: []corev1.HostIP{{IP: "10.1.0.1"}},
			QOSClass: corev1.PodQOSBurstable, StartTime: &now, NominatedNodeName: "n2",
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "PodFailed", Message: "x", LastTransitionTime: now}},
			InitContainerStatuses: []corev1.ContainerStatus{{Name: "init", Image: "img", ImageID: "sha", ContainerID: "cri://1",
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CreateContainerConfigError", Message: "runAsNonRoot"}}}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "trainer", RestartCount: 2, Ready: true, Image: "img", ImageID: "sha",
				ContainerID: "cri://2", Started: ptr.To(true),
				State:                running,
				LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled", Message: "t"}}}},
		},
	}
}

// The pod transform keeps every field the TrainingJob and ModelDeployment
// controllers read from a cached pod, and drops managedFields, the
// annotations, the spec they only write and the status they never read.
func TestTransformPodKeepsWhatTheControllersRead(t *testing.T) {
	in := workerPod()
	out, err := transformPod(in.DeepCopy())
	require.NoError(t, err)
	pod := out.(*corev1.Pod)

	want := in.ObjectMeta.DeepCopy()
	want.ManagedFields, want.Annotations = nil, nil
	assert.Equal(t, *want, pod.ObjectMeta, "the metadata but managedFields and annotations is kept")

	st := in.Status
	assert.Equal(t, corev1.PodStatus{
		Phase: st.Phase, Reason: st.Reason, Message: st.Message, PodIP: st.PodIP, Conditions: st.Conditions,
		InitContainerStatuses: []corev1.ContainerStatus{{Name: "init", State: st.InitContainerStatuses[0].State}},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "trainer", RestartCount: 2, Ready: true,
			State: st.ContainerStatuses[0].State, LastTerminationState: st.ContainerStatuses[0].LastTerminationState}},
	}, pod.Status, "of the status: phase, reason, message, pod IP, conditions, and each container's name, readiness, restarts and states")

	assert.Equal(t, corev1.PodSpec{
		NodeName: "n1",
		Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{
			Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("2")}}}},
	}, pod.Spec, "of the spec: the node, and the limits of each container that has some (the allocated GPUs)")
}

// Strings many pods carry are held once: two pods' label keys and values,
// owner kinds, namespaces, node names and condition types share their bytes
// after the transform, though each pod was decoded on its own.
func TestTransformPodInternsSharedStrings(t *testing.T) {
	a, b := workerPod(), workerPod()
	// As two decodes give them: equal strings, distinct bytes.
	b.Namespace = strings.Clone(a.Namespace)
	b.Labels = map[string]string{strings.Clone(mlv1.LabelTrainingJob): strings.Clone("llm"), strings.Clone(mlv1.LabelRank): strings.Clone("0")}
	b.OwnerReferences[0].Kind = strings.Clone(a.OwnerReferences[0].Kind)
	b.Spec.NodeName = strings.Clone(a.Spec.NodeName)
	b.Status.Conditions[0].Reason = strings.Clone(a.Status.Conditions[0].Reason)
	require.NotSame(t, unsafe.StringData(a.Namespace), unsafe.StringData(b.Namespace))

	outA, err := transformPod(a)
	require.NoError(t, err)
	outB, err := transformPod(b)
	require.NoError(t, err)
	pa, pb := outA.(*corev1.Pod), outB.(*corev1.Pod)
	same := func(what, x, y string) {
		assert.Equal(t, x, y, what)
		assert.Same(t, unsafe.StringData(x), unsafe.StringData(y), "%s is held once", what)
	}
	same("namespace", pa.Namespace, pb.Namespace)
	same("label value", pa.Labels[mlv1.LabelTrainingJob], pb.Labels[mlv1.LabelTrainingJob])
	for k := range pa.Labels {
		for k2 := range pb.Labels {
			if k == k2 {
				same("label key "+k, k, k2)
			}
		}
	}
	same("owner kind", pa.OwnerReferences[0].Kind, pb.OwnerReferences[0].Kind)
	same("node name", pa.Spec.NodeName, pb.Spec.NodeName)
	same("condition reason", pa.Status.Conditions[0].Reason, pb.Status.Conditions[0].Reason)
	runtime.KeepAlive(pa)
}

// Every other kind only loses managedFields; a deleted object's tombstone
// passes through the pod transform untouched.
func TestTransformObjectStripsManagedFieldsOnly(t *testing.T) {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "s", Labels: map[string]string{"x": "y"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}}},
		Spec: corev1.ServiceSpec{ClusterIP: "None", Ports: []corev1.ServicePort{{Port: 29500}}},
	}
	out, err := transformObject(svc.DeepCopy())
	require.NoError(t, err)
	got := out.(*corev1.Service)
	assert.Nil(t, got.ManagedFields)
	svc.ManagedFields = nil
	assert.Equal(t, svc, got)

	tomb := toolscache.DeletedFinalStateUnknown{Key: "ns/p", Obj: workerPod()}
	out, err = transformPod(tomb)
	require.NoError(t, err)
	assert.Equal(t, tomb, out)
}

// A cached namespace's metadata keeps its identity, deletion timestamp and
// Istio mesh labels only; a full Namespace (which no controller caches)
// passes as is.
func TestTransformNamespaceKeepsTheDeletionTimestamp(t *testing.T) {
	now := metav1.Now()
	in := &metav1.PartialObjectMetadata{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
		ObjectMeta: metav1.ObjectMeta{Name: "team-a", UID: "u1", ResourceVersion: "7", DeletionTimestamp: &now,
			Labels:        map[string]string{corev1.LabelMetadataName: "team-a", "istio-injection": "enabled", "istio.io/rev": "canary"},
			Annotations:   map[string]string{corev1.LastAppliedConfigAnnotation: `{"big":"json"}`},
			Finalizers:    []string{"kubernetes"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
	}
	out, err := transformNamespace(in.DeepCopy())
	require.NoError(t, err)
	assert.Equal(t, &metav1.PartialObjectMetadata{
		TypeMeta: in.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{Name: "team-a", UID: "u1", ResourceVersion: "7", DeletionTimestamp: &now,
			Labels: map[string]string{"istio-injection": "enabled", "istio.io/rev": "canary"}},
	}, out, "router auto reads the Istio mesh labels; other labels are dropped")
	plain := in.DeepCopy()
	plain.Labels = map[string]string{"team": "a"}
	out, err = transformNamespace(plain)
	require.NoError(t, err)
	assert.Nil(t, out.(*metav1.PartialObjectMetadata).Labels)

	full := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Labels: map[string]string{"x": "y"}}}
	out, err = transformNamespace(full.DeepCopy())
	require.NoError(t, err)
	assert.Equal(t, full, out)
}

// A cached Node keeps its identity and its cordon (spec.unschedulable, the
// unschedulable taint), which is all the TrainingJob controller reads of
// it; its labels, other taints and whole status (what heartbeats change)
// are dropped. A tombstone passes as is.
func TestTransformNodeKeepsTheCordon(t *testing.T) {
	now := metav1.Now()
	cordon := corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule, TimeAdded: &now}
	in := &corev1.Node{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{Name: "gpu-1", UID: "u1", ResourceVersion: "9", DeletionTimestamp: &now,
			Labels:        map[string]string{"kubernetes.io/hostname": "gpu-1", "node.example.com/gpu": "true"},
			Annotations:   map[string]string{"node.alpha.kubernetes.io/ttl": "0"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}},
		Spec: corev1.NodeSpec{PodCIDR: "10.0.0.0/24", Unschedulable: true,
			Taints: []corev1.Taint{{Key: "nvidia.com/gpu", Effect: corev1.TaintEffectNoSchedule}, cordon}},
		Status: corev1.NodeStatus{
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: now}},
			Capacity:   corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")},
			Images:     []corev1.ContainerImage{{Names: []string{"example.com/trainer:1"}, SizeBytes: 1 << 30}},
		},
	}
	out, err := transformNode(in.DeepCopy())
	require.NoError(t, err)
	assert.Equal(t, &corev1.Node{
		TypeMeta:   in.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{Name: "gpu-1", UID: "u1", ResourceVersion: "9", DeletionTimestamp: &now},
		Spec:       corev1.NodeSpec{Unschedulable: true, Taints: []corev1.Taint{cordon}},
	}, out)

	tomb := toolscache.DeletedFinalStateUnknown{Key: "gpu-1", Obj: in}
	out, err = transformNode(tomb)
	require.NoError(t, err)
	assert.Equal(t, tomb, out)
}
