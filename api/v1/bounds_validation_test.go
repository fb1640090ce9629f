package v1_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/test/testutil"
)

// Without the webhooks, the schema alone refuses a storage size of zero or
// less (CEL on the quantity), a model or dataset over 2048 bytes and more
// than 256 hyperparameters, in v1 and v1alpha1 (issue 10's bad-input
// bounds); the bounds themselves are accepted.
func TestSchemaBoundsSizesNamesAndHyperparameters(t *testing.T) {
	ns := testutil.Namespace(t, k8s)
	ctx := context.Background()
	pvc := func(size string) mlv1.CheckpointStorage {
		return mlv1.CheckpointStorage{Type: mlv1.StorageTypePVC, Size: ptr.To(resource.MustParse(size))}
	}
	many := testutil.TrainingJob("many-params", ns).Obj()
	many.Spec.Hyperparameters = map[string]mlv1.HyperparameterValue{}
	for i := range 257 {
		many.Spec.Hyperparameters[fmt.Sprintf("p%03d", i)] = mlv1.NewHyperparameter(i)
	}
	md := testutil.ModelDeployment("cache-zero", ns).Version("v1", -1, "s3://models/v1").Obj()
	md.Spec.Storage = &mlv1.ModelStorageSpec{Size: ptr.To(resource.MustParse("0"))}

	refused := map[string]struct {
		obj  client.Object
		want string
	}{
		"checkpoint size zero":     {testutil.TrainingJob("size-zero", ns).CheckpointStorage(pvc("0")).Obj(), `spec.checkpoint.storage.size: Invalid value: "0": must be greater than zero`},
		"checkpoint size negative": {testutil.TrainingJob("size-negative", ns).CheckpointStorage(pvc("-10Gi")).Obj(), `spec.checkpoint.storage.size: Invalid value: "-10Gi": must be greater than zero`},
		"model cache size zero":    {md, `spec.storage.size: Invalid value: "0": must be greater than zero`},
		"model over 2048 bytes":    {testutil.TrainingJob("long-model", ns).Model(strings.Repeat("m", 2049)).Obj(), "spec.model: Too long: may not be more than 2048 bytes"},
		"dataset over 2048 bytes":  {testutil.TrainingJob("long-data", ns).Dataset(strings.Repeat("d", 2049)).Obj(), "spec.dataset: Too long: may not be more than 2048 bytes"},
		"257 hyperparameters":      {many, "spec.hyperparameters: Too many: 257: must have at most 256 items"},
	}
	for name, tc := range refused {
		t.Run(name, func(t *testing.T) {
			err := k8s.Create(ctx, tc.obj)
			assert.Contains(t, invalidCauses(t, err), tc.want)
		})
	}

	ok := testutil.TrainingJob("at-bounds", ns).CheckpointStorage(pvc("1")).
		Model(strings.Repeat("m", 2048)).Dataset(strings.Repeat("d", 2048)).Obj()
	require.NoError(t, k8s.Create(ctx, ok))

	// v1alpha1 has the same bound on hyperparameters.
	params := map[string]any{}
	for i := range 257 {
		params[fmt.Sprintf("p%03d", i)] = int64(i)
	}
	alpha := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "ml.example.com/v1alpha1", "kind": "TrainingJob",
		"metadata": map[string]any{"name": "alpha-many-params", "namespace": ns},
		"spec": map[string]any{"framework": "pytorch", "image": "img", "command": []any{"python"},
			"hyperparameters": params},
	}}
	assert.Contains(t, invalidCauses(t, k8s.Create(ctx, alpha)), "spec.hyperparameters: Too many: 257: must have at most 256 items")

	// A size written as a bare integer (bytes) passes the rule too.
	ints := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "ml.example.com/v1", "kind": "TrainingJob",
		"metadata": map[string]any{"name": "int-size", "namespace": ns},
		"spec":     map[string]any{"image": "img", "checkpoint": map[string]any{"storage": map[string]any{"size": int64(1073741824)}}},
	}}
	require.NoError(t, k8s.Create(ctx, ints))
}
