package testutil

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
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

// ReadManifests decodes every YAML document in a file into unstructured objects.
func ReadManifests(path string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return DecodeManifests(data)
}

// DecodeManifests decodes a multi-document YAML stream.
func DecodeManifests(data []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var objs []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, err
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
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
