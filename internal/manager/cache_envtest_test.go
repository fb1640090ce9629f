package manager_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/controllers/namespaces"
	"github.com/ml-operator/ml-operator/internal/manager"
	"github.com/ml-operator/ml-operator/test/testutil"
)

// startManagerCache runs the cache the manager builds (manager.New uses
// CacheOptions) for the rest of the test, alone: a second manager in this
// test binary would clash with the controller names TestManagerStartsAndStops
// registers.
func startManagerCache(t *testing.T) cache.Cache {
	t.Helper()
	copts := manager.CacheOptions(manager.NewOptions())
	copts.Scheme = manager.NewScheme()
	cached, err := cache.New(env.Config, copts)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cached.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	require.True(t, cached.WaitForCacheSync(ctx))
	return cached
}

// The manager's cache holds only the children this operator labels: a
// cluster's other pods and ConfigMaps cost it no memory. Cached pods keep
// what the controllers read and lose their managedFields.
func TestCacheHoldsOnlyManagedChildren(t *testing.T) {
	ctx := context.Background()
	ns := testutil.Namespace(t, env.Client)

	managed := map[string]string{mlv1.LabelManagedBy: mlv1.ManagedByValue}
	pod := func(name string, labels map[string]string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example.com/c:1"}}},
		}
	}
	for _, obj := range []client.Object{
		pod("ours", managed), pod("theirs", map[string]string{"app": "other"}),
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "ours", Namespace: ns, Labels: managed}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "theirs", Namespace: ns}},
	} {
		require.NoError(t, env.Client.Create(ctx, obj))
	}

	cached := startManagerCache(t)

	for _, c := range []struct {
		obj  client.Object
		list client.ObjectList
	}{{&corev1.Pod{}, &corev1.PodList{}}, {&corev1.ConfigMap{}, &corev1.ConfigMapList{}}} {
		require.Eventually(t, func() bool {
			return cached.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ours"}, c.obj) == nil
		}, 20*time.Second, 50*time.Millisecond, "the labelled %T is cached", c.obj)
		assert.Empty(t, c.obj.GetManagedFields(), "managedFields are not cached")
		err := cached.Get(ctx, client.ObjectKey{Namespace: ns, Name: "theirs"}, c.obj)
		assert.True(t, apierrors.IsNotFound(err), "an unlabelled %T is not cached: %v", c.obj, err)
		require.NoError(t, cached.List(ctx, c.list, client.InNamespace(ns)))
		items, err := meta.ExtractList(c.list)
		require.NoError(t, err)
		assert.Len(t, items, 1, "only the labelled %T is listed", c.obj)
	}
	p := &corev1.Pod{}
	require.NoError(t, cached.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ours"}, p))
	assert.Equal(t, managed, p.Labels, "cached pods keep what the controllers read")

	// Namespaces: their metadata, trimmed to what tells a deletion.
	nsMeta := &metav1.PartialObjectMetadata{}
	nsMeta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	require.NoError(t, cached.Get(ctx, client.ObjectKey{Name: ns}, nsMeta))
	assert.Empty(t, nsMeta.Labels, "a cached namespace loses its labels")
	terminating, err := namespaces.Terminating(ctx, cached, ns)
	require.NoError(t, err)
	assert.False(t, terminating)
	require.NoError(t, env.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	require.Eventually(t, func() bool {
		terminating, err := namespaces.Terminating(ctx, cached, ns)
		return err == nil && terminating
	}, 20*time.Second, 50*time.Millisecond, "the cache sees the namespace being deleted")
}

// What a controller reads from a cached pod is what trimPod keeps, nothing
// more: a pod read through a cache built from CacheOptions has none of the
// spec the controllers only write. The envtest suites that run controllers
// read through the same options (testutil.ManagerOptions for a manager's
// cache, testutil.CacheView for pass-by-pass reconcilers), so a controller
// that read a stripped field fails there; the view answers exactly what the
// cache holds.
func TestCachedPodsLackTheFieldsTheTransformStrips(t *testing.T) {
	ctx := context.Background()
	ns := testutil.Namespace(t, env.Client)
	managed := map[string]string{mlv1.LabelManagedBy: mlv1.ManagedByValue}
	full := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "full", Namespace: ns, Labels: managed, Annotations: map[string]string{"team": "a"}},
		Spec: corev1.PodSpec{
			Hostname: "full", Subdomain: "workers",
			Volumes:     []corev1.Volume{{Name: "ckpt", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
			Tolerations: []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{{
				Name: "trainer", Image: "example.com/trainer:1", Command: []string{"python"}, Args: []string{"train.py"},
				Env:            []corev1.EnvVar{{Name: "NUM_WORKERS", Value: "2"}},
				Ports:          []corev1.ContainerPort{{ContainerPort: 29500}},
				VolumeMounts:   []corev1.VolumeMount{{Name: "ckpt", MountPath: "/ckpt"}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(29500)}}},
				Resources: corev1.ResourceRequirements{
					Limits:   corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")},
					Requests: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1"), corev1.ResourceCPU: resource.MustParse("2")},
				},
			}, {Name: "sidecar", Image: "example.com/proxy:1"}},
		},
	}
	require.NoError(t, env.Client.Create(ctx, full))

	cached := startManagerCache(t)
	fromCache := &corev1.Pod{}
	require.Eventually(t, func() bool {
		return cached.Get(ctx, client.ObjectKeyFromObject(full), fromCache) == nil
	}, 20*time.Second, 50*time.Millisecond, "the pod is cached")

	// Stripped: everything of the spec but the node and the limits of the
	// containers that have some; managedFields and annotations.
	require.Len(t, fromCache.Spec.Containers, 1, "only the container with limits is kept")
	c := fromCache.Spec.Containers[0]
	for what, v := range map[string]any{
		"managedFields": fromCache.ManagedFields, "annotations": fromCache.Annotations,
		"volumes": fromCache.Spec.Volumes, "tolerations": fromCache.Spec.Tolerations,
		"hostname": fromCache.Spec.Hostname, "subdomain": fromCache.Spec.Subdomain, "command": c.Command, "args": c.Args,
		"ports": c.Ports, "volumeMounts": c.VolumeMounts, "readinessProbe": c.ReadinessProbe,
		"image": c.Image, "env": c.Env, "container name": c.Name, "requests": c.Resources.Requests,
		"QoS class": fromCache.Status.QOSClass,
	} {
		assert.Empty(t, v, "a cached pod has no %s", what)
	}
	// Kept: what the controllers read.
	assert.Equal(t, managed, fromCache.Labels)
	assert.Equal(t, full.Spec.Containers[0].Resources.Limits, c.Resources.Limits)

	// The view the pass-by-pass suites read through answers the same.
	view := testutil.NewCacheView(t, env.Config)
	fromView := &corev1.Pod{}
	require.NoError(t, view.Get(ctx, client.ObjectKeyFromObject(full), fromView))
	fromCache.TypeMeta, fromView.TypeMeta = metav1.TypeMeta{}, metav1.TypeMeta{}
	assert.Equal(t, fromCache, fromView, "CacheView answers what the cache holds")

	// And leaves out what the cache leaves out: an unlabelled pod, a
	// namespace's labels.
	other := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: ns},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example.com/c:1"}}},
	}
	require.NoError(t, env.Client.Create(ctx, other))
	err := view.Get(ctx, client.ObjectKeyFromObject(other), &corev1.Pod{})
	assert.True(t, apierrors.IsNotFound(err), "an unlabelled pod is not found: %v", err)
	var pods corev1.PodList
	require.NoError(t, view.List(ctx, &pods, client.InNamespace(ns)))
	require.Len(t, pods.Items, 1, "only the labelled pod is listed")
	assert.Equal(t, fromView, &pods.Items[0])
	nsMeta := &metav1.PartialObjectMetadata{}
	nsMeta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	require.NoError(t, view.Get(ctx, client.ObjectKey{Name: ns}, nsMeta))
	assert.Empty(t, nsMeta.Labels, "a namespace's labels are not cached")
	assert.Equal(t, ns, nsMeta.Name)
}
