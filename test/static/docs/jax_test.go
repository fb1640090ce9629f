package docs

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/test/testutil"
)

// The user guide shows the one JAX call the operator's env is tested
// against (controllers/trainingjob's
// TestJAXInitializeCallGetsEveryArgumentFromTheOperatorsEnv), verbatim.
func TestTrainingJobDocShowsTheJAXInitializeCall(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(testutil.RepoRoot(), "docs", "trainingjob.md"))
	require.NoError(t, err)
	assert.Contains(t, string(b), "\n"+mlv1.JAXInitializeCall+"\n")
}
