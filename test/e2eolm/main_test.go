//go:build e2e_olm

// Package e2eolm installs the operator with OLM on a real single-node
// cluster (internal/realnode), the way a cluster admin does: OLM v0.38.0
// built from its Go module, a CatalogSource serving the project's
// file-based catalog (catalog/) from a catalog image, an OperatorGroup and
// a Subscription with manual approval. It needs root, `make node-packages
// node-tools olm-tools` (make e2e-olm runs them); a missing tool fails the
// suite.
package e2eolm

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ml-operator/ml-operator/internal/realnode"
)

var (
	node     *realnode.Node
	repo     string
	keepLogs = flag.Bool("keep-workdir", false, "keep the node's workdir and logs after the suite")
)

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) (code int) {
	var err error
	repo, err = filepath.Abs("../..")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	bin := os.Getenv("REALNODE_BIN")
	if bin == "" {
		bin = filepath.Join(repo, "bin")
	}
	workdir, err := os.MkdirTemp("", "ml-operator-e2eolm-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx := context.Background()
	began := time.Now()
	node, err = realnode.Start(ctx, realnode.Options{
		RepoRoot: repo, BinDir: bin, Workdir: workdir, KeepWorkdir: true, Log: os.Stderr,
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "starting the real node: %v\nlogs: %s\n", err, filepath.Join(workdir, "logs"))
		return 1
	}
	fmt.Fprintf(os.Stderr, "real node Ready in %s\n", time.Since(began).Round(100*time.Millisecond))
	code = m.Run()

	stopped := time.Now()
	if err := node.Stop(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "tearing the real node down: %v\n", err)
		code = 1
	}
	fmt.Fprintf(os.Stderr, "real node torn down in %s\n", time.Since(stopped).Round(100*time.Millisecond))
	if left := realnode.Leftovers(ctx, workdir); len(left) > 0 {
		fmt.Fprintln(os.Stderr, "FAIL: the real node left behind:")
		for _, l := range left {
			fmt.Fprintln(os.Stderr, "  -", l)
		}
		code = 1
	}
	if code != 0 || *keepLogs {
		fmt.Fprintf(os.Stderr, "node logs kept in %s\n", filepath.Join(workdir, "logs"))
	} else {
		_ = os.RemoveAll(workdir)
	}
	return code
}
