package v1_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

// schemaOf is the OpenAPI schema of one version of the TrainingJob CRD as
// controller-gen wrote it from the markers.
func schemaOf(t *testing.T, version string) *apiextensionsv1.JSONSchemaProps {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "crd", "bases", "ml.example.com_trainingjobs.yaml"))
	require.NoError(t, err)
	var crd apiextensionsv1.CustomResourceDefinition
	require.NoError(t, yaml.Unmarshal(data, &crd))
	for _, v := range crd.Spec.Versions {
		if v.Name == version {
			return v.Schema.OpenAPIV3Schema
		}
	}
	t.Fatalf("the CRD serves no %s", version)
	return nil
}

// The schema's markers restate the worker contract's bounds (a marker cannot
// name a constant): they must stay equal, so that a cluster without the
// webhooks refuses what the webhooks refuse.
func TestBoundsMatchTheSchema(t *testing.T) {
	v1 := schemaOf(t, "v1").Properties["spec"].Properties
	alpha := schemaOf(t, "v1alpha1").Properties["spec"].Properties
	num := func(f float64) *float64 { return &f }
	for name, tc := range map[string]struct {
		got  *float64
		want float64
	}{
		"v1 numWorkers minimum":          {v1["numWorkers"].Minimum, mlv1.MinNumWorkers},
		"v1 numWorkers maximum":          {v1["numWorkers"].Maximum, mlv1.MaxNumWorkers},
		"v1alpha1 workers minimum":       {alpha["workers"].Minimum, mlv1.MinNumWorkers},
		"v1alpha1 workers maximum":       {alpha["workers"].Maximum, mlv1.MaxNumWorkers},
		"v1 gpusPerWorker maximum":       {v1["gpusPerWorker"].Maximum, mlv1.MaxGPUsPerWorker},
		"v1alpha1 gpuPerWorker maximum":  {alpha["gpuPerWorker"].Maximum, mlv1.MaxGPUsPerWorker},
		"v1 hyperparameters maxProps":    {num(float64(*v1["hyperparameters"].MaxProperties)), mlv1.MaxHyperparameters},
		"v1alpha1 hyperparameters props": {num(float64(*alpha["hyperparameters"].MaxProperties)), mlv1.MaxHyperparameters},
		"v1 elastic minWorkers minimum":  {v1["elastic"].Properties["minWorkers"].Minimum, mlv1.MinElasticWorkers},
		"v1 elastic minWorkers maximum":  {v1["elastic"].Properties["minWorkers"].Maximum, mlv1.MaxElasticWorkers},
		"v1 elastic maxWorkers minimum":  {v1["elastic"].Properties["maxWorkers"].Minimum, mlv1.MinElasticWorkers},
		"v1 elastic maxWorkers maximum":  {v1["elastic"].Properties["maxWorkers"].Maximum, mlv1.MaxElasticWorkers},
		"v1 template terminationGracePeriodSeconds minimum": {
			v1["template"].Properties["terminationGracePeriodSeconds"].Minimum, 0},
		"v1 template terminationGracePeriodSeconds maximum": {
			v1["template"].Properties["terminationGracePeriodSeconds"].Maximum, mlv1.MaxTerminationGracePeriodSeconds},
	} {
		if assert.NotNil(t, tc.got, name) {
			assert.Equal(t, tc.want, *tc.got, name)
		}
	}
	for name, tc := range map[string]struct {
		got  *apiextensionsv1.JSON
		want int
	}{
		"v1 numWorkers default":    {v1["numWorkers"].Default, mlv1.MinNumWorkers},
		"v1 gpusPerWorker default": {v1["gpusPerWorker"].Default, mlv1.DefaultGPUsPerWorker},
	} {
		if assert.NotNil(t, tc.got, name) {
			var n int
			require.NoError(t, json.Unmarshal(tc.got.Raw, &n), name)
			assert.Equal(t, tc.want, n, name)
		}
	}
	assert.Equal(t, int32(mlv1.MinNumWorkers), (&mlv1.TrainingJobSpec{}).EffectiveNumWorkers(), "unset numWorkers")
	assert.Equal(t, int32(mlv1.DefaultGPUsPerWorker), (&mlv1.TrainingJobSpec{}).EffectiveGPUs(), "unset gpusPerWorker")
}

// Each family the contract reserves holds the members it names, and an
// exact name is never also covered by a family (it would be listed twice).
func TestReservedEnvNames(t *testing.T) {
	for _, name := range []string{mlv1.EnvPETNNodes, mlv1.EnvCheckpointURI, mlv1.EnvDMLCTaskID, mlv1.EnvJAXProcessID,
		mlv1.EnvMLflowRunName, mlv1.HyperparameterEnvName("learningRate"), mlv1.EnvRank, mlv1.EnvTFConfig} {
		assert.True(t, mlv1.IsReservedEnvName(name), name)
	}
	assert.Equal(t, "HYPERPARAM_LEARNINGRATE", mlv1.HyperparameterEnvName("learningRate"))
	// The launchers' own options the operator does not set stay the
	// user's: torchrun's, JAX's, MLflow's and xgboost's families are
	// reserved only for the names the operator sets.
	for _, name := range append([]string{"EXTRA", "NCCL_SOCKET_IFNAME", "PET_REDIRECTS", "PET_TEE", "PET_MAX_RESTARTS",
		"PET_RDZV_BACKEND", "JAX_PLATFORMS", "JAX_COORDINATOR_BIND_ADDRESS", "MLFLOW_TRACKING_TOKEN", "DMLC_INTERFACE"},
		mlv1.OverridableEnvNames...) {
		assert.False(t, mlv1.IsReservedEnvName(name), name)
	}
	for _, name := range []string{mlv1.EnvPETNProcPerNode, mlv1.EnvPETNodeRank, mlv1.EnvPETMasterAddr, mlv1.EnvPETMasterPort,
		mlv1.EnvJAXCoordinatorAddress, mlv1.EnvJAXNumProcesses, mlv1.EnvMLflowTrackingURI, mlv1.EnvDMLCTrackerURI} {
		assert.True(t, mlv1.IsReservedEnvName(name), name)
	}
	for _, name := range mlv1.ReservedEnvNames {
		for _, p := range mlv1.ReservedEnvPrefixes {
			assert.False(t, strings.HasPrefix(name, p), "%s is listed by name and by family %s*", name, p)
		}
	}
}
