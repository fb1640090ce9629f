package testutil

import (
	"fmt"
	"os"
	"testing"
)

// TorchInstall is the command that installs what the real-launcher tests
// need (.ci/run runs it).
const TorchInstall = "apt-get install python3-torch python3-prometheus-client"

// NeedTool stops a test that needs a program this machine lacks. Outside CI
// the test is skipped with a message naming what is missing and the command
// that installs it (make test lists those at the end). When CI is set the
// test fails instead: CI must run every test, so a missing tool there is a
// broken CI, not a pass.
func NeedTool(t testing.TB, path, what, install string) {
	t.Helper()
	if _, err := os.Stat(path); err == nil {
		return
	}
	msg := fmt.Sprintf("needs %s: %s is missing (%s)", what, path, install)
	if os.Getenv("CI") != "" {
		t.Fatal(msg + "; CI is set, so this is a failure, not a skip")
		return
	}
	t.Skip(msg)
}
