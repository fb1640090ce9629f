package integration_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/ml-operator/ml-operator/test/testutil"
)

// Every manifest in config/samples (the kustomization's and the integration
// pages' examples) passes the admission webhooks and the schema under
// kubectl's strict field validation, with no warning.
func TestSamplesAreAdmitted(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join(testutil.RepoRoot(), "config", "samples", "ml_*.yaml"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(paths), 10)
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			_, warned := applyStrictly(t, path)
			assert.Empty(t, warned, "warnings")
		})
	}
}

// applyStrictly applies every document of the manifest file at path, in
// order, into a fresh namespace under fieldValidation=Strict (kubectl's
// default), requiring each to be accepted. It returns the objects applied
// and the warnings the API server answered with.
func applyStrictly(t *testing.T, path string) ([]*unstructured.Unstructured, []string) {
	t.Helper()
	objs, err := testutil.ReadManifests(path)
	require.NoError(t, err)
	require.NotEmpty(t, objs)
	w := &warnings{}
	c := clientWithWarnings(t, w)
	ns := testutil.Namespace(t, k8s)
	for i, o := range objs {
		o.SetNamespace(ns)
		require.NoError(t, applyWith(context.Background(), c, o, "Strict"), "document %d", i)
	}
	return objs, w.list()
}
