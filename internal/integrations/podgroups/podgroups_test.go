package podgroups

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	schedulingv1alpha2 "k8s.io/api/scheduling/v1alpha2"
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
	groups := NewClient(c, nil)

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
		_, ok, err := NewClient(c, nil).Ensure(ctx, name, gang("0"))
		require.NoError(t, err, name)
		assert.False(t, ok, name)
	}
	assert.Empty(t, podGroups(t, c, volcano.gvk))
}

// Installed names the gang scheduler that places the gang only when its
// PodGroup kind is served.
func TestInstalled(t *testing.T) {
	ctx := context.Background()
	c := NewClient(fakeCluster(volcano.gvk), nil)
	s, ok, err := c.Installed(ctx, "volcano")
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, "volcano", s.Flavour())
	for _, name := range []string{"", "default-scheduler", "coscheduling", "scheduler-plugins-scheduler"} {
		_, ok, err := c.Installed(ctx, name)
		require.NoError(t, err, name)
		assert.False(t, ok, name)
	}
	s, ok, err = NewClient(fakeCluster(coscheduling.gvk), nil).Installed(ctx, "scheduler-plugins-scheduler")
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, "coscheduling", s.Flavour())
}

// A native gang attempt is a Workload with one gang template covering every
// pod, and a PodGroup made from it, both controlled by the job.
func TestDesiredNativeObjects(t *testing.T) {
	g := gang("1")
	meta := metav1.ObjectMeta{Namespace: "team-a", Name: "bert-1", Labels: g.Labels, OwnerReferences: []metav1.OwnerReference{owner}}
	policy := schedulingv1alpha2.PodGroupSchedulingPolicy{Gang: &schedulingv1alpha2.GangSchedulingPolicy{MinCount: 3}}
	wantWorkload := &schedulingv1alpha2.Workload{
		TypeMeta:   metav1.TypeMeta{APIVersion: "scheduling.k8s.io/v1alpha2", Kind: "Workload"},
		ObjectMeta: meta,
		Spec: schedulingv1alpha2.WorkloadSpec{
			ControllerRef:     &schedulingv1alpha2.TypedLocalObjectReference{APIGroup: "ml.example.com", Kind: "TrainingJob", Name: "bert"},
			PodGroupTemplates: []schedulingv1alpha2.PodGroupTemplate{{Name: "gang", SchedulingPolicy: policy}},
		},
	}
	if diff := cmp.Diff(wantWorkload, desiredWorkload(g)); diff != "" {
		t.Errorf("Workload (-want +got):\n%s", diff)
	}
	wantPodGroup := &schedulingv1alpha2.PodGroup{
		TypeMeta:   metav1.TypeMeta{APIVersion: "scheduling.k8s.io/v1alpha2", Kind: "PodGroup"},
		ObjectMeta: meta,
		Spec: schedulingv1alpha2.PodGroupSpec{
			PodGroupTemplateRef: &schedulingv1alpha2.PodGroupTemplateReference{
				Workload: &schedulingv1alpha2.WorkloadPodGroupTemplateReference{WorkloadName: "bert-1", PodGroupTemplateName: "gang"}},
			SchedulingPolicy: policy,
		},
	}
	if diff := cmp.Diff(wantPodGroup, desiredNativePodGroup(g)); diff != "" {
		t.Errorf("PodGroup (-want +got):\n%s", diff)
	}
}

func TestJoinNative(t *testing.T) {
	p := &corev1.Pod{}
	native.Join(p, "bert-1")
	require.NotNil(t, p.Spec.SchedulingGroup)
	assert.Equal(t, ptr.To("bert-1"), p.Spec.SchedulingGroup.PodGroupName)
	assert.Empty(t, p.Labels)
	assert.Empty(t, p.Annotations)
}

func TestIsNativeGangWaiting(t *testing.T) {
	// What kube-scheduler 1.36 wrote on a held-back member (make e2e-native).
	assert.True(t, IsNativeGangWaiting("pod group is unschedulable, waiting for minCount pods from a gang to be scheduled, "+
		"one or more plugins asked to wait and no plugin rejected pod"))
	assert.True(t, IsNativeGangWaiting("waiting for minCount pods from a gang to appear in scheduling queue"))
	assert.False(t, IsNativeGangWaiting("0/6 nodes are available: 6 Insufficient nvidia.com/gpu."))
}

// countingMapper counts the RESTMapper look-ups that reach discovery.
type countingMapper struct {
	meta.RESTMapper
	lookups int
}

func (m *countingMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	m.lookups++
	return m.RESTMapper.RESTMapping(gk, versions...)
}

// The default scheduler places gangs natively when the API server serves
// scheduling.k8s.io/v1alpha2 PodGroups. Without them, the answer is kept a
// minute (the RESTMapper would ask the API server on every look-up), then
// asked again; a served kind is found in the RESTMapper's cache each time.
func TestInstalledNative(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	mapper := &countingMapper{RESTMapper: meta.NewDefaultRESTMapper(nil)}
	c := NewClient(fake.NewClientBuilder().WithRESTMapper(mapper).Build(), clock)
	for _, name := range []string{"", "default-scheduler"} {
		_, ok, err := c.Installed(ctx, name)
		require.NoError(t, err)
		assert.False(t, ok, name)
	}
	assert.Equal(t, 1, mapper.lookups, "the second look-up within a minute is cached")
	now = now.Add(nativeRecheck)
	mapper.RESTMapper.(*meta.DefaultRESTMapper).Add(native.gvk, meta.RESTScopeNamespace)
	s, ok, err := c.Installed(ctx, "")
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, "native", s.Flavour())
	assert.Equal(t, 2, mapper.lookups)
	_, ok, err = c.Installed(ctx, "default-scheduler")
	require.NoError(t, err)
	assert.True(t, ok)
	// Other schedulers never place gangs natively.
	for _, name := range []string{"my-scheduler", "volcano"} {
		_, ok, err := c.Installed(ctx, name)
		require.NoError(t, err)
		assert.False(t, ok, name)
	}
}

// Ensure creates an attempt's Workload and PodGroup, again without error,
// and deletes those of the job's earlier attempts, never another owner's.
func TestEnsureNative(t *testing.T) {
	ctx := context.Background()
	c := fakeCluster(native.gvk, workloadGVK)
	groups := NewClient(c, nil)
	s, ok, err := groups.Ensure(ctx, "", gang("0"))
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, native, s)
	_, _, err = groups.Ensure(ctx, "", gang("0"))
	require.NoError(t, err, "the objects exist already")
	foreign := desiredNativePodGroup(gang("9"))
	foreign.OwnerReferences = nil
	require.NoError(t, c.Create(ctx, foreign))

	bigger := gang("1")
	bigger.MinMember = 5
	_, ok, err = groups.Ensure(ctx, "default-scheduler", bigger)
	require.NoError(t, err)
	assert.True(t, ok)
	assert.ElementsMatch(t, []string{"bert-1", "bert-9"}, podGroups(t, c, native.gvk))
	assert.ElementsMatch(t, []string{"bert-1"}, podGroups(t, c, workloadGVK))
	pg := &schedulingv1alpha2.PodGroup{}
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "bert-1"}, pg))
	assert.EqualValues(t, 5, pg.Spec.SchedulingPolicy.Gang.MinCount)
}
