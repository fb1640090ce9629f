package integration_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/test/testutil"
)

func TestModelDeploymentDefaults(t *testing.T) {
	ctx := context.Background()
	md := testutil.ModelDeployment("iris", testutil.Namespace(t, k8s)).Version("v1", -1, "s3://models/iris").Obj()
	md.Spec.Storage = &mlv1.ModelStorageSpec{}
	require.NoError(t, k8s.Create(ctx, md))
	got := &mlv1.ModelDeployment{}
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(md), got))
	s := got.Spec
	assert.Equal(t, ptr.To[int32](100), s.Versions[0].Weight, "a single version without a weight gets 100")
	assert.Equal(t, int32(8080), s.Port)
	assert.Equal(t, mlv1.HealthCheckSpec{Endpoint: "/health", Port: ptr.To[int32](8080), IntervalSeconds: 30,
		TimeoutSeconds: 5, FailureThreshold: 3}, s.HealthCheck)
	assert.Equal(t, int32(1), s.Scaling.MinReplicas)
	assert.Equal(t, ptr.To[int32](1), s.Scaling.MaxReplicas)
	assert.Equal(t, int32(80), s.Scaling.TargetCPUUtilization)
	assert.Equal(t, mlv1.RouterAuto, s.Traffic.Router)
	assert.Equal(t, ptr.To(true), s.Rollout.AutoRollback)
	assert.Equal(t, ptr.To(0.05), s.Rollout.MaxErrorRate)
	assert.Equal(t, int32(600), s.Rollout.ProgressDeadlineSeconds)
	assert.Equal(t, "10Gi", s.Storage.Size.String())
	assert.Equal(t, ptr.To(true), s.Storage.RetainOnDelete)

	// The health port and maxReplicas were defaulted from port and
	// minReplicas; they follow them.
	got.Spec.Port = 9000
	got.Spec.Scaling.MinReplicas = 3
	require.NoError(t, k8s.Update(ctx, got))
	assert.Equal(t, ptr.To[int32](9000), got.Spec.HealthCheck.Port)
	assert.Equal(t, ptr.To[int32](3), got.Spec.Scaling.MaxReplicas)

	// A canary: weights that sum to 100 are accepted.
	got.Spec.Versions = append(got.Spec.Versions, mlv1.ModelVersion{Name: "v2", Weight: ptr.To[int32](10), ModelPath: "s3://models/iris", ModelSecretName: "s3-credentials"})
	got.Spec.Versions[0].Weight = ptr.To[int32](90)
	require.NoError(t, k8s.Update(ctx, got))
}
