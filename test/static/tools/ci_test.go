package tools

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ml-operator/ml-operator/test/testutil"
	"github.com/ml-operator/ml-operator/test/torch/launcher"
)

// .ci/run installs python3-torch when the binaries the torch tests look for
// (launcher.Torchrun, and launcher.Python3 with torch and
// prometheus_client) are missing, and installs the packages
// testutil.NeedTool names; it runs with CI set, so a torch test that still
// finds nothing fails instead of skipping; and its `make test` is built
// with the race detector (one pass: race and coverage).
func TestCIInstallsWhatTheTorchTestsLookFor(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(testutil.RepoRoot(), ".ci", "run"))
	require.NoError(t, err)
	ci := string(b)
	assert.Contains(t, ci, `export CI="${CI:-true}"`)
	assert.Contains(t, ci, "[ ! -x "+launcher.Torchrun+" ]")
	assert.Contains(t, ci, launcher.Python3+" -c 'import torch, prometheus_client'")
	pkgs := strings.Fields(strings.TrimPrefix(testutil.TorchInstall, "apt-get install "))
	assert.Contains(t, ci, "apt-get install -y -qq "+strings.Join(pkgs, " "))
	assert.Contains(t, ci, "phase A test &&")

	mk, err := os.ReadFile(filepath.Join(testutil.RepoRoot(), "Makefile"))
	require.NoError(t, err)
	makefile := string(mk)
	assert.Contains(t, makefile, "\nRACE ?= -race\n", "make test races by default")
	assert.Contains(t, makefile, "go test $(RACE) ./... -json -coverpkg=", "make test's go test uses $(RACE)")
}
