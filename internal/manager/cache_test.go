package manager

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

func workerPod() *corev1.Pod {
	now := metav1.Now()
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "llm-worker-0", Namespace: "ns", UID: "u1", ResourceVersion: "7",
			Labels:            map[string]string{mlv1.LabelTrainingJob: "llm", mlv1.LabelRank: "0"},
			Annotations:       map[string]string{"a": "b"},
			OwnerReferences:   []metav1.OwnerReference{{Name: "llm", UID: "j1"}},
			CreationTimestamp: now, DeletionTimestamp: &now,
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:status":{}}`)}}},
		},
		Spec: corev1.PodSpec{
			NodeName: "n1", Hostname: "llm-worker-0", Subdomain: "llm-workers",
			Volumes:     []corev1.Volume{{Name: "ckpt"}},
			Tolerations: []corev1.Toleration{{Key: "nvidia.com/gpu"}},
			Containers: []corev1.Container{{
				Name: "trainer", Image: "img", Command: []string{"python"},
				Env:          []corev1.EnvVar{{Name: "NUM_WORKERS", Value: "8"}, {Name: "TF_CONFIG", Value: "{}"}},
				Resources:    corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("2")}},
				VolumeMounts: []corev1.VolumeMount{{Name: "ckpt", MountPath: "/ckpt"}},
				Ports:        []corev1.ContainerPort{{ContainerPort: 29500}},
			}},
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodFailed, Reason: "Evicted", Message: "m", PodIP: "10.0.0.1",
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "trainer", RestartCount: 2,
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137}}}},
		},
	}
}

// The pod transform keeps every field the TrainingJob and ModelDeployment
// controllers read from a cached pod and drops managedFields and the spec
// they only write.
func TestTransformPodKeepsWhatTheControllersRead(t *testing.T) {
	in := workerPod()
	out, err := transformPod(in.DeepCopy())
	require.NoError(t, err)
	pod := out.(*corev1.Pod)

	assert.Nil(t, pod.ManagedFields, "managedFields")
	want := in.ObjectMeta.DeepCopy()
	want.ManagedFields = nil
	assert.Equal(t, *want, pod.ObjectMeta, "the rest of the metadata is kept")
	assert.Equal(t, in.Status, pod.Status, "the whole status is kept")
	assert.Equal(t, "n1", pod.Spec.NodeName)
	require.Len(t, pod.Spec.Containers, 1)
	c := pod.Spec.Containers[0]
	assert.Equal(t, "trainer", c.Name)
	assert.Equal(t, in.Spec.Containers[0].Resources, c.Resources, "resources (allocated GPUs)")
	assert.Empty(t, c.Env, "env is not read back: the gang's shape is in the labels")
	assert.Empty(t, c.Image)

	assert.Empty(t, pod.Spec.Volumes)
	assert.Empty(t, pod.Spec.Tolerations)
	assert.Empty(t, pod.Spec.Hostname)
	assert.Empty(t, c.VolumeMounts)
	assert.Empty(t, c.Ports)
	assert.Empty(t, c.Command)
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
