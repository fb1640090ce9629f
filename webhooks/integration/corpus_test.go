package integration_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ml-operator/ml-operator/test/testutil"
)

// Every manifest under test/testdata/valid is accepted, document by
// document, under fieldValidation=Strict (kubectl's default), with no
// warning but v1alpha1's deprecation: the corpus has no unknown fields and touches every bound from
// the inside.
func TestValidManifestsAreAccepted(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join(testutil.RepoRoot(), "test", "testdata", "valid", "*.yaml"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(paths), 20)
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			objs, warned := applyStrictly(t, path)
			for _, msg := range warned {
				assert.Equal(t, deprecatedV1alpha1, msg, "the only warning is v1alpha1's deprecation")
			}
			last := objs[len(objs)-1]
			got := &unstructured.Unstructured{}
			got.SetGroupVersionKind(last.GroupVersionKind())
			require.NoError(t, k8s.Get(context.Background(), client.ObjectKeyFromObject(last), got))
			assert.Equal(t, last.GetName(), got.GetName())
		})
	}
}

// Decision (docs/decisions.md): unknown fields are refused only under
// fieldValidation=Strict, which kubectl sends by default. Without it (the
// server's default is Warn; controller-runtime's client sends nothing) the
// API server prunes them from the stored object and answers with a warning
// naming the field, as for every structural CRD. The invalid corpus
// therefore marks its unknown-field manifests "# field-validation: Strict".
func TestUnknownFieldsArePrunedWithAWarningWithoutStrict(t *testing.T) {
	ctx := context.Background()
	objs, err := testutil.ReadManifests(filepath.Join(testutil.RepoRoot(), "test", "testdata", "invalid", "trainingjob-unknown-field.yaml"))
	require.NoError(t, err)
	require.Len(t, objs, 1)
	o := objs[0]
	o.SetNamespace(testutil.Namespace(t, k8s))
	w := &warnings{}
	require.NoError(t, applyWith(ctx, clientWithWarnings(t, w), o, ""))
	assert.Equal(t, []string{`unknown field "spec.numWorker"`}, w.list())

	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(o.GroupVersionKind())
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(o), got))
	_, found, err := unstructured.NestedFieldNoCopy(got.Object, "spec", "numWorker")
	require.NoError(t, err)
	assert.False(t, found, "the unknown field is pruned")
	n, _, err := unstructured.NestedInt64(got.Object, "spec", "numWorkers")
	require.NoError(t, err)
	assert.Equal(t, int64(1), n, "and the job keeps the default size")
}

// deprecatedV1alpha1 is the warning every v1alpha1 request gets.
const deprecatedV1alpha1 = "ml.example.com/v1alpha1 TrainingJob is deprecated; use ml.example.com/v1"

// applyWith creates o through c, or replaces the object of that name, with
// the fieldValidation directive given ("" for the server's default).
func applyWith(ctx context.Context, c client.Client, o *unstructured.Unstructured, fieldValidation string) error {
	var create []client.CreateOption
	var update []client.UpdateOption
	if fieldValidation != "" {
		create = append(create, client.FieldValidation(fieldValidation))
		update = append(update, client.FieldValidation(fieldValidation))
	}
	cur := &unstructured.Unstructured{}
	cur.SetGroupVersionKind(o.GroupVersionKind())
	if err := c.Get(ctx, client.ObjectKeyFromObject(o), cur); err != nil {
		return c.Create(ctx, o.DeepCopy(), create...)
	}
	o = o.DeepCopy()
	o.SetResourceVersion(cur.GetResourceVersion())
	return c.Update(ctx, o, update...)
}
