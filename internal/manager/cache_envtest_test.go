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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/controllers/namespaces"
	"github.com/ml-operator/ml-operator/internal/manager"
	"github.com/ml-operator/ml-operator/test/testutil"
)

// The manager's cache holds only the children this operator labels: a
// cluster's other pods and ConfigMaps cost it no memory. Cached pods keep
// what the controllers read and lose their managedFields.
func TestCacheHoldsOnlyManagedChildren(t *testing.T) {
	env, err := testutil.StartEnv(testutil.EnvOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = env.Stop() })
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

	// The cache the manager builds (manager.New uses CacheOptions), alone:
	// a second manager in this test binary would clash with the controller
	// names TestManagerStartsAndStops registers.
	copts := manager.CacheOptions(manager.NewOptions())
	copts.Scheme = manager.NewScheme()
	cached, err := cache.New(env.Config, copts)
	require.NoError(t, err)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- cached.Start(runCtx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	require.True(t, cached.WaitForCacheSync(runCtx))

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
	assert.Equal(t, "c", p.Spec.Containers[0].Name, "cached pods keep what the controllers read")

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
