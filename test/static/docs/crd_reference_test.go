// Package docs checks that the generated API reference, docs/crd-reference.md,
// matches the Go types in api/.
package docs

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ml-operator/ml-operator/test/testutil"
)

// TestCRDReferenceIsFresh regenerates the API reference into a temp file with
// `make docs DOCS_OUT=<tmp>` (so the crd-ref-docs arguments live only in
// hack/mk/docs.mk) and fails on any difference from the committed file.
func TestCRDReferenceIsFresh(t *testing.T) {
	root := testutil.RepoRoot()
	if _, err := os.Stat(filepath.Join(root, "bin", "crd-ref-docs")); err != nil {
		t.Fatalf("bin/crd-ref-docs is missing: run `make crd-ref-docs` (make test does): %v", err)
	}
	out := filepath.Join(t.TempDir(), "crd-reference.md")

	cmd := exec.Command("make", "-s", "docs", "DOCS_OUT="+out)
	cmd.Dir = root
	cmd.Env = withoutMakeFlags(os.Environ())
	if log, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make docs DOCS_OUT=%s: %v\n%s", out, err, log)
	}

	want, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("reading regenerated reference: %v", err)
	}
	got, err := os.ReadFile(filepath.Join(root, "docs", "crd-reference.md"))
	if err != nil {
		t.Fatalf("reading docs/crd-reference.md (run `make docs` and commit it): %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("docs/crd-reference.md is stale: run `make docs` and commit the result\n%s", firstDifference(got, want))
	}
}

// withoutMakeFlags drops the variables an outer make (make test) exports, so
// the inner make neither inherits its flags nor its jobserver.
func withoutMakeFlags(env []string) []string {
	kept := env[:0:0]
	for _, kv := range env {
		if strings.HasPrefix(kv, "MAKEFLAGS=") || strings.HasPrefix(kv, "MFLAGS=") || strings.HasPrefix(kv, "MAKELEVEL=") {
			continue
		}
		kept = append(kept, kv)
	}
	return kept
}

// firstDifference names the first line where the committed file and the
// regenerated one differ.
func firstDifference(committed, regenerated []byte) string {
	a := strings.Split(string(committed), "\n")
	b := strings.Split(string(regenerated), "\n")
	for i := 0; i < len(a) || i < len(b); i++ {
		var la, lb string
		if i < len(a) {
			la = a[i]
		}
		if i < len(b) {
			lb = b[i]
		}
		if la != lb || i >= len(a) || i >= len(b) {
			return fmt.Sprintf("first difference at line %d:\n  committed:   %q\n  regenerated: %q", i+1, la, lb)
		}
	}
	return "files differ"
}
