// Package generated checks that the files controller-gen writes (CRDs, RBAC,
// webhook configurations, DeepCopy) match their Go sources.
package generated

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ml-operator/ml-operator/test/testutil"
)

// generatedDirs are compared after regeneration.
var generatedDirs = []string{"api", "config/crd/bases", "config/rbac", "config/webhook"}

// TestGeneratedFilesAreFresh regenerates everything in a copy of the tree with
// `make manifests generate` and fails on any difference from the committed files.
func TestGeneratedFilesAreFresh(t *testing.T) {
	root := testutil.RepoRoot()
	if _, err := os.Stat(filepath.Join(root, "bin", "controller-gen")); err != nil {
		t.Fatalf("bin/controller-gen is missing: run `make controller-gen` (make test does): %v", err)
	}
	work := t.TempDir()
	copyTree(t, root, work)

	cmd := exec.Command("make", "-s", "manifests", "generate", "LOCALBIN="+filepath.Join(root, "bin"))
	cmd.Dir = work
	out, err := cmd.CombinedOutput()
	require.NoErrorf(t, err, "make manifests generate:\n%s", out)

	for _, dir := range generatedDirs {
		want := readTree(t, filepath.Join(work, dir))
		got := readTree(t, filepath.Join(root, dir))
		for name, content := range want {
			if !bytes.Equal(got[name], content) {
				t.Errorf("%s/%s is stale: run `make manifests generate` and commit the result", dir, name)
			}
		}
		for name := range got {
			if _, ok := want[name]; !ok && isGenerated(name) {
				t.Errorf("%s/%s is no longer generated: delete it", dir, name)
			}
		}
	}
}

func isGenerated(name string) bool {
	return strings.HasPrefix(filepath.Base(name), "zz_generated") || strings.HasSuffix(name, ".yaml") && !strings.HasSuffix(name, "kustomization.yaml")
}

func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	skip := map[string]bool{".git": true, "bin": true, "tmp": true, "bench": true, "catalog": true, "bundle": true}
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if d.IsDir() {
			if skip[rel] {
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
	})
	require.NoError(t, err)
}

func readTree(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	if _, err := os.Stat(dir); os.IsNotExist(err) {
		return files
	}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !isGenerated(path) {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		files[rel] = data
		return nil
	})
	require.NoError(t, err)
	return files
}
