package v1_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/test/testutil"
)

// Without the webhooks, the schema alone refuses a placementTimeout that is
// neither 0s nor within 10s..24h (CEL), and one that is no duration
// (pattern); 0s and both bounds are accepted.
func TestSchemaPlacementTimeout(t *testing.T) {
	ns := testutil.Namespace(t, k8s)
	ctx := context.Background()
	withTimeout := func(name string, d any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "ml.example.com/v1", "kind": "TrainingJob",
			"metadata": map[string]any{"name": name, "namespace": ns},
			"spec":     map[string]any{"image": "img", "scheduling": map[string]any{"placementTimeout": d}},
		}}
	}
	const rule = `: must be 0s (never) or between 10s and 24h`
	for name, tc := range map[string]struct {
		value, want string
	}{
		"below 10s":   {"9s", `spec.scheduling.placementTimeout: Invalid value: "9s"` + rule},
		"above 24h":   {"24h1s", `spec.scheduling.placementTimeout: Invalid value: "24h1s"` + rule},
		"negative":    {"-1m", `spec.scheduling.placementTimeout: Invalid value: "-1m": spec.scheduling.placementTimeout in body should match`},
		"no duration": {"soon", `spec.scheduling.placementTimeout: Invalid value: "soon": spec.scheduling.placementTimeout in body should match`},
	} {
		t.Run(name, func(t *testing.T) {
			assert.Contains(t, invalidCauses(t, k8s.Create(ctx, withTimeout("refused", tc.value))), tc.want)
		})
	}
	for name, value := range map[string]string{"never": "0s", "lowest": "10s", "highest": "24h", "minutes": "1m30s"} {
		require.NoError(t, k8s.Create(ctx, withTimeout(name, value)), value)
	}
	got := &mlv1.TrainingJob{}
	require.NoError(t, k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "minutes"}, got))
	assert.Equal(t, &metav1.Duration{Duration: 90 * time.Second}, got.Spec.Scheduling.PlacementTimeout)
	// The CEL rule spells the same bounds as the constants the webhook uses.
	assert.Equal(t, 10*time.Second, mlv1.MinPlacementTimeout)
	assert.Equal(t, 24*time.Hour, mlv1.MaxPlacementTimeout)
}
