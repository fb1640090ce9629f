package tools

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ml-operator/ml-operator/test/testutil"
)

// leanExceptions are the controller-runtime packages a fuzzed package may
// link: api/v1's and api/v1alpha1's scheme builder and conversion
// interfaces, which import only apimachinery.
var leanExceptions = []string{
	"sigs.k8s.io/controller-runtime/pkg/scheme",
	"sigs.k8s.io/controller-runtime/pkg/conversion",
}

var fuzzFunc = regexp.MustCompile(`(?m)^func Fuzz[A-Za-z0-9_]*\(`)

// fuzzedDirs returns the directories, relative to root, of the packages
// with a fuzz target, found by name as hack/mk/fuzz.mk finds them.
func fuzzedDirs(t *testing.T, root string) []string {
	t.Helper()
	var dirs []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "bin", "vendor", "testdata":
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil && path != root {
				return filepath.SkipDir // another module (hack/tools/*)
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if fuzzFunc.Match(b) {
			rel, err := filepath.Rel(root, filepath.Dir(path))
			if err != nil {
				return err
			}
			dirs = append(dirs, rel)
		}
		return nil
	})
	require.NoError(t, err)
	slices.Sort(dirs)
	return slices.Compact(dirs)
}

// make fuzz-smoke builds each fuzzed package's test binary with fuzzing's
// coverage instrumentation, which recompiles everything the binary links.
// A fuzz target in a package whose tests link controller-runtime's client
// or client-go (test/testutil, a controller) makes CI compile all of
// Kubernetes' client stack once more, alone at the end of the run
// (docs/decisions.md, "Fuzz targets live in packages without
// controller-runtime").
func TestFuzzedPackagesLinkNeitherControllerRuntimeNorClientGo(t *testing.T) {
	root := testutil.RepoRoot()
	dirs := fuzzedDirs(t, root)
	require.Contains(t, dirs, filepath.Join("internal", "integrations", "progress"), "fuzz targets are found")
	require.Contains(t, dirs, filepath.Join("webhooks", "rules"), "the webhooks' rules are fuzzed")
	for _, dir := range dirs {
		t.Run(dir, func(t *testing.T) {
			c := exec.Command("go", "list", "-deps", "-test", "./"+filepath.ToSlash(dir))
			c.Dir = root
			out, err := c.Output()
			if ee, ok := err.(*exec.ExitError); ok {
				t.Fatalf("go list: %v\n%s", err, ee.Stderr)
			}
			require.NoError(t, err)
			var heavy []string
			for _, pkg := range strings.Fields(string(out)) {
				if (strings.HasPrefix(pkg, "sigs.k8s.io/controller-runtime") && !slices.Contains(leanExceptions, pkg)) ||
					strings.HasPrefix(pkg, "k8s.io/client-go") {
					heavy = append(heavy, pkg)
				}
			}
			if len(heavy) > 0 {
				t.Errorf("the test binary of ./%s links %d packages of controller-runtime and client-go (%s ...): move its fuzz targets to a package that does not",
					dir, len(heavy), strings.Join(heavy[:min(5, len(heavy))], ", "))
			}
		})
	}
}
