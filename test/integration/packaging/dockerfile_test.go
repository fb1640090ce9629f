package packaging

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ml-operator/ml-operator/internal/realnode"
	"github.com/ml-operator/ml-operator/internal/storageinit"
	"github.com/ml-operator/ml-operator/test/testutil"
)

// TestDockerfileCopiesEveryPackageTheManagerImports guards `make
// docker-build`, which cannot run here: the builder stage must COPY every
// top-level directory holding a package of the manager, and the final stage
// must be a distroless or scratch image running as a non-root user.
func TestDockerfileCopiesEveryPackageTheManagerImports(t *testing.T) {
	checkDockerfile(t, "Dockerfile", "./cmd")
}

// TestModelServerDockerfile: the same for `make
// docker-build-model-server`, and its image runs as the user and entrypoint
// the real node's copy of it has (internal/realnode.PushModelServer).
func TestModelServerDockerfile(t *testing.T) {
	dockerfile := checkDockerfile(t, "model-server.Dockerfile", "./cmd/model-server")
	if !strings.Contains(dockerfile, "\nUSER "+realnode.ModelServerUser+"\n") {
		t.Errorf("model-server.Dockerfile does not run as %s, the user of the real node's image", realnode.ModelServerUser)
	}
	if !strings.Contains(dockerfile, `ENTRYPOINT ["/model-server"]`) {
		t.Error(`model-server.Dockerfile's entrypoint is not ["/model-server"], the real node's image's`)
	}
}

// TestStorageInitializerDockerfile: the same for `make
// docker-build-storage-initializer`, with the user and entrypoint of the
// real node's copy (internal/realnode.PushStorageInitializer).
func TestStorageInitializerDockerfile(t *testing.T) {
	dockerfile := checkDockerfile(t, "storage-initializer.Dockerfile", "./cmd/storage-initializer")
	if !strings.Contains(dockerfile, "\nUSER "+storageinit.User+"\n") {
		t.Errorf("storage-initializer.Dockerfile does not run as %s, the user of the real node's image", storageinit.User)
	}
	if !strings.Contains(dockerfile, `ENTRYPOINT ["/storage-initializer"]`) {
		t.Error(`storage-initializer.Dockerfile's entrypoint is not ["/storage-initializer"], the real node's image's`)
	}
}

func checkDockerfile(t *testing.T, file, mainPkg string) string {
	t.Helper()
	root := testutil.RepoRoot()
	data, err := os.ReadFile(filepath.Join(root, file))
	if err != nil {
		t.Fatal(err)
	}
	dockerfile := string(data)
	copied := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^COPY ([a-z0-9_-]+)/ `).FindAllStringSubmatch(dockerfile, -1) {
		copied[m[1]] = true
	}
	cmd := exec.Command("go", "list", "-deps", mainPkg)
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
			t.Errorf("%s imports %s, but %s does not COPY %s/", mainPkg, pkg, file, top)
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
		t.Errorf("%s: %s is not built static (CGO_ENABLED=0)", file, mainPkg)
	}
	users := regexp.MustCompile(`(?m)^USER (\S+)`).FindAllStringSubmatch(dockerfile, -1)
	if len(users) == 0 || strings.HasPrefix(users[len(users)-1][1], "0") || strings.HasPrefix(users[len(users)-1][1], "root") {
		t.Errorf("final stage must run as a non-root numeric user, got %v", users)
	}
	for _, label := range []string{"org.opencontainers.image.title", "org.opencontainers.image.source", "org.opencontainers.image.version"} {
		if !strings.Contains(dockerfile, label+"=") {
			t.Errorf("%s has no %s label", file, label)
		}
	}
	return dockerfile
}
