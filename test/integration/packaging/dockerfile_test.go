package packaging

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ml-operator/ml-operator/test/testutil"
)

// TestDockerfileCopiesEveryPackageTheManagerImports guards `make
// docker-build`, which cannot run here: the builder stage must COPY every
// top-level directory holding a package of the manager, and the final stage
// must be a distroless or scratch image running as a non-root user.
func TestDockerfileCopiesEveryPackageTheManagerImports(t *testing.T) {
	root := testutil.RepoRoot()
	data, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	dockerfile := string(data)
	copied := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^COPY ([a-z0-9_-]+)/ `).FindAllStringSubmatch(dockerfile, -1) {
		copied[m[1]] = true
	}
	cmd := exec.Command("go", "list", "-deps", "./cmd")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const module = "github.com/ml-operator/ml-operator/"
	for _, pkg := range strings.Fields(string(out)) {
		rel, ok := strings.CutPrefix(pkg, module)
		if !ok {
			continue
		}
		top, _, _ := strings.Cut(rel, "/")
		if !copied[top] {
			t.Errorf("the manager imports %s, but the Dockerfile does not COPY %s/", pkg, top)
		}
	}

	stages := regexp.MustCompile(`(?m)^FROM (\S+)`).FindAllStringSubmatch(dockerfile, -1)
	if len(stages) < 2 {
		t.Fatalf("want a multi-stage build, got %d FROM lines", len(stages))
	}
	final := stages[len(stages)-1][1]
	if !strings.HasPrefix(final, "gcr.io/distroless/static") && final != "scratch" {
		t.Errorf("final stage is %s, want distroless/static or scratch", final)
	}
	if !strings.Contains(dockerfile, "CGO_ENABLED=0") {
		t.Error("the manager is not built static (CGO_ENABLED=0)")
	}
	users := regexp.MustCompile(`(?m)^USER (\S+)`).FindAllStringSubmatch(dockerfile, -1)
	if len(users) == 0 || strings.HasPrefix(users[len(users)-1][1], "0") || strings.HasPrefix(users[len(users)-1][1], "root") {
		t.Errorf("final stage must run as a non-root numeric user, got %v", users)
	}
	for _, label := range []string{"org.opencontainers.image.title", "org.opencontainers.image.source", "org.opencontainers.image.version"} {
		if !strings.Contains(dockerfile, label+"=") {
			t.Errorf("Dockerfile has no %s label", label)
		}
	}
}
