package podgroups

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

var owner = metav1.OwnerReference{APIVersion: "ml.example.com/v1", Kind: "TrainingJob", Name: "bert", UID: "uid-1",
	Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}

func pod(requests, limits corev1.ResourceList) *corev1.Pod {
	return &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{
		Resources: corev1.ResourceRequirements{Requests: requests, Limits: limits}}}}}
}

// gang is attempt of job bert: two ranks with 2 GPUs and 1 CPU each, and a
// parameter server with a 1Gi limit and no request.
func gang(attempt string) Gang {
	gpu := corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("2"), corev1.ResourceCPU: resource.MustParse("1")}
	return Gang{
		Namespace: "team-a", Name: "bert-" + attempt,
		Labels:            map[string]string{"ml.example.com/trainingjob": "bert", "ml.example.com/restart-attempt": attempt},
		Siblings:          map[string]string{"ml.example.com/trainingjob": "bert"},
		Owner:             owner,
		MinMember:         3,
		Pods:              []*corev1.Pod{pod(nil, gpu), pod(gpu, gpu), pod(nil, corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")})},
		PriorityClassName: "high",
	}
}

func TestSchedulerFor(t *testing.T) {
	for name, want := range map[string]string{"volcano": "scheduling.volcano.sh", "coscheduling": "scheduling.x-k8s.io",
		"scheduler-plugins-scheduler": "scheduling.x-k8s.io"} {
		s, ok := SchedulerFor(name)
		assert.True(t, ok, name)
		assert.Equal(t, want, s.GroupVersionKind().Group, name)
	}
	for _, name := range []string{"", "default-scheduler", "kueue"} {
		_, ok := SchedulerFor(name)
		assert.False(t, ok, name)
	}
}

// A PodGroup admits the whole gang (minMember) once its total requests fit
// (a limit without a request counts as the request); only Volcano's has a
// priority class.
func TestDesiredPodGroup(t *testing.T) {
	wantSpec := map[string]any{"minMember": int64(3), "minResources": map[string]any{
		"nvidia.com/gpu": "4", "cpu": "2", "memory": "1Gi"}}
	pg := volcano.desired(gang("1"))
	assert.Equal(t, schema.GroupVersionKind{Group: "scheduling.volcano.sh", Version: "v1beta1", Kind: "PodGroup"}, pg.GroupVersionKind())
	assert.Equal(t, "team-a", pg.GetNamespace())
	assert.Equal(t, "bert-1", pg.GetName())
	assert.Equal(t, map[string]string{"ml.example.com/trainingjob": "bert", "ml.example.com/restart-attempt": "1"}, pg.GetLabels())
	assert.Equal(t, []metav1.OwnerReference{owner}, pg.GetOwnerReferences())
	withPriority := map[string]any{"priorityClassName": "high"}
	for k, v := range wantSpec {
		withPriority[k] = v
	}
	if diff := cmp.Diff(withPriority, pg.Object["spec"]); diff != "" {
		t.Errorf("volcano spec (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantSpec, coscheduling.desired(gang("1")).Object["spec"]); diff != "" {
		t.Errorf("coscheduling spec (-want +got):\n%s", diff)
	}
	empty := gang("0")
	empty.Pods = nil
	assert.NotContains(t, coscheduling.desired(empty).Object["spec"], "minResources")
}

func TestJoin(t *testing.T) {
	p := &corev1.Pod{}
	volcano.Join(p, "bert-1")
	assert.Equal(t, map[string]string{"scheduling.k8s.io/group-name": "bert-1"}, p.Annotations)
	assert.Empty(t, p.Labels)
	p = &corev1.Pod{}
	coscheduling.Join(p, "bert-1")
	assert.Equal(t, map[string]string{"scheduling.x-k8s.io/pod-group": "bert-1"}, p.Labels)
	assert.Empty(t, p.Annotations)
}

func TestJoinKueueGroup(t *testing.T) {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"team": "nlp"}}}
	JoinKueueGroup(p, "team-q", "bert-2", 3)
	assert.Equal(t, map[string]string{"team": "nlp", KueueQueueLabel: "team-q", KueuePodGroupLabel: "bert-2"}, p.Labels)
	assert.Equal(t, map[string]string{KueueGroupTotalCountAnnotation: "3"}, p.Annotations)
}

// fakeCluster is a fake API server that serves the given PodGroup kinds.
func fakeCluster(kinds ...schema.GroupVersionKind) client.Client {
	mapper := meta.NewDefaultRESTMapper(nil)
	for _, gvk := range kinds {
		mapper.Add(gvk, meta.RESTScopeNamespace)
	}
	return fake.NewClientBuilder().WithRESTMapper(mapper).Build()
}

func podGroups(t *testing.T, c client.Client, gvk schema.GroupVersionKind) []string {
	t.Helper()
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	require.NoError(t, c.List(context.Background(), list, client.InNamespace("team-a")))
	var names []string
	for _, pg := range list.Items {
		names = append(names, pg.GetName())
	}
	return names
}

// Ensure creates the attempt's group, again without error, and deletes the
// groups of the job's earlier attempts, never a group someone else owns.
func TestEnsureReplacesEarlierAttempts(t *testing.T) {
	ctx := context.Background()
	c := fakeCluster(volcano.gvk)
	groups := NewClient(c)

	s, ok, err := groups.Ensure(ctx, "volcano", gang("0"))
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, volcano, s)
	_, ok, err = groups.Ensure(ctx, "volcano", gang("0"))
	require.NoError(t, err, "the group exists already")
	assert.True(t, ok)

	foreign := volcano.desired(gang("9"))
	foreign.SetOwnerReferences(nil)
	require.NoError(t, c.Create(ctx, foreign))

	_, ok, err = groups.Ensure(ctx, "volcano", gang("1"))
	require.NoError(t, err)
	assert.True(t, ok)
	assert.ElementsMatch(t, []string{"bert-1", "bert-9"}, podGroups(t, c, volcano.gvk))
}

// Without a gang scheduler, or without its PodGroup kind installed, there
// is no group and the pods are created as they are.
func TestEnsureWithoutAGangScheduler(t *testing.T) {
	ctx := context.Background()
	c := fakeCluster(volcano.gvk)
	for _, name := range []string{"", "default-scheduler", "coscheduling"} {
		_, ok, err := NewClient(c).Ensure(ctx, name, gang("0"))
		require.NoError(t, err, name)
		assert.False(t, ok, name)
	}
	assert.Empty(t, podGroups(t, c, volcano.gvk))
}

// Installed names the gang scheduler that places the gang only when its
// PodGroup kind is served.
func TestInstalled(t *testing.T) {
	ctx := context.Background()
	c := NewClient(fakeCluster(volcano.gvk))
	s, ok, err := c.Installed(ctx, "volcano")
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, "volcano", s.Flavour())
	for _, name := range []string{"", "default-scheduler", "coscheduling", "scheduler-plugins-scheduler"} {
		_, ok, err := c.Installed(ctx, name)
		require.NoError(t, err, name)
		assert.False(t, ok, name)
	}
	s, ok, err = NewClient(fakeCluster(coscheduling.gvk)).Installed(ctx, "scheduler-plugins-scheduler")
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, "coscheduling", s.Flavour())
}
