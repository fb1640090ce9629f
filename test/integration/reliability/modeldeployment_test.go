package reliability_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/controllers/modeldeployment"
	"github.com/ml-operator/ml-operator/test/testutil"
)

func newMDReconciler(t *testing.T, funcs interceptor.Funcs) *modeldeployment.Reconciler {
	t.Helper()
	routers := modeldeployment.NewRouterDetector(discovery.NewDiscoveryClientForConfigOrDie(cfg), time.Minute)
	_, err := routers.Detect()
	require.NoError(t, err)
	return &modeldeployment.Reconciler{
		Client:   interceptor.NewClient(cachedClient(t), funcs),
		Recorder: events.NewFakeRecorder(1000),
		Clock:    clocktesting.NewFakeClock(time.Now().Truncate(time.Second)),
		Routers:  routers,
	}
}

func getMD(t *testing.T, key client.ObjectKey) *mlv1.ModelDeployment {
	t.Helper()
	md := &mlv1.ModelDeployment{}
	require.NoError(t, k8s.Get(ctx, key, md))
	return md
}

// A status patch of the ModelDeployment reconciler that meets a real
// conflict (someone updated the object meanwhile; the patch carries the
// resourceVersion it was computed from) is returned as the conflict, so the
// work queue retries the pass; the retried pass writes the status.
func TestModelDeploymentStatusWriteSurvivesConflict(t *testing.T) {
	ns := testutil.Namespace(t, k8s)
	key := client.ObjectKey{Namespace: ns, Name: "conflicted"}
	conflicts := 0
	r := newMDReconciler(t, interceptor.Funcs{
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			if conflicts == 0 {
				bump(t, obj)
			}
			err := c.SubResource(sub).Patch(ctx, obj, patch, opts...)
			if apierrors.IsConflict(err) {
				conflicts++
			}
			return err
		},
	})
	require.NoError(t, k8s.Create(ctx, testutil.ModelDeployment(key.Name, ns).Version("v1", 100, "s3://models/v1").Router(mlv1.RouterService).Obj()))

	_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key})
	require.Error(t, err)
	require.True(t, apierrors.IsConflict(err), "the conflict is returned for a retry: %v", err)
	require.Equal(t, 1, conflicts)
	assert.Empty(t, getMD(t, key).Status.Phase, "the stale status was not written")

	_, err = r.Reconcile(ctx, ctrl.Request{NamespacedName: key})
	require.NoError(t, err)
	md := getMD(t, key)
	assert.Equal(t, md.Generation, md.Status.ObservedGeneration)
	assert.NotEmpty(t, md.Status.Phase)
	assert.NotEqual(t, mlv1.PhaseFailed, md.Status.Phase)
	assert.Equal(t, "reliability.example.com/bumped", firstKey(md.Annotations, "reliability.example.com/bumped"),
		"the other writer's change is kept")
}

// Transient errors applying children and reading the ModelDeployment end
// their pass with an error (one errored pass each); the ModelDeployment is
// never marked Failed, and once the API server answers again its children
// and status are written.
func TestModelDeploymentRetriesTransientErrors(t *testing.T) {
	ns := testutil.Namespace(t, k8s)
	key := client.ObjectKey{Namespace: ns, Name: "flaky"}
	applies, gets := &faults{}, &faults{}
	r := newMDReconciler(t, interceptor.Funcs{
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			if err := applies.next(); err != nil {
				return err
			}
			return c.Apply(ctx, obj, opts...)
		},
		Get: func(ctx context.Context, c client.WithWatch, k client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*mlv1.ModelDeployment); ok {
				if err := gets.next(); err != nil {
					return err
				}
			}
			return c.Get(ctx, k, obj, opts...)
		},
	})
	require.NoError(t, k8s.Create(ctx, testutil.ModelDeployment(key.Name, ns).Version("v1", 100, "s3://models/v1").Router(mlv1.RouterService).Obj()))
	applies.arm(transientErrors()...)
	gets.arm(transientErrors()[:2]...)

	failed := 0
	for i := 0; i < maxPasses; i++ {
		_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key})
		if err != nil {
			failed++
			require.Truef(t, isRetriable(err), "pass %d: unexpected error %v", i, err)
			assert.NotEqual(t, mlv1.PhaseFailed, getMD(t, key).Status.Phase)
			continue
		}
		break
	}
	injected := applies.count() + gets.count()
	assert.Equal(t, len(transientErrors())+2, injected, "every injected error was met")
	assert.Equal(t, injected, failed, "each ended its pass with an error")

	md := getMD(t, key)
	assert.Equal(t, md.Generation, md.Status.ObservedGeneration)
	assert.NotEqual(t, mlv1.PhaseFailed, md.Status.Phase)
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: mlv1.VersionResourceName(key.Name, "v1")}, &appsv1.Deployment{}),
		"the version's Deployment exists")
}

// firstKey returns k if m has it, else "".
func firstKey(m map[string]string, k string) string {
	if _, ok := m[k]; ok {
		return k
	}
	return ""
}
