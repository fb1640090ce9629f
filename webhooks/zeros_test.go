package webhooks

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

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
