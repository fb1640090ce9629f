package modeldeployment_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	mdctrl "github.com/ml-operator/ml-operator/controllers/modeldeployment"
	"github.com/ml-operator/ml-operator/controllers/namespaces"
	"github.com/ml-operator/ml-operator/internal/manager"
	"github.com/ml-operator/ml-operator/test/testutil"
)

// Deleting a namespace with a serving ModelDeployment: the namespace
// controller deletes its Deployments, HPAs, Services and ConfigMaps, then
// the ModelDeployment. The controller must not apply them again (the API
// server refuses every create there, and server-side apply of a missing
// object is a create): it applies and creates nothing, emits no event and
// counts no reconcile error. The controller runs in a manager with the real
// manager's cache options; envtest has no namespace controller, so the test
// plays it once the controller's cache has seen the deletion.
func TestNamespaceDeletionAppliesNothing(t *testing.T) {
	ctx := context.Background()
	ns := testutil.Namespace(t, k8s)
	calls := runCountingController(t, ns)
	require.NoError(t, k8s.Create(ctx, testutil.ModelDeployment("svc", ns).Replicas(1, 3).
		Version("v1", 80, "s3://m/v1").Version("v2", 20, "s3://m/v2").Obj()))
	for _, v := range []string{"svc-v1", "svc-v2"} {
		testutil.Eventually(t, func() bool {
			return k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: v}, &appsv1.Deployment{}) == nil
		}, "Deployment", v)
		setDeploymentReady(t, ns, v, 1)
	}
	// The pass that writes phase Running emits Promoted after its write.
	testutil.Eventually(t, func() bool { return calls.get(ns, "event "+mlv1.EventPromoted) == 1 }, "ModelDeployment rolled out")

	require.NoError(t, k8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	testutil.Eventually(t, func() bool {
		terminating, err := namespaces.Terminating(ctx, calls.cache, ns)
		return err == nil && terminating
	}, "the controller's cache sees namespace", ns, "terminating")
	writes, evs := calls.get(ns, "write"), calls.get(ns, "event")
	errs, _ := metricValue(t, "controller_runtime_reconcile_errors_total", map[string]string{"controller": "modeldeployment"})
	conflicts := calls.get(ns, "conflict")

	seen := calls.get(ns, "pass")
	for _, list := range []client.ObjectList{&appsv1.DeploymentList{}, &autoscalingv2.HorizontalPodAutoscalerList{},
		&corev1.ServiceList{}, &corev1.ConfigMapList{}} {
		require.NoError(t, k8s.List(ctx, list, client.InNamespace(ns)))
		require.NoError(t, meta.EachListItem(list, func(o runtime.Object) error {
			return client.IgnoreNotFound(k8s.Delete(ctx, o.(client.Object)))
		}))
	}
	testutil.Eventually(t, func() bool { return calls.get(ns, "pass") > seen }, "a pass after the children's deletion")
	// And one more, after a change to the ModelDeployment.
	seen = calls.get(ns, "pass")
	md := &mlv1.ModelDeployment{}
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "svc"}, md))
	md.Annotations = map[string]string{"test.ml.example.com/poke": "1"}
	require.NoError(t, k8s.Update(ctx, md))
	testutil.Eventually(t, func() bool { return calls.get(ns, "pass") > seen }, "a pass after a change")

	var deps appsv1.DeploymentList
	require.NoError(t, k8s.List(ctx, &deps, client.InNamespace(ns)))
	assert.Empty(t, deps.Items, "no Deployment applied again")
	require.NoError(t, k8s.Delete(ctx, md))
	testutil.Eventually(t, func() bool { return gone(t, ns, "svc", &mlv1.ModelDeployment{}) }, "ModelDeployment gone")

	assert.Zero(t, calls.get(ns, "write")-writes, "creates and server-side applies after the namespace's deletion")
	assert.Zero(t, calls.get(ns, "event")-evs, "events after the namespace's deletion")
	after, _ := metricValue(t, "controller_runtime_reconcile_errors_total", map[string]string{"controller": "modeldeployment"})
	// The only errors allowed are status-write conflicts with the test's own
	// edits, which the work queue retries.
	assert.Equal(t, float64(calls.get(ns, "conflict")-conflicts), after-errs, "controller_runtime_reconcile_errors_total{controller=modeldeployment} besides status conflicts")
}

