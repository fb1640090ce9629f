package manager_test

import (
	"os"
	"testing"

	"github.com/ml-operator/ml-operator/test/testutil"
)

// env is the API server (envtest) the package's tests share.
var env *testutil.Env

func TestMain(m *testing.M) {
	os.Exit(testutil.Main(m, testutil.EnvOptions{}, func(e *testutil.Env) (func(), error) {
		env = e
		return nil, nil
	}))
}
