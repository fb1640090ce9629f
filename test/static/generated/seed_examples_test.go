package generated

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"github.com/ml-operator/ml-operator/test/testutil"
)

// usersCopies are the SHA-256 sums of the users' manifests, taken from
// ../shared/seed-examples on 2026-11-25: the copies are checked against them
// even where ../shared is not beside the repository.
var usersCopies = map[string]string{
	"modeldeployment-v1-sentiment-analysis.yaml": "557294742fe6ff904ee1ef33a8343e5e5f9996796dc824a1741065ed2e70b69f",
	"trainingjob-v1-test-job.yaml":               "2dc21c7b826cdf4b2e29f83d57148655141004b899549dafcf31c07a418822fc",
	"trainingjob-v1alpha1-mnist-training.yaml":   "bc71394a6331f02c502d5b3e60bc0f1228e4e5c9638e238fce58860894423925",
	"trainingjob-v1alpha1-pytorch-mnist.yaml":    "11863487a2a8e309c5ebec711a3f1f4cab17b3df1d48a089bea7a1fd91a197c3",
}

func TestSeedExamplesMatchTheRecordedSums(t *testing.T) {
	ours := filepath.Join(testutil.RepoRoot(), "test", "testdata", "seed-examples")
	for name, want := range usersCopies {
		got, err := os.ReadFile(filepath.Join(ours, name))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		sum := sha256.Sum256(got)
		if hex.EncodeToString(sum[:]) != want {
			t.Errorf("test/testdata/seed-examples/%s is not the users' copy (SHA-256 %x, want %s)", name, sum, want)
		}
	}
}

// TestSeedExamplesAreTheUsersCopies keeps test/testdata/seed-examples, which
// the envtest, webhook and e2e suites apply, byte for byte equal to the
// manifests our first users have (../shared/seed-examples beside the
// repository, where the workplace and CI put it).
func TestSeedExamplesAreTheUsersCopies(t *testing.T) {
	root := testutil.RepoRoot()
	shared := filepath.Join(root, "..", "shared", "seed-examples")
	theirs, err := os.ReadDir(shared)
	if os.IsNotExist(err) {
		// Not beside this checkout: TestSeedExamplesMatchTheRecordedSums
		// checks the copies against the sums taken from it.
		t.Logf("%s is not beside the repository; the recorded sums are checked instead", shared)
		return
	}
	if err != nil {
		t.Fatal(err)
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
		sum := sha256.Sum256(want)
		if usersCopies[e.Name()] != hex.EncodeToString(sum[:]) {
			t.Errorf("the users' %s changed: record its SHA-256 %x in usersCopies", e.Name(), sum)
		}
	}
	if n == 0 {
		t.Fatalf("%s has no manifests", shared)
	}
}
