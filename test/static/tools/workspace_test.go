package tools

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ml-operator/ml-operator/test/testutil"
)

// workspaceTool is a tool built in a Go workspace with the project's module
// (hack/tools/<dir>/go.work; Makefile): the packages built there, and the
// modules it needs newer than the project has (they, and what imports them,
// are compiled on their own; the rest is shared).
type workspaceTool struct {
	pkgs []string
	// shares is a large module the tool and the project both build.
	shares string
	newer  []string
}

var workspaceTools = map[string]workspaceTool{
	"k8s": {pkgs: []string{
		"k8s.io/kubernetes/cmd/kube-apiserver", "k8s.io/kubernetes/cmd/kubectl",
		"k8s.io/kubernetes/cmd/kube-controller-manager", "k8s.io/kubernetes/cmd/kube-scheduler",
		"k8s.io/kubernetes/cmd/kubelet", "k8s.io/kubernetes/cmd/kube-proxy",
	}, shares: "k8s.io/client-go"},
	"etcd": {pkgs: []string{"."}, shares: "google.golang.org/grpc"},
	"kwok": {pkgs: []string{"sigs.k8s.io/kwok/cmd/kwok", "sigs.k8s.io/kwok/cmd/kwokctl"}, shares: "k8s.io/client-go"},
	// CoreDNS 1.14.7 needs a newer Prometheus client than the manager's
	// (raising the manager's was judged not worth it: docs/decisions.md);
	// its Kubernetes plugin's client-go stack is shared all the same.
	"coredns": {pkgs: []string{"."}, shares: "k8s.io/client-go", newer: []string{
		"github.com/prometheus/client_golang", "github.com/prometheus/common", "github.com/prometheus/procfs",
		"google.golang.org/genproto/googleapis/rpc",
	}},
	// OLM v0.38.0 needs operator-registry v1.61.0 (the project's, and the
	// tested opm's, is v1.60.0); everything else, its Kubernetes v0.34
	// requirements included, builds at the project's versions.
	"olm": {pkgs: []string{
		"github.com/operator-framework/operator-lifecycle-manager/cmd/olm",
		"github.com/operator-framework/operator-lifecycle-manager/cmd/catalog",
		"github.com/operator-framework/operator-lifecycle-manager/cmd/copy-content",
		"github.com/operator-framework/operator-lifecycle-manager/util/cpb",
		"github.com/grpc-ecosystem/grpc-health-probe",
	}, shares: "k8s.io/client-go", newer: []string{
		"github.com/operator-framework/operator-registry", "github.com/docker/docker-credential-helpers",
	}},
	"opm": {pkgs: []string{"github.com/operator-framework/operator-registry/cmd/opm"}, shares: "github.com/operator-framework/operator-registry"},
}

// moduleVersions runs `go list -deps` in dir and returns the version of
// every non-standard module the packages are built from.
func moduleVersions(t *testing.T, dir string, env []string, args ...string) map[string]string {
	t.Helper()
	c := exec.Command("go", append([]string{"list", "-deps", "-f", "{{with .Module}}{{.Path}} {{.Version}}{{end}}"}, args...)...)
	c.Dir = dir
	c.Env = append(os.Environ(), env...)
	out, err := c.Output()
	if ee, ok := err.(*exec.ExitError); ok {
		t.Fatalf("go list in %s: %v\n%s", dir, err, ee.Stderr)
	}
	require.NoError(t, err)
	versions := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if path, version, ok := strings.Cut(line, " "); ok && version != "" {
			versions[path] = version
		}
	}
	return versions
}

// The workspace is what lets the tools share the project's compilation: a
// package is compiled once only if it and every package it imports are at
// the same version in both builds. So every module both builds use must
// resolve to the project's version inside the workspace. A tool whose
// requirements raise a shared module (a new Kubernetes release, say) fails
// here, before a cold CI run silently compiles client-go twice again.
func TestToolWorkspacesBuildSharedModulesAtTheProjectsVersions(t *testing.T) {
	root := testutil.RepoRoot()
	project := moduleVersions(t, root, []string{"GOWORK=off"}, "-test", "./...")
	require.Contains(t, project, "k8s.io/client-go", "the project builds client-go")
	for dir, wt := range workspaceTools {
		t.Run(dir, func(t *testing.T) {
			wd := filepath.Join(root, "hack", "tools", dir)
			require.FileExists(t, filepath.Join(wd, "go.work"), "the tool is built in a workspace with the project")
			tool := moduleVersions(t, wd, []string{"GONOSUMDB=k8s.io,github.com/operator-framework"}, wt.pkgs...)
			shared := 0
			for path, v := range tool {
				want, ok := project[path]
				if !ok || slices.Contains(wt.newer, path) {
					continue
				}
				shared++
				assert.Equal(t, want, v, "hack/tools/%s builds %s at %s, the project at %s: shared packages are compiled twice", dir, path, v, want)
			}
			assert.Contains(t, tool, wt.shares, "the tool builds %s, as the project does", wt.shares)
			for _, path := range wt.newer {
				assert.NotEqual(t, project[path], tool[path], "hack/tools/%s no longer needs %s newer than the project: take it off the list", dir, path)
			}
			t.Logf("%d modules shared with the project's build", shared)
		})
	}
}
