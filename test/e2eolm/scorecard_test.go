//go:build e2e_olm

package e2eolm

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	scapiv1alpha3 "github.com/operator-framework/api/pkg/apis/scorecard/v1alpha3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/ml-operator/ml-operator/internal/images"
)

// ScorecardTests are the scorecard tests issue 21 names: every field of
// the alm-examples has a spec descriptor, and a status descriptor is there
// for the kinds whose examples have a status.
var ScorecardTests = []string{"olm-spec-descriptors-test", "olm-status-descriptors-test"}

// UntarImage is the scorecard pod's untar init container's image here:
// Debian's static busybox as /bin/tar (upstream's is a UBI image with
// tar; the scorecard runs `tar xvzf` in it).
const UntarImage = "quay.io/operator-framework/scorecard-untar:e2eolm"

// testScorecard runs `operator-sdk scorecard` (bin/operator-sdk, the
// project's OPERATOR_SDK_VERSION) on bundle/ against the real node, as a
// bundle author does before submitting to OperatorHub: the scorecard puts
// the bundle in a ConfigMap and runs each selected test in a pod of its
// scorecard-test image (built here from the same operator-sdk module, make
// scorecard-test, under the name bundle/tests/scorecard/config.yaml gives
// it). Both descriptor tests must pass.
func testScorecard(t *testing.T) {
	ctx := context.Background()
	image := scorecardTestImage(t)
	require.NoError(t, node.PushImage(ctx, images.Spec{
		Ref:   image,
		Files: []images.File{{Source: filepath.Join(repo, "bin", "scorecard-test"), Path: "/usr/local/bin/scorecard-test"}},
		Env:   []string{"PATH=/usr/local/bin"},
		User:  "65532",
	}))
	require.NoError(t, node.PushImage(ctx, images.Spec{
		Ref:   UntarImage,
		Files: []images.File{{Source: "/bin/busybox", Path: "/bin/tar"}},
		Env:   []string{"PATH=/bin"},
		User:  "65532",
	}))
	ns := namespace(t)
	began := time.Now()
	cmd := exec.CommandContext(ctx, filepath.Join(repo, "bin", "operator-sdk"), "scorecard", "./bundle",
		"--kubeconfig", node.Kubeconfig, "--namespace", ns, "--untar-image", UntarImage,
		"--selector", "test in ("+strings.Join(ScorecardTests, ",")+")", "--output", "json", "--wait-time", "3m")
	cmd.Dir = repo
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	t.Logf("operator-sdk scorecard ./bundle (%s): %s\n%s", time.Since(began).Round(100*time.Millisecond), out, stderr.String())
	// The command exits non-zero when a test fails; the JSON says which.
	var list scapiv1alpha3.TestList
	require.NoError(t, json.Unmarshal(out, &list), "scorecard's output (err %v): %s", err, stderr.String())
	ran := map[string]bool{}
	for _, item := range list.Items {
		for _, r := range item.Status.Results {
			ran[r.Name] = true
			assert.Equal(t, scapiv1alpha3.PassState, r.State, "scorecard test %s: errors %v, suggestions %v, log %s", r.Name, r.Errors, r.Suggestions, r.Log)
		}
	}
	for _, test := range ScorecardTests {
		name := strings.TrimSuffix(test, "-test") // a test's result is named without its label's suffix
		assert.True(t, ran[name], "scorecard did not run %s (ran %v)", name, ran)
	}
	require.NoError(t, err, "operator-sdk scorecard: %s", stderr.String())
}

// scorecardTestImage is the image bundle/tests/scorecard/config.yaml names
// for the descriptor tests.
func scorecardTestImage(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repo, "bundle", "tests", "scorecard", "config.yaml"))
	require.NoError(t, err)
	var cfg scapiv1alpha3.Configuration
	require.NoError(t, sigsyaml.Unmarshal(data, &cfg))
	image := ""
	for _, stage := range cfg.Stages {
		for _, test := range stage.Tests {
			for _, want := range ScorecardTests {
				if test.Labels["test"] == want {
					require.True(t, image == "" || image == test.Image, "the descriptor tests name two images: %s, %s", image, test.Image)
					image = test.Image
				}
			}
		}
	}
	require.NotEmpty(t, image, "bundle/tests/scorecard/config.yaml has none of %v", ScorecardTests)
	return image
}
