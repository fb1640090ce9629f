package v1alpha1_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	mlv1alpha1 "github.com/ml-operator/ml-operator/api/v1alpha1"
)

// at reads the JSON value of obj at a dotted path.
func at(t *testing.T, obj any, path string) (any, bool) {
	t.Helper()
	raw, err := json.Marshal(obj)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(raw, &m))
	v, found, err := unstructured.NestedFieldNoCopy(m, strings.Split(path, ".")...)
	require.NoError(t, err)
	return v, found
}

// set writes value at a dotted path of obj, through JSON.
func set[T any](t *testing.T, obj *T, path string, value any) {
	t.Helper()
	raw, err := json.Marshal(obj)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(raw, &m))
	require.NoError(t, unstructured.SetNestedField(m, value, strings.Split(path, ".")...))
	raw, err = json.Marshal(m)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, obj))
}

// Each entry of the exported rename table is what the conversion does: a
// value written at the v1alpha1 path arrives at the v1 path, and back.
func TestSpecFieldRenamesAreTheConversions(t *testing.T) {
	renames := mlv1alpha1.SpecFieldRenames()
	require.Len(t, renames, 4)
	for i, r := range renames {
		value := int64(7 + i) // every renamed field holds a number or a path
		var want any = float64(value)
		if strings.HasSuffix(r.V1, ".path") {
			want = "/renamed"
		}
		wrote := want
		if f, ok := want.(float64); ok {
			wrote = int64(f)
		}

		alpha := &mlv1alpha1.TrainingJob{}
		set(t, alpha, r.V1Alpha1, wrote)
		hub := &mlv1.TrainingJob{}
		require.NoError(t, alpha.ConvertTo(hub))
		got, found := at(t, hub, r.V1)
		assert.True(t, found, "%s -> %s", r.V1Alpha1, r.V1)
		assert.Equal(t, want, got, "%s -> %s", r.V1Alpha1, r.V1)

		hub = &mlv1.TrainingJob{}
		set(t, hub, r.V1, wrote)
		alpha = &mlv1alpha1.TrainingJob{}
		require.NoError(t, alpha.ConvertFrom(hub))
		got, found = at(t, alpha, r.V1Alpha1)
		assert.True(t, found, "%s -> %s", r.V1, r.V1Alpha1)
		assert.Equal(t, want, got, "%s -> %s", r.V1, r.V1Alpha1)
	}
}
