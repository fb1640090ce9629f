package trainingjob_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ml-operator/ml-operator/test/testutil"
)

// The integration samples (not in the samples' kustomization, which the e2e
// test applies) pass the API server's validation.
func TestIntegrationSamplesAreValid(t *testing.T) {
	ns := testutil.Namespace(t, env.Client)
	for _, name := range []string{"ml_v1_trainingjob_volcano.yaml", "ml_v1_trainingjob_mlflow.yaml",
		"ml_v1_trainingjob_kueue.yaml", "ml_v1_trainingjob_tensorflow_ps.yaml"} {
		objs, err := testutil.ReadManifests(filepath.Join("..", "..", "config", "samples", name))
		require.NoError(t, err, name)
		require.Len(t, objs, 1, name)
		objs[0].SetNamespace(ns)
		require.NoError(t, env.Client.Create(ctx, objs[0], client.DryRunAll, client.FieldValidation("Strict")), name)
	}
}
