//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/test/testutil"
)

// waitModelServing waits until the Deployment of each version has its
// minimum of Ready pods, created by the real Deployment controller, and the
// version's HPA exists. It returns the Deployments by version.
func waitModelServing(t *testing.T, ns, md string, versions []string, minReplicas int32) map[string]*appsv1.Deployment {
	t.Helper()
	ctx := context.Background()
	out := map[string]*appsv1.Deployment{}
	for _, v := range versions {
		name := mlv1.VersionResourceName(md, v)
		dep := &appsv1.Deployment{}
		waitFor(t, 90*time.Second, "Deployment "+name+" ready", func() (bool, string) {
			if err := env.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, dep); err != nil {
				return false, err.Error()
			}
			return dep.Status.ReadyReplicas >= minReplicas, fmt.Sprintf("ready %d of %d", dep.Status.ReadyReplicas, minReplicas)
		})
		out[v] = dep

		pods := &corev1.PodList{}
		require.NoError(t, env.client.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels(dep.Spec.Selector.MatchLabels)))
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				running++
				assert.NotEmpty(t, p.Spec.NodeName, "scheduled by the real scheduler")
				require.NotEmpty(t, p.OwnerReferences)
				assert.Equal(t, "ReplicaSet", p.OwnerReferences[0].Kind, "created by the Deployment controller")
			}
		}
		assert.GreaterOrEqual(t, int32(running), minReplicas, "running pods of %s", name)

		hpa := &autoscalingv2.HorizontalPodAutoscaler{}
		waitFor(t, 30*time.Second, "HPA "+name, func() (bool, string) {
			err := env.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, hpa)
			return err == nil, fmt.Sprint(err)
		})
		assert.Equal(t, "Deployment", hpa.Spec.ScaleTargetRef.Kind)
		assert.Equal(t, name, hpa.Spec.ScaleTargetRef.Name)
		require.NotNil(t, hpa.Spec.MinReplicas)
		assert.Equal(t, minReplicas, *hpa.Spec.MinReplicas)
	}
	return out
}

func TestModelDeploymentServesThroughRealControllers(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	ctx := context.Background()
	md := testutil.ModelDeployment("classifier", ns).Version("v1", 100, "s3://models/classifier/v1").Replicas(2, 4).Obj()
	require.NoError(t, env.client.Create(ctx, md))

	deps := waitModelServing(t, ns, md.Name, []string{"v1"}, 2)
	assert.True(t, isOwnedBy(deps["v1"].OwnerReferences, md.Name, "ModelDeployment"))

	waitFor(t, 60*time.Second, "ModelDeployment Running", func() (bool, string) {
		got := &mlv1.ModelDeployment{}
		if err := env.client.Get(ctx, client.ObjectKeyFromObject(md), got); err != nil {
			return false, err.Error()
		}
		return got.Status.Phase == mlv1.PhaseRunning, fmt.Sprintf("phase %q", got.Status.Phase)
	})

	// Deleting it cascades through the garbage collector.
	require.NoError(t, env.client.Delete(ctx, md))
	for _, obj := range []client.Object{
		&appsv1.Deployment{}, &autoscalingv2.HorizontalPodAutoscaler{},
	} {
		waitFor(t, 60*time.Second, fmt.Sprintf("%T of the deleted ModelDeployment collected", obj), func() (bool, string) {
			err := env.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: mlv1.VersionResourceName(md.Name, "v1")}, obj)
			return apierrors.IsNotFound(err), fmt.Sprint(err)
		})
	}
	waitFor(t, 60*time.Second, "the servers' pods collected", func() (bool, string) {
		pods := &corev1.PodList{}
		require.NoError(t, env.client.List(ctx, pods, client.InNamespace(ns)))
		return len(pods.Items) == 0, fmt.Sprintf("%d pods", len(pods.Items))
	})
}

func isOwnedBy(refs []metav1.OwnerReference, name, kind string) bool {
	for _, r := range refs {
		if r.Name == name && r.Kind == kind {
			return true
		}
	}
	return false
}
