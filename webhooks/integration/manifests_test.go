package integration_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	mlv1alpha1 "github.com/ml-operator/ml-operator/api/v1alpha1"
	"github.com/ml-operator/ml-operator/test/testutil"
)

// Every manifest under test/testdata/invalid is refused with the full text
// its "# expect:" lines give (each is one cause, naming the field path).
func TestInvalidManifestsAreRefused(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join(testutil.RepoRoot(), "test", "testdata", "invalid", "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, paths)
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			ctx := context.Background()
			data, err := os.ReadFile(path)
			require.NoError(t, err)
			var causes []string
			var fullError, refusedBy, fieldValidation string
			for _, line := range strings.Split(string(data), "\n") {
				if c, ok := strings.CutPrefix(line, "# expect: "); ok {
					causes = append(causes, c)
				}
				if v, ok := strings.CutPrefix(line, "# error: "); ok {
					fullError = v
				}
				if v, ok := strings.CutPrefix(line, "# refused-by: "); ok {
					refusedBy = v
				}
				if v, ok := strings.CutPrefix(line, "# field-validation: "); ok {
					fieldValidation = v
				}
			}
			require.True(t, len(causes) > 0 || fullError != "", "%s has no # expect: or # error: line", path)
			objs, err := testutil.DecodeManifests(data)
			require.NoError(t, err)
			ns := testutil.Namespace(t, k8s)
			for _, o := range objs {
				o.SetNamespace(ns)
			}
			for _, o := range objs[:len(objs)-1] {
				require.NoError(t, apply(ctx, o), "the documents before the last are valid")
			}
			last := objs[len(objs)-1]
			err = apply(ctx, last, fieldValidation)
			switch {
			case fullError != "":
				// Refused before any rule ran (wrong type, unknown field):
				// a client error whose text names the field.
				require.Error(t, err)
				require.Equal(t, fullError, err.Error())
				var status apierrors.APIStatus
				require.ErrorAs(t, err, &status)
				code := status.Status().Code
				require.Truef(t, code >= 400 && code < 500, "want a 4xx answer, got %d", code)
			case refusedBy == "schema":
				// The CRD's OpenAPI schema or CEL rules, after the webhooks.
				requireInvalid(t, err, schemaDenial(last.GetKind(), last.GetName(), causes...))
			default:
				webhook := "m" + strings.ToLower(last.GetKind()) + ".ml.example.com"
				requireInvalid(t, err, denial(webhook, last.GetKind(), last.GetName(), causes...))
			}
		})
	}
}

// apply creates o, or replaces the object of that name, with the
// fieldValidation directive given ("" leaves the server's default, Warn).
func apply(ctx context.Context, o *unstructured.Unstructured, fieldValidation ...string) error {
	var fv []string
	for _, v := range fieldValidation {
		if v != "" {
			fv = append(fv, v)
		}
	}
	cur := &unstructured.Unstructured{}
	cur.SetGroupVersionKind(o.GroupVersionKind())
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(o), cur); err != nil {
		var opts []client.CreateOption
		for _, v := range fv {
			opts = append(opts, client.FieldValidation(v))
		}
		return k8s.Create(ctx, o.DeepCopy(), opts...)
	}
	o = o.DeepCopy()
	o.SetResourceVersion(cur.GetResourceVersion())
	var opts []client.UpdateOption
	for _, v := range fv {
		opts = append(opts, client.FieldValidation(v))
	}
	return k8s.Update(ctx, o, opts...)
}

// schemaDenial is the full text of the API server's own refusal (CRD schema
// and CEL rules) with these causes.
func schemaDenial(kind, name string, causes ...string) string {
	body := causes[0]
	if len(causes) > 1 {
		body = "[" + strings.Join(causes, ", ") + "]"
	}
	return fmt.Sprintf("%s.ml.example.com %q is invalid: %s", kind, name, body)
}

