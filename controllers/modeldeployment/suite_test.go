package modeldeployment_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	mdctrl "github.com/ml-operator/ml-operator/controllers/modeldeployment"
	"github.com/ml-operator/ml-operator/internal/manager"
	"github.com/ml-operator/ml-operator/test/testutil"
)

// The integration tests run against a real kube-apiserver (envtest) with the
// Gateway API HTTPRoute and minimal Istio CRDs installed from test fixtures.
// envtest has no controllers: the tests write Deployment and pod status by
// hand, and most drive the reconciler pass by pass with a fake clock.

var (
	k8s     client.Client
	restCfg *rest.Config
	scheme  *runtime.Scheme
)

func TestMain(m *testing.M) {
	crds := filepath.Join(testutil.RepoRoot(), "test", "testdata", "crds")
	os.Exit(testutil.Main(m, testutil.EnvOptions{
		ExtraCRDDirs: []string{filepath.Join(crds, "gatewayapi"), filepath.Join(crds, "istio")},
	}, func(env *testutil.Env) (func(), error) {
		restCfg = env.Config
		scheme = manager.NewScheme()
		if err := gwv1.Install(scheme); err != nil {
			return nil, err
		}
		var err error
		k8s, err = client.New(restCfg, client.Options{Scheme: scheme})
		return nil, err
	}))
}

// harness drives one Reconciler pass by pass.
type harness struct {
	t        *testing.T
	r        *mdctrl.Reconciler
	clock    *clocktesting.FakeClock
	recorder *events.FakeRecorder
	ns       string
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	routers := mdctrl.NewRouterDetector(discovery.NewDiscoveryClientForConfigOrDie(restCfg), time.Minute)
	_, err := routers.Detect()
	require.NoError(t, err)
	// The fake clock starts at the real time: objects the API server stamps
	// (pod creation times) then sort correctly against the operator's times.
	clk := clocktesting.NewFakeClock(time.Now().Truncate(time.Second))
	rec := events.NewFakeRecorder(100)
	// The reconciler reads what the manager's cache would hold.
	c := testutil.NewCacheView(t, restCfg)
	return &harness{
		t:        t,
		r:        &mdctrl.Reconciler{Client: c, Recorder: rec, Clock: clk, Routers: routers},
		clock:    clk,
		recorder: rec,
		ns:       testutil.Namespace(t, k8s),
	}
}

func (h *harness) create(md *mlv1.ModelDeployment) *mlv1.ModelDeployment {
	h.t.Helper()
	md.Namespace = h.ns
	require.NoError(h.t, k8s.Create(context.Background(), md))
	return md
}

// reconcile runs one pass and returns its result.
func (h *harness) reconcile(name string) ctrl.Result {
	h.t.Helper()
	res, err := h.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: h.ns, Name: name}})
	require.NoError(h.t, err)
	return res
}

func (h *harness) md(name string) *mlv1.ModelDeployment {
	h.t.Helper()
	md := &mlv1.ModelDeployment{}
	require.NoError(h.t, k8s.Get(context.Background(), client.ObjectKey{Namespace: h.ns, Name: name}, md))
	return md
}

// update changes the spec with a retry on conflict.
func (h *harness) update(name string, change func(*mlv1.ModelDeployment)) {
	h.t.Helper()
	md := h.md(name)
	change(md)
	require.NoError(h.t, k8s.Update(context.Background(), md))
}

func (h *harness) deployment(name string) *appsv1.Deployment {
	h.t.Helper()
	d := &appsv1.Deployment{}
	require.NoError(h.t, k8s.Get(context.Background(), client.ObjectKey{Namespace: h.ns, Name: name}, d))
	return d
}

// setReady writes a Deployment's status as the deployment controller would:
// ready of its spec.replicas pods are Ready.
func (h *harness) setReady(name string, ready int32) {
	h.t.Helper()
	setDeploymentReady(h.t, h.ns, name, ready)
}

func setDeploymentReady(t *testing.T, ns, name string, ready int32) {
	t.Helper()
	d := &appsv1.Deployment{}
	require.NoError(t, k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, d))
	replicas := int32(1)
	if d.Spec.Replicas != nil {
		replicas = *d.Spec.Replicas
	}
	d.Status = appsv1.DeploymentStatus{
		ObservedGeneration: d.Generation,
		Replicas:           replicas,
		UpdatedReplicas:    replicas,
		ReadyReplicas:      ready,
		AvailableReplicas:  ready,
	}
	require.NoError(t, k8s.Status().Update(context.Background(), d))
}

// crashLoopingPod creates a pod of a version whose container restarted
// restarts times and is not Ready, as the kubelet would report it.
func (h *harness) crashLoopingPod(md, version, name string, restarts int32) *corev1.Pod {
	h.t.Helper()
	ctx := context.Background()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: h.ns, Labels: map[string]string{
			mlv1.LabelModelDeployment: md, mlv1.LabelModelVersion: version, mlv1.LabelManagedBy: mlv1.ManagedByValue,
		}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: mdctrl.ContainerName, Image: "example.com/bad:1"}}},
	}
	require.NoError(h.t, k8s.Create(ctx, p))
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
		Name: mdctrl.ContainerName, Image: "example.com/bad:1", RestartCount: restarts, Ready: false,
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
	}}}
	require.NoError(h.t, k8s.Status().Update(ctx, p))
	return p
}

// events drains the recorded events.
func (h *harness) events() []string {
	var out []string
	for {
		select {
		case e := <-h.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// hasEvent reports whether one of evs starts with prefix (type and reason) and contains substr.
func hasEvent(evs []string, prefix, substr string) bool {
	for _, e := range evs {
		if strings.HasPrefix(e, prefix) && strings.Contains(e, substr) {
			return true
		}
	}
	return false
}

// activeWeights maps status.activeVersions to their effective weights.
func activeWeights(md *mlv1.ModelDeployment) map[string]int32 {
	out := map[string]int32{}
	for _, v := range md.Status.ActiveVersions {
		out[v.Name] = v.Weight
	}
	return out
}

// routeWeights reads the HTTPRoute's backendRef weights.
func (h *harness) routeWeights(name string) map[string]int32 {
	h.t.Helper()
	route := &gwv1.HTTPRoute{}
	require.NoError(h.t, k8s.Get(context.Background(), client.ObjectKey{Namespace: h.ns, Name: name}, route))
	require.Len(h.t, route.Spec.Rules, 1)
	out := map[string]int32{}
	for _, b := range route.Spec.Rules[0].BackendRefs {
		out[string(b.Name)] = *b.Weight
	}
	return out
}

func condStatus(md *mlv1.ModelDeployment, typ string) (metav1.ConditionStatus, string) {
	for _, c := range md.Status.Conditions {
		if c.Type == typ {
			return c.Status, c.Reason
		}
	}
	return "", ""
}
