package tools

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ml-operator/ml-operator/test/testutil"
)

func buildTool(t *testing.T, logDir string, cmd ...string) (string, error) {
	t.Helper()
	args := append([]string{"kube-apiserver", "v1.36.3", "1 of 9", "about 5 min", "--"}, cmd...)
	c := exec.Command(filepath.Join(testutil.RepoRoot(), "hack", "build-tool.sh"), args...)
	c.Env = append(os.Environ(), "TOOL_LOG_DIR="+logDir)
	out, err := c.CombinedOutput()
	return string(out), err
}

// A tool build prints one line saying what is built, which of how many and
// how long it takes; the command's own output goes to a log.
func TestToolBuildPrintsOneLineAndLogsTheRest(t *testing.T) {
	logs := t.TempDir()
	out, err := buildTool(t, logs, "sh", "-c", "echo 'go: downloading k8s.io/api v0.36.3'; echo compiled")
	require.NoError(t, err, out)
	log := filepath.Join(logs, "kube-apiserver.log")
	assert.Equal(t, "building kube-apiserver v1.36.3 (1 of 9, about 5 min on 2 cores; cached in bin/ after this; log: "+log+")",
		strings.Split(out, "\n")[0])
	assert.NotContains(t, out, "go: downloading", "the noise goes to the log")
	assert.Regexp(t, `(?m)^  kube-apiserver built in \d+s$`, out)
	logged, err := os.ReadFile(log)
	require.NoError(t, err)
	assert.Equal(t, "go: downloading k8s.io/api v0.36.3\ncompiled\n", string(logged))
}

// A failed build shows the tail of its log and fails.
func TestToolBuildFailureShowsTheLogTail(t *testing.T) {
	out, err := buildTool(t, t.TempDir(), "sh", "-c", "for i in $(seq 1 40); do echo line $i; done; echo 'cannot find module' >&2; exit 3")
	require.Error(t, err)
	assert.Contains(t, out, "building kube-apiserver failed after")
	assert.Contains(t, out, "  | cannot find module")
	assert.Contains(t, out, "  | line 40")
	assert.NotContains(t, out, "  | line 10\n", "only the tail")
}

// make numbers the tools in the order make test and make run build them.
func TestMakeNumbersTheToolBuilds(t *testing.T) {
	bin := t.TempDir()
	c := exec.Command("make", "-n", "--no-print-directory", "cluster-tools", "LOCALBIN="+bin)
	c.Dir = testutil.RepoRoot()
	out, err := c.CombinedOutput()
	require.NoError(t, err, string(out))
	for _, want := range []string{
		`build-tool.sh kube-apiserver v1.36.3 "1 of 9"`,
		`build-tool.sh etcd v3.6.8 "2 of 9"`,
		`build-tool.sh kubectl v1.36.3 "3 of 9"`,
		`build-tool.sh kube-controller-manager v1.36.3 "7 of 9"`,
		`build-tool.sh kube-scheduler v1.36.3 "8 of 9"`,
		`build-tool.sh kwok v0.8.0 "9 of 9"`,
	} {
		assert.Contains(t, string(out), want)
	}
}
