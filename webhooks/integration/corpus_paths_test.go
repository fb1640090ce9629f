package integration_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ml-operator/ml-operator/test/testutil"
)

// causePath is a cause that starts with the field path it is about:
// spec.versions[0].name, spec.hyperparameters[learning-rate], metadata.name.
var causePath = regexp.MustCompile(`^(spec|metadata)(\.[A-Za-z0-9]+|\[[^\]]*\])*: `)

// errorPath is a field path inside the text of an error the API server
// answers before any webhook (`unknown field "spec.numWorker"`).
var errorPath = regexp.MustCompile(`[ ."](spec|metadata)\.[A-Za-z]`)

// schemaIncomplete is the API server's extra cause when a structural error
// stops CEL rules from running; it accompanies a cause with a path.
const schemaIncomplete = "<nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"

// The invalid corpus is what issue 10 asks for: at least 60 manifests, of
// both kinds and both TrainingJob versions, and every refusal it expects
// names the field path (TestInvalidManifestsAreRefused asserts the API
// server answers with exactly that text).
func TestInvalidCorpusNamesAFieldPathInEveryRefusal(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join(testutil.RepoRoot(), "test", "testdata", "invalid", "*.yaml"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(paths), 60)
	perKind := map[string]int{}
	for _, path := range paths {
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		name := filepath.Base(path)
		withPath := 0
		for _, line := range strings.Split(string(data), "\n") {
			if c, ok := strings.CutPrefix(line, "# expect: "); ok {
				if c == schemaIncomplete {
					continue
				}
				if assert.Regexpf(t, causePath, c, "%s: the cause does not start with a field path", name) {
					withPath++
				}
			}
			if e, ok := strings.CutPrefix(line, "# error: "); ok {
				if assert.Regexpf(t, errorPath, e, "%s: the error names no field path", name) {
					withPath++
				}
			}
		}
		assert.Positivef(t, withPath, "%s expects no refusal that names a field path", name)

		objs, err := testutil.DecodeManifests(data)
		require.NoError(t, err, name)
		require.NotEmpty(t, objs, name)
		last := objs[len(objs)-1]
		perKind[last.GetAPIVersion()+" "+last.GetKind()]++
	}
	t.Logf("invalid manifests per kind: %v", perKind)
	for _, kind := range []string{"ml.example.com/v1 TrainingJob", "ml.example.com/v1alpha1 TrainingJob", "ml.example.com/v1 ModelDeployment"} {
		assert.GreaterOrEqualf(t, perKind[kind], 10, "too few invalid %s manifests", kind)
	}
}
