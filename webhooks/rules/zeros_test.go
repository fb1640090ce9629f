package rules

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// An explicit 0 in a field whose zero means "unset" is refused with its
// path and bounds; a missing field is defaulted; a non-zero value and a
// wrong type are left to the rest of admission.
func TestZerosIn(t *testing.T) {
	errs := ZerosIn([]byte(`{"spec":{"numWorkers":0,"checkpoint":{"frequency":0,"keepLast":2},"metrics":{}}}`), TrainingJobZeroDefaulted)
	require.Len(t, errs, 2)
	assert.Equal(t, "spec.numWorkers: Invalid value: 0: must be between 1 and 100", errs[0].Error())
	assert.Equal(t, "spec.checkpoint.frequency: Invalid value: 0: must be at least 1", errs[1].Error())

	assert.Empty(t, ZerosIn([]byte(`{"spec":{"numWorkers":"0","checkpoint":null,"networking":[0]}}`), TrainingJobZeroDefaulted),
		"not a number at the path: the decoder and the schema answer")
	assert.Empty(t, ZerosIn([]byte(`{"spec":{"numWorkers":0`), TrainingJobZeroDefaulted), "malformed JSON is the decoder's")
	assert.Empty(t, ZerosIn([]byte(`{"spec":{}}`), ModelDeploymentZeroDefaulted))
}

// The bounds in the messages are the CRD schema's, so that the answer is
// the same with and without the webhooks.
func TestZeroDefaultedBoundsMatchTheCRDs(t *testing.T) {
	for file, fields := range map[string][]ZeroDefaulted{
		"ml.example.com_trainingjobs.yaml":     TrainingJobZeroDefaulted,
		"ml.example.com_modeldeployments.yaml": ModelDeploymentZeroDefaulted,
	} {
		data, err := os.ReadFile(filepath.Join("..", "..", "config", "crd", "bases", file))
		require.NoError(t, err)
		var crd apiextensionsv1.CustomResourceDefinition
		require.NoError(t, yaml.Unmarshal(data, &crd))
		var schema *apiextensionsv1.JSONSchemaProps
		for _, v := range crd.Spec.Versions {
			if v.Name == "v1" {
				schema = v.Schema.OpenAPIV3Schema
			}
		}
		require.NotNil(t, schema, file)
		for _, f := range fields {
			t.Run(strings.Join(f.path, "."), func(t *testing.T) {
				s := schema
				for _, key := range f.path {
					p, ok := s.Properties[key]
					require.True(t, ok, "%s has no %s", file, strings.Join(f.path, "."))
					s = &p
				}
				require.NotNil(t, s.Minimum, "schema minimum")
				assert.Equal(t, float64(f.min), *s.Minimum, "minimum")
				assert.Greater(t, f.min, int64(0), "0 must be out of bounds, or refusing it would be wrong")
				if f.max == 0 {
					assert.Nil(t, s.Maximum, "schema has a maximum")
				} else {
					require.NotNil(t, s.Maximum, "schema maximum")
					assert.Equal(t, float64(f.max), *s.Maximum, "maximum")
				}
			})
		}
	}
}
