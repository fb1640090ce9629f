package docs

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ml-operator/ml-operator/test/testutil"
)

const (
	rulesBegin = "<!-- BEGIN GENERATED: rules"
	rulesEnd   = "<!-- END GENERATED: rules -->"
)

// TestAdmissionRulesTableIsFresh regenerates docs/admission.md with
// `make docs DOCS_OUT=<tmp>/crd-reference.md` (which writes the admission
// document next to it, so the wiring in hack/mk/docs.mk is what is tested)
// and fails on any difference from the committed file: a corpus manifest
// added, removed or changed in test/testdata/invalid without `make docs`.
func TestAdmissionRulesTableIsFresh(t *testing.T) {
	root := testutil.RepoRoot()
	if _, err := os.Stat(filepath.Join(root, "bin", "crd-ref-docs")); err != nil {
		t.Fatalf("bin/crd-ref-docs is missing: run `make crd-ref-docs` (make test does): %v", err)
	}
	dir := t.TempDir()
	cmd := exec.Command("make", "-s", "docs", "DOCS_OUT="+filepath.Join(dir, "crd-reference.md"))
	cmd.Dir = root
	cmd.Env = withoutMakeFlags(os.Environ())
	if log, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make docs DOCS_OUT=%s: %v\n%s", dir, err, log)
	}
	want, err := os.ReadFile(filepath.Join(dir, "admission.md"))
	if err != nil {
		t.Fatalf("make docs wrote no admission.md next to DOCS_OUT: %v", err)
	}
	got, err := os.ReadFile(filepath.Join(root, "docs", "admission.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("the rules table in docs/admission.md is stale: run `make docs` and commit the result\n%s", firstDifference(got, want))
	}
}

// TestAdmissionRulesTableHasEveryCorpusManifest reads the committed table:
// one row per manifest in test/testdata/invalid, each linking its file, so
// a generator that dropped manifests would not go unnoticed.
func TestAdmissionRulesTableHasEveryCorpusManifest(t *testing.T) {
	root := testutil.RepoRoot()
	doc, err := os.ReadFile(filepath.Join(root, "docs", "admission.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	begin, end := strings.Index(text, rulesBegin), strings.Index(text, rulesEnd)
	if begin < 0 || end < begin {
		t.Fatalf("docs/admission.md has no %q ... %q section", rulesBegin, rulesEnd)
	}
	rows := map[string]int{}
	for _, line := range strings.Split(text[begin:end], "\n") {
		if !strings.HasPrefix(line, "| ") || strings.HasPrefix(line, "| kind/version") {
			continue
		}
		cells := strings.Split(strings.TrimSuffix(line, " |"), " | ")
		link := cells[len(cells)-1]
		i := strings.Index(link, "](../test/testdata/invalid/")
		if i < 0 {
			t.Errorf("row does not end with a link to its corpus file: %s", line)
			continue
		}
		rows[strings.TrimSuffix(link[i+len("](../test/testdata/invalid/"):], ")")]++
	}
	paths, err := filepath.Glob(filepath.Join(root, "test", "testdata", "invalid", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) == 0 {
		t.Fatal("no corpus manifests")
	}
	for _, p := range paths {
		if n := rows[filepath.Base(p)]; n != 1 {
			t.Errorf("%s has %d rows in the rules table of docs/admission.md, want 1 (run `make docs`)", filepath.Base(p), n)
		}
		delete(rows, filepath.Base(p))
	}
	for f := range rows {
		t.Errorf("the rules table of docs/admission.md lists %s, which is not in test/testdata/invalid (run `make docs`)", f)
	}
}