// Every seed example applies unchanged, and reads back in both TrainingJob
// versions with what the manifest says.
func TestSeedExamplesApplyAndReadBackInBothVersions(t *testing.T) {
	ctx := context.Background()
	paths, err := testutil.SeedExamples()
	require.NoError(t, err)
	require.Len(t, paths, 4)
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			objs, err := testutil.ReadManifests(path)
			require.NoError(t, err)
			require.Len(t, objs, 1)
			o := objs[0]
			require.NoError(t, testutil.EnsureNamespace(ctx, k8s, o.GetNamespace()))
			require.NoError(t, k8s.Create(ctx, o.DeepCopy()))
			key := client.ObjectKeyFromObject(o)

			switch o.GetKind() {
			case "ModelDeployment":
				md := &mlv1.ModelDeployment{}
				require.NoError(t, k8s.Get(ctx, key, md))
				assert.Equal(t, ptr.To[int32](100), md.Spec.Versions[0].Weight)
				assert.Equal(t, ptr.To[int32](10), md.Spec.Scaling.MaxReplicas)
				assert.Equal(t, ptr.To[int32](8080), md.Spec.HealthCheck.Port, "the health check defaults to spec.port")
				assert.Equal(t, int32(5), md.Spec.HealthCheck.TimeoutSeconds)
				assert.Equal(t, mlv1.RouterAuto, md.Spec.Traffic.Router)
			case "TrainingJob":
				v1 := &mlv1.TrainingJob{}
				require.NoError(t, k8s.Get(ctx, key, v1))
				alpha := &mlv1alpha1.TrainingJob{}
				require.NoError(t, k8s.Get(ctx, key, alpha))
				assert.NotContains(t, v1.Annotations, mlv1.AnnotationV1Spec)
				checkSeedJob(t, o, v1, alpha)
			default:
				t.Fatalf("unexpected kind %s", o.GetKind())
			}
		})
	}
}

func checkSeedJob(t *testing.T, manifest *unstructured.Unstructured, v1 *mlv1.TrainingJob, alpha *mlv1alpha1.TrainingJob) {
	t.Helper()
	// The v1alpha1 form shows the v1 object's fields...
	assert.Equal(t, v1.Spec.NumWorkers, alpha.Spec.Workers)
	assert.Equal(t, *v1.Spec.GPUsPerWorker, alpha.Spec.GPUPerWorker)
	assert.Equal(t, v1.Spec.Image, alpha.Spec.Image)
	assert.Equal(t, v1.Spec.Checkpoint.Path, alpha.Spec.CheckpointDir)
	assert.True(t, equality.Semantic.DeepEqual(v1.Spec.Hyperparameters, alpha.Spec.Hyperparameters))

	switch manifest.GetAPIVersion() {
	case mlv1.GroupVersion.String():
		want := &mlv1.TrainingJob{}
		require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(manifest.Object, want))
		assert.Equal(t, images["pytorch"], v1.Spec.Image, "a job without an image gets the framework's default")
		assert.Equal(t, want.Spec.NumWorkers, v1.Spec.NumWorkers)
		assert.Equal(t, want.Spec.GPUsPerWorker, v1.Spec.GPUsPerWorker)
		assert.Equal(t, ptr.To[int32](1), v1.Spec.NProcPerNode)
		assert.Empty(t, v1.Spec.Checkpoint.Storage.AccessModes, "chosen with the claim, from its StorageClass")
		assert.Equal(t, "0.001", string(v1.Spec.Hyperparameters["learningRate"].Raw))
	case mlv1alpha1.GroupVersion.String():
		// ...and a v1alpha1 manifest reads back as itself, plus the
		// v1alpha1 defaults, with the v1 defaults kept aside in annotations.
		want := &mlv1alpha1.TrainingJob{}
		require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(manifest.Object, want))
		if want.Spec.CheckpointDir == "" {
			want.Spec.CheckpointDir = "/checkpoints"
		}
		want.Spec.CheckpointInterval = 1
		want.Spec.RestartPolicy = "OnFailure"
		if !equality.Semantic.DeepEqual(want.Spec, alpha.Spec) {
			t.Errorf("v1alpha1 spec read back differs (-manifest +server):\n%s", cmp.Diff(want.Spec, alpha.Spec))
		}
		assert.Contains(t, alpha.Annotations, mlv1.AnnotationV1Spec)

		assert.Equal(t, want.Spec.Workers, v1.Spec.NumWorkers)
		assert.Equal(t, ptr.To(want.Spec.GPUPerWorker), v1.Spec.GPUsPerWorker)
		assert.Equal(t, want.Spec.Command, v1.Spec.Command)
		assert.Equal(t, want.Spec.CheckpointDir, v1.Spec.Checkpoint.Path)
		if want.Spec.DataVolume != nil {
			assert.Equal(t, &mlv1.DataVolumeSpec{ClaimName: want.Spec.DataVolume.ClaimName, MountPath: "/data"}, v1.Spec.DataVolume)
		}
		wantBackend := mlv1.BackendGloo
		if want.Spec.GPUPerWorker > 0 {
			wantBackend = mlv1.BackendNCCL
		}
		assert.Equal(t, wantBackend, v1.Spec.Networking.Backend, "v1alpha1 jobs are defaulted in v1 terms too")
	}
}
