package nativegangtest

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1alpha2 "k8s.io/api/scheduling/v1alpha2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/internal/localcluster"
	"github.com/ml-operator/ml-operator/internal/manager"
	"github.com/ml-operator/ml-operator/test/testutil"
)

// nativeGangAPIServer is kube-apiserver with Kubernetes' native gang
// scheduling API on, as the local cluster's `make run GANG=native` starts it.
var nativeGangAPIServer = map[string]string{
	"feature-gates":  localcluster.NativeGangFeatureGates,
	"runtime-config": localcluster.NativeGangRuntimeConfig,
}

// managerUser is who the manager runs as: bound to the manager's
// ClusterRole of config/rbac/role.yaml (the kubebuilder:rbac markers) and
// nothing else.
const managerUser = "ml-operator-manager-rbac-test"

// bindManagerRole creates config/rbac/role.yaml's ClusterRole under another
// name and binds it to managerUser, and returns a config that acts as it.
func bindManagerRole(t *testing.T, env *testutil.Env) *rest.Config {
	t.Helper()
	ctx := context.Background()
	objs, err := testutil.ReadManifests(filepath.Join(testutil.RepoRoot(), "config", "rbac", "role.yaml"))
	require.NoError(t, err)
	role := &rbacv1.ClusterRole{}
	for _, o := range objs {
		if o.GetKind() == "ClusterRole" && o.GetName() == "manager-role" {
			require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, role))
		}
	}
	require.NotEmpty(t, role.Rules, "manager-role in config/rbac/role.yaml")
	role.ObjectMeta = metav1.ObjectMeta{Name: managerUser}
	require.NoError(t, env.Client.Create(ctx, role))
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: managerUser},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: managerUser},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: managerUser}},
	}
	require.NoError(t, env.Client.Create(ctx, binding))
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: managerUser}
	return cfg
}

// With the API server serving scheduling.k8s.io/v1alpha2, the real manager,
// with only the RBAC its markers generate, gives each attempt a Workload
// and a PodGroup whose gang covers every pod (the ranks and the parameter
// server), which the API server accepts (its PodGroupWorkloadExists
// admission wants the Workload first); every pod names the PodGroup in
// spec.schedulingGroup, and the status says Native. A numWorkers change
// re-forms the gang in a new attempt with a new Workload and PodGroup of
// the new size, and attempt 0's are deleted.
func TestNativeGangWorkloadAndPodGroupPerAttempt(t *testing.T) {
	env, err := testutil.StartEnv(testutil.EnvOptions{APIServerFlags: nativeGangAPIServer})
	require.NoError(t, err)
	t.Cleanup(func() { _ = env.Stop() })
	cfg := bindManagerRole(t, env)

	opts := manager.NewOptions()
	opts.MetricsAddr = testutil.FreeAddr(t)
	opts.MetricsSecure = false
	opts.ProbeAddr = testutil.FreeAddr(t)
	opts.LeaderElect = false
	opts.EnableWebhooks = false
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- manager.Run(ctx, cfg, opts) }()
	t.Cleanup(func() { cancel(); <-done })

	c := env.Client
	ns := testutil.Namespace(t, c)
	job := testutil.TrainingJob("tf", ns).Framework(mlv1.FrameworkTensorFlow).Workers(3).GPUs(1).
		ParameterServers(1).RetainCheckpoints(false).Obj()
	require.NoError(t, c.Create(ctx, job))

	assertAttempt := func(attempt int32, pods int) {
		t.Helper()
		group := mlv1.GangGroupName(job.Name, attempt)
		var list corev1.PodList
		testutil.Eventually(t, func() bool {
			require.NoError(t, c.List(ctx, &list, client.InNamespace(ns),
				client.MatchingLabels{mlv1.LabelTrainingJob: job.Name, mlv1.LabelRestartAttempt: fmt.Sprint(attempt)}))
			return len(list.Items) == pods
		}, fmt.Sprintf("%d pods of attempt %d", pods, attempt))
		for _, p := range list.Items {
			if assert.NotNil(t, p.Spec.SchedulingGroup, p.Name) {
				assert.Equal(t, group, *p.Spec.SchedulingGroup.PodGroupName, p.Name)
			}
		}
		wl := &schedulingv1alpha2.Workload{}
		require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: group}, wl))
		require.Len(t, wl.Spec.PodGroupTemplates, 1)
		assert.EqualValues(t, pods, wl.Spec.PodGroupTemplates[0].SchedulingPolicy.Gang.MinCount)
		assert.Equal(t, &schedulingv1alpha2.TypedLocalObjectReference{APIGroup: mlv1.GroupVersion.Group, Kind: "TrainingJob", Name: job.Name},
			wl.Spec.ControllerRef)
		pg := &schedulingv1alpha2.PodGroup{}
		require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: group}, pg))
		require.NotNil(t, pg.Spec.SchedulingPolicy.Gang)
		assert.EqualValues(t, pods, pg.Spec.SchedulingPolicy.Gang.MinCount)
		for _, owners := range [][]metav1.OwnerReference{wl.OwnerReferences, pg.OwnerReferences} {
			if assert.Len(t, owners, 1) {
				assert.Equal(t, job.Name, owners[0].Name)
				assert.True(t, *owners[0].Controller)
			}
		}
	}
	assertAttempt(0, 4)
	testutil.Eventually(t, func() bool {
		got := &mlv1.TrainingJob{}
		require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(job), got))
		return got.Status.GangPlacement == mlv1.GangPlacementNative
	}, "status.gangPlacement Native")

	require.NoError(t, c.Patch(ctx, job, client.RawPatch(client.Merge.Type(), []byte(`{"spec":{"numWorkers":2}}`))))
	assertAttempt(1, 3)
	// Deleted: gone, or held only by the API server's PodGroupProtection
	// finalizer (kube-controller-manager, which removes it once the pods
	// are gone, does not run under envtest).
	old := mlv1.GangGroupName(job.Name, 0)
	testutil.Eventually(t, func() bool {
		wl := &schedulingv1alpha2.Workload{}
		errWL := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: old}, wl)
		pg := &schedulingv1alpha2.PodGroup{}
		errPG := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: old}, pg)
		return (apierrors.IsNotFound(errWL) || wl.DeletionTimestamp != nil) &&
			(apierrors.IsNotFound(errPG) || pg.DeletionTimestamp != nil)
	}, "attempt 0's Workload and PodGroup deleted")
}
