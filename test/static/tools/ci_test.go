package tools

import (
	"fmt"
	"os"
	"os/exec"
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
	assert.Contains(t, ci, "phase A test || rc=1", "a stream runs every phase even when one fails")
	assert.Contains(t, ci, `hack/ci-digest.sh "$logs"/*.log`, "a failed run ends with why it failed")

	mk, err := os.ReadFile(filepath.Join(testutil.RepoRoot(), "Makefile"))
	require.NoError(t, err)
	makefile := string(mk)
	assert.Contains(t, makefile, "\nRACE ?= -race\n", "make test races by default")
	assert.Contains(t, makefile, "go test $(RACE) -vet=off -ldflags=-w $(RACE_PKGS) -json -coverpkg=", "make test's go test uses $(RACE)")
	assert.Contains(t, makefile, "RACE_PKGS = $(filter-out $(shell go list $(NORACE_PKGS)),$(shell go list ./...))",
		"the race pass runs every package but the few NORACE_PKGS names")
}

// hack/ci-digest.sh, which .ci/run prints last when a stream failed, keeps
// why a test failed (testify's block, cut to its first lines and to 400
// characters a line; go test's FAIL lines; a phase's non-zero end) and
// drops the rest: the tail CI keeps of a long output must show the cause.
func TestCIDigestKeepsWhyATestFailed(t *testing.T) {
	var log strings.Builder
	for i := range 500 {
		fmt.Fprintf(&log, "[B] I1126 10:44:21.413313 controller.go:325] noise %d\n", i)
	}
	log.WriteString(`[B]     training_test.go:243: 
[B]         	Error Trace:	/w/test/e2ereal/training_test.go:243
[B]         	            				/w/test/e2ereal/operator_test.go:63
[B]         	Error:      	Received unexpected error:
[B]         	            	not within 14m0s
[B]         	Test:       	TestOperator/Workloads/TwoRankPyTorchJobResumesAfterARankIsKilled
[B]         	Messages:   	state "Running", conditions ` + strings.Repeat("x", 1000) + `
[B]         	            	pod ddp-worker-0: Running
[B]         	            	  the message's second line
[B]         	            	  its third line, past the block's first eight
`)
	for i := range 300 {
		fmt.Fprintf(&log, "[B] diagnostics %d\n", i)
	}
	log.WriteString(`[B] --- FAIL: TestOperator (630.70s)
[B]         --- PASS: TestOperator/Workloads/RestrictedNamespace (18.75s)
[B]         --- FAIL: TestOperator/Workloads/TwoRankPyTorchJobResumesAfterARankIsKilled (361.82s)
[B] FAIL	github.com/ml-operator/ml-operator/test/e2ereal	723.223s
[B] make: *** [hack/mk/realnode.mk:58: e2e-real] Error 1
[B] == make e2e-real took 879s (rc=2; CPU user, system: 21m3.120s 4m1.020s)
[B] == make e2e took 300s (rc=0; CPU user, system: 5m0.400s 1m2.330s)
`)
	path := filepath.Join(t.TempDir(), "B.log")
	require.NoError(t, os.WriteFile(path, []byte(log.String()), 0o644))
	out, err := exec.Command(filepath.Join(testutil.RepoRoot(), "hack", "ci-digest.sh"), path).CombinedOutput()
	require.NoError(t, err, "%s", out)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	assert.Equal(t, []string{
		"[B]         \tError Trace:\t/w/test/e2ereal/training_test.go:243",
		"[B]         \t            \t\t\t\t/w/test/e2ereal/operator_test.go:63",
		"[B]         \tError:      \tReceived unexpected error:",
		"[B]         \t            \tnot within 14m0s",
		"[B]         \tTest:       \tTestOperator/Workloads/TwoRankPyTorchJobResumesAfterARankIsKilled",
		("[B]         \tMessages:   \tstate \"Running\", conditions " + strings.Repeat("x", 1000))[:400],
		"[B]         \t            \tpod ddp-worker-0: Running",
		"[B]         \t            \t  the message's second line",
		"[B] --- FAIL: TestOperator (630.70s)",
		"[B]         --- FAIL: TestOperator/Workloads/TwoRankPyTorchJobResumesAfterARankIsKilled (361.82s)",
		"[B] FAIL\tgithub.com/ml-operator/ml-operator/test/e2ereal\t723.223s",
		"[B] make: *** [hack/mk/realnode.mk:58: e2e-real] Error 1",
		"[B] == make e2e-real took 879s (rc=2; CPU user, system: 21m3.120s 4m1.020s)",
	}, lines)
}
