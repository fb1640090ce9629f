package generated

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/ml-operator/ml-operator/test/testutil"
)

// TestSeedExamplesAreTheUsersCopies keeps test/testdata/seed-examples, which
// the envtest, webhook and e2e suites apply, byte for byte equal to the
// manifests our first users have (../shared/seed-examples beside the
// repository, where the workplace and CI put it).
func TestSeedExamplesAreTheUsersCopies(t *testing.T) {
	root := testutil.RepoRoot()
	shared := filepath.Join(root, "..", "shared", "seed-examples")
	theirs, err := os.ReadDir(shared)
	if err != nil {
		t.Skipf("no users' copies beside the repository (%v): nothing to compare", err)
	}
	ours := filepath.Join(root, "test", "testdata", "seed-examples")
	n := 0
	for _, e := range theirs {
		if e.IsDir() || filepath.Ext(e.Name()) != ".yaml" {
			continue
		}
		n++
		want, err := os.ReadFile(filepath.Join(shared, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(ours, e.Name()))
		if err != nil {
			t.Errorf("%s is not in test/testdata/seed-examples: %v", e.Name(), err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("test/testdata/seed-examples/%s differs from the users' copy in %s", e.Name(), shared)
		}
	}
	if n == 0 {
		t.Fatalf("%s has no manifests", shared)
	}
}
