package webhooks

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

// An explicit 0 in a field whose zero means "unset" is refused with its
// path and bounds; a missing field is defaulted; a non-zero value and a
// wrong type are left to the rest of admission.
func TestZerosIn(t *testing.T) {
	errs := zerosIn([]byte(`{"spec":{"numWorkers":0,"checkpoint":{"frequency":0,"keepLast":2},"metrics":{}}}`), trainingJobZeroDefaulted)
	require.Len(t, errs, 2)
	assert.Equal(t, "spec.numWorkers: Invalid value: 0: must be between 1 and 100", errs[0].Error())
	assert.Equal(t, "spec.checkpoint.frequency: Invalid value: 0: must be at least 1", errs[1].Error())

	assert.Empty(t, zerosIn([]byte(`{"spec":{"numWorkers":"0","checkpoint":null,"networking":[0]}}`), trainingJobZeroDefaulted),
		"not a number at the path: the decoder and the schema answer")
	assert.Empty(t, zerosIn([]byte(`{"spec":{"numWorkers":0`), trainingJobZeroDefaulted), "malformed JSON is the decoder's")
	assert.Empty(t, zerosIn([]byte(`{"spec":{}}`), modelDeploymentZeroDefaulted))
}

// The defaulting webhooks refuse an explicit 0 instead of replacing it with
// the default, as a cluster without them refuses it through the schema.
func TestDefaultingRefusesExplicitZeros(t *testing.T) {
	w := &TrainingJobWebhook{DefaultImages: testImages}
	job := &mlv1.TrainingJob{ObjectMeta: metav1.ObjectMeta{Name: "j"}}
	err := w.Default(createRequest("v1", `{"metadata":{"name":"j"},"spec":{"numWorkers":0,"networking":{"masterPort":0}}}`), job)
	require.Error(t, err)
	assert.Equal(t, `TrainingJob.ml.example.com "j" is invalid: [spec.numWorkers: Invalid value: 0: must be between 1 and 100, `+
		`spec.networking.masterPort: Invalid value: 0: must be between 1 and 65535]`, err.Error())

	job = &mlv1.TrainingJob{ObjectMeta: metav1.ObjectMeta{Name: "j"}}
	require.NoError(t, w.Default(createRequest("v1", `{"metadata":{"name":"j"},"spec":{}}`), job))
	assert.Equal(t, int32(1), job.Spec.NumWorkers, "a missing numWorkers is defaulted")

	md := &mlv1.ModelDeployment{ObjectMeta: metav1.ObjectMeta{Name: "m"}, Spec: mlv1.ModelDeploymentSpec{
		ModelName: "m", Framework: mlv1.ModelFrameworkPyTorch, Image: "i", Versions: []mlv1.ModelVersion{{Name: "v1"}}}}
	err = (&ModelDeploymentWebhook{}).Default(createRequest("v1", `{"metadata":{"name":"m"},"spec":{"scaling":{"minReplicas":0}}}`), md)
	require.Error(t, err)
	assert.Equal(t, `ModelDeployment.ml.example.com "m" is invalid: spec.scaling.minReplicas: Invalid value: 0: must be at least 1`, err.Error())
}

// The bounds in the messages are the CRD schema's, so that the answer is
// the same with and without the webhooks.
func TestZeroDefaultedBoundsMatchTheCRDs(t *testing.T) {
	for file, fields := range map[string][]zeroDefaulted{
		"ml.example.com_trainingjobs.yaml":     trainingJobZeroDefaulted,
		"ml.example.com_modeldeployments.yaml": modelDeploymentZeroDefaulted,
	} {
		data, err := os.ReadFile(filepath.Join("..", "config", "crd", "bases", file))
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