// The backstop: when the cache has not yet seen the namespace being
// deleted, the API server's refusal of the first apply ends the pass with no
// error (so no retry), no requeue, no status write and no event.
func TestRefusedApplyEndsThePassQuietly(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	direct, err := client.NewWithWatch(restCfg, client.Options{Scheme: manager.NewScheme()})
	require.NoError(t, err)
	applies := 0
	h.r.Client = interceptor.NewClient(direct, interceptor.Funcs{
		Apply: func(_ context.Context, _ client.WithWatch, _ runtime.ApplyConfiguration, _ ...client.ApplyOption) error {
			applies++
			err := apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "deployments"}, "svc-v1",
				fmt.Errorf("unable to create new content in namespace %s because it is being terminated", h.ns))
			err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{
				Type: corev1.NamespaceTerminatingCause, Message: "namespace " + h.ns + " is being terminated", Field: "metadata.namespace"})
			return err
		},
	})
	created := h.create(testutil.ModelDeployment("svc", "").Version("v1", 100, "s3://m/v1").Obj())

	res, err := h.r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(created)})
	require.NoError(t, err)
	assert.Equal(t, ctrl.Result{}, res, "no requeue")
	assert.Equal(t, 1, applies, "the pass ends at the first refused apply")
	assert.Empty(t, h.events(), "no event")
	assert.Equal(t, created.ResourceVersion, h.md("svc").ResourceVersion, "no status write")
}

// controllerCalls counts, per namespace, what the controller did: passes
// (its read of a ModelDeployment), writes that can create (Create and
// server-side Apply, refused ones included) and events (all, and by reason).
type controllerCalls struct {
	// cache is the controller's cache.
	cache  client.Reader
	mu     sync.Mutex
	counts map[string]int
}

func (c *controllerCalls) add(ns, what string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counts[ns+"/"+what]++
}

func (c *controllerCalls) get(ns, what string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[ns+"/"+what]
}

// runCountingController runs the ModelDeployment controller, alone, in a
// manager built with the real manager's cache options, for the rest of the
// test, its client and recorder counting what it does. Its cache holds
// namespace ns only: the earlier tests' ModelDeployments live on in their
// namespaces (envtest deletes none), and a pass over one of them could
// count a reconcile error in the process-wide metric the test reads.
func runCountingController(t *testing.T, ns string) *controllerCalls {
	t.Helper()
	cacheOpts := manager.CacheOptions(manager.NewOptions())
	cacheOpts.DefaultNamespaces = map[string]cache.Config{ns: {}}
	mgr, err := ctrl.NewManager(restCfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cacheOpts,
		// TestSeedExampleCreatesChildren's manager registered the name.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	require.NoError(t, err)
	calls := &controllerCalls{cache: mgr.GetCache(), counts: map[string]int{}}
	c := interceptor.NewClient(noWatch{mgr.GetClient()}, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*mlv1.ModelDeployment); ok {
				calls.add(key.Namespace, "pass")
			}
			return c.Get(ctx, key, obj, opts...)
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			calls.add(obj.GetNamespace(), "write")
			return c.Create(ctx, obj, opts...)
		},
		// A status write that meets a conflict (the test's own edits) ends
		// its pass with the conflict, for a retry: counted apart.
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			err := c.SubResource(sub).Patch(ctx, obj, patch, opts...)
			if apierrors.IsConflict(err) {
				calls.add(obj.GetNamespace(), "conflict")
			}
			return err
		},
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			switch m := obj.(type) {
			case interface{ GetNamespace() *string }: // typed apply configurations
				calls.add(ptr.Deref(m.GetNamespace(), ""), "write")
			case interface{ GetNamespace() string }: // unstructured ones (routers)
				calls.add(m.GetNamespace(), "write")
			default:
				t.Errorf("cannot tell the namespace of an applied %T", obj)
			}
			return c.Apply(ctx, obj, opts...)
		},
	})
	r := &mdctrl.Reconciler{Client: c, Recorder: countingRecorder{mgr.GetEventRecorder(mdctrl.ControllerName), calls}}
	require.NoError(t, r.SetupWithManager(mgr, 2))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(90 * time.Second):
			t.Error("manager did not stop within 90s")
		}
	})
	return calls
}

// noWatch adapts the manager's client to the interceptor, which wants a
// client.WithWatch; the reconciler never watches through its client.
type noWatch struct{ client.Client }

func (noWatch) Watch(context.Context, client.ObjectList, ...client.ListOption) (watch.Interface, error) {
	return nil, fmt.Errorf("not supported")
}

// countingRecorder counts events per namespace: each is a create on the API server.
type countingRecorder struct {
	events.EventRecorder
	calls *controllerCalls
}

func (r countingRecorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	if m, err := meta.Accessor(regarding); err == nil {
		r.calls.add(m.GetNamespace(), "event")
		r.calls.add(m.GetNamespace(), "event "+reason)
	}
	r.EventRecorder.Eventf(regarding, related, eventtype, reason, action, note, args...)
}
