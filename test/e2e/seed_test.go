//go:build e2e

package e2e

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

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
	paths, err := testutil.SeedExamples()
	require.NoError(t, err)
	require.NotEmpty(t, paths)
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			t.Parallel()
			for _, o := range applySeedExample(t, path) {
				kubectl(t, "get", "-n", o.GetNamespace(), o.GetObjectKind().GroupVersionKind().GroupKind().String(), o.GetName())
			}
		})
	}
}
