//go:build e2e

package e2e

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/test/testutil"
)

// applySeedExample applies one of the users' manifests with kubectl, unchanged,
// after creating its namespace and the data PVC it names (the user has them),
// and returns the objects it holds.
func applySeedExample(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := testutil.ReadManifests(path)
	require.NoError(t, err)
	ctx := context.Background()
	for _, o := range objs {
		require.NoError(t, testutil.EnsureNamespace(ctx, env.client, o.GetNamespace()))
		waitDefaultServiceAccount(t, o.GetNamespace())
		claim, _, _ := unstructured.NestedString(o.Object, "spec", "dataVolume", "claimName")
		if claim != "" {
			pvc := &corev1.PersistentVolumeClaim{
				ObjectMeta: metav1.ObjectMeta{Name: claim, Namespace: o.GetNamespace()},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
					Resources: corev1.VolumeResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")},
					},
				},
			}
			if err := env.client.Create(ctx, pvc); err != nil {
				require.True(t, apierrors.IsAlreadyExists(err), err)
			}
		}
	}
	kubectl(t, "apply", "-f", path)
	t.Cleanup(func() { _, _ = kubectlErr("delete", "-f", path, "--wait=false") })
	return objs
}

func seedExample(name string) string {
	return filepath.Join(testutil.SeedExamplesDir(), name)
}

// TestSeedExamples applies every manifest our first users already have and
// follows each one through the operator.
func TestSeedExamples(t *testing.T) {
	t.Parallel()
	paths, err := testutil.SeedExamples()
	require.NoError(t, err)
	require.NotEmpty(t, paths)
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			t.Parallel()
			for _, o := range applySeedExample(t, path) {
				followSeedObject(t, o)
			}
		})
	}
}

// followSeedObject checks that a seed object does what its comments say: a
// TrainingJob's ranks run and complete (the stages finish a worker 30 s
// after it starts), a ModelDeployment serves its minimum replicas.
func followSeedObject(t *testing.T, o *unstructured.Unstructured) {
	t.Helper()
	switch o.GetKind() {
	case "TrainingJob":
		tj := &mlv1.TrainingJob{}
		tj.Name, tj.Namespace = o.GetName(), o.GetNamespace()
		waitState(t, tj, mlv1.StateRunning)
		done := waitState(t, tj, mlv1.StateCompleted)
		assert.EqualValues(t, 0, done.Status.Restarts, describeJob(done))
		if o.GetAPIVersion() == "ml.example.com/v1alpha1" && env.conversion {
			// Read back as the user wrote it, through the conversion webhook.
			phase := kubectl(t, "get", "trainingjobs.v1alpha1.ml.example.com", o.GetName(), "-n", o.GetNamespace(),
				"-o", "jsonpath={.status.phase}")
			assert.Equal(t, "Succeeded", phase)
		}
	case "ModelDeployment":
		// YAML numbers decode as int64 or float64.
		minReplicas := int64(1)
		switch v, _, _ := unstructured.NestedFieldNoCopy(o.Object, "spec", "scaling", "minReplicas"); n := v.(type) {
		case int64:
			minReplicas = n
		case float64:
			minReplicas = int64(n)
		}
		versions, _, _ := unstructured.NestedSlice(o.Object, "spec", "versions")
		var names []string
		for _, v := range versions {
			names = append(names, v.(map[string]any)["name"].(string))
		}
		waitModelServing(t, o.GetNamespace(), o.GetName(), names, int32(minReplicas))
	default:
		t.Fatalf("no expectations for a %s", o.GetKind())
	}
}
