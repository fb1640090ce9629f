package testutil

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
)

// recorder is a testing.TB that records how NeedTool stopped the test
// instead of stopping it.
type recorder struct {
	testing.TB
	fatal, skip string
}

func (r *recorder) Helper()           {}
func (r *recorder) Fatal(args ...any) { r.fatal = args[0].(string) }
func (r *recorder) Skip(args ...any)  { r.skip = args[0].(string) }

// With CI set, a missing tool fails the test; without it, the test skips
// with the command that installs the tool; a present tool does neither.
func TestNeedToolFailsInCIAndSkipsElsewhere(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "torchrun")

	t.Setenv("CI", "true")
	r := &recorder{TB: t}
	NeedTool(r, missing, "python3-torch", TorchInstall)
	assert.Equal(t, "needs python3-torch: "+missing+" is missing ("+TorchInstall+"); CI is set, so this is a failure, not a skip", r.fatal)
	assert.Empty(t, r.skip)

	t.Setenv("CI", "")
	r = &recorder{TB: t}
	NeedTool(r, missing, "python3-torch", TorchInstall)
	assert.Equal(t, "needs python3-torch: "+missing+" is missing ("+TorchInstall+")", r.skip)
	assert.Empty(t, r.fatal)

	t.Setenv("CI", "true")
	r = &recorder{TB: t}
	NeedTool(r, t.TempDir(), "a directory", "none")
	assert.Empty(t, r.fatal+r.skip)
}
