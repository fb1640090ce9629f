package packaging

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ml-operator/ml-operator/test/testutil"
)

// The 0.1.0 manager that `make e2e-olm` upgrades from is built from this
// archive of the commit whose bundle the catalog holds as 0.1.0, made with
//
//	git archive --format=tar.gz f413c8e -- go.mod go.sum api cmd controllers webhooks
//
// so the suite needs no git history (a shallow clone has none).
const (
	release010Commit  = "f413c8e024f78f52261ad672c97df52954e7bc3e"
	release010Archive = "test/e2eolm/testdata/ml-operator-0.1.0-src.tar.gz"
	release010Paths   = "go.mod go.sum api cmd controllers webhooks"
	// release010Files is sha256 over the archive's "name sha256(content)"
	// lines, sorted: its files, whatever gzip or tar headers made it.
	release010Files = "8fd351444817da1495c9ee919c32e4f23625bd3f4a3a6c1212209bdeaf769b51"
)

// tarFiles lists a tar stream's regular files as "name sha256" lines.
func tarFiles(t *testing.T, r io.Reader) []string {
	t.Helper()
	var files []string
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		if h.Typeflag != tar.TypeReg {
			continue
		}
		sum := sha256.New()
		_, err = io.Copy(sum, tr)
		require.NoError(t, err)
		files = append(files, fmt.Sprintf("%s %x", h.Name, sum.Sum(nil)))
	}
	sort.Strings(files)
	return files
}

func TestRelease010SourceIsItsCommits(t *testing.T) {
	f, err := os.Open(filepath.Join(testutil.RepoRoot(), release010Archive))
	require.NoError(t, err)
	defer f.Close()
	gz, err := gzip.NewReader(f)
	require.NoError(t, err)
	files := tarFiles(t, gz)
	require.NotEmpty(t, files)
	names := map[string]bool{}
	for _, f := range files {
		name, _, _ := strings.Cut(f, " ")
		names[name] = true
	}
	for _, want := range []string{"go.mod", "go.sum", "cmd/main.go"} {
		assert.True(t, names[want], "the archive has no %s", want)
	}
	assert.Equal(t, release010Files, fmt.Sprintf("%x", sha256.Sum256([]byte(strings.Join(files, "\n")))),
		"%s changed: it must stay the source of the 0.1.0 release (%s)", release010Archive, release010Commit)

	// Where the clone has the commit, the archive is what git makes of it.
	root := testutil.RepoRoot()
	if exec.Command("git", "-C", root, "cat-file", "-e", release010Commit+"^{commit}").Run() == nil {
		out, err := exec.Command("git", append([]string{"-C", root, "archive", "--format=tar", release010Commit, "--"}, strings.Fields(release010Paths)...)...).Output()
		require.NoError(t, err)
		assert.Equal(t, tarFiles(t, bytes.NewReader(out)), files, "%s is not git archive of %s", release010Archive, release010Commit)
	}
}
