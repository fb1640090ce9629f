package testutil

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ml-operator/ml-operator/internal/manifests"
)

// SeedExamplesDir is the copy of ../shared/seed-examples: the manifests our
// first users already have, byte for byte.
func SeedExamplesDir() string {
	return filepath.Join(RepoRoot(), "test", "testdata", "seed-examples")
}

// SeedExamples returns the paths of every seed-example manifest.
func SeedExamples() ([]string, error) {
	paths, err := filepath.Glob(filepath.Join(SeedExamplesDir(), "*.yaml"))
	sort.Strings(paths)
	return paths, err
}

// ReadManifests decodes every YAML document in a file into unstructured
// objects (internal/manifests).
func ReadManifests(path string) ([]*unstructured.Unstructured, error) {
	return manifests.Read(path)
}

// DecodeManifests decodes a multi-document YAML stream.
func DecodeManifests(data []byte) ([]*unstructured.Unstructured, error) {
	return manifests.Decode(data)
}

// EnsureNamespace creates a namespace if it does not exist yet.
func EnsureNamespace(ctx context.Context, c client.Client, name string) error {
	if name == "" {
		return nil
	}
	err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", name, err)
	}
	return nil
}
