//go:build e2e_real

// Package e2ereal is the end-to-end suite on a real single-node cluster
// (internal/realnode): real pods from images built here, real DNS, real
// kube-proxy rules, and the network safety rules checked in place. It needs
// root and `make node-packages node-tools`; a missing tool fails the suite.
package e2ereal

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

// ProbeImage is the suite's test image (./test/e2ereal/probe), under a
// name on a registry host the node must resolve to the local registry.
const ProbeImage = "ghcr.io/ml-operator/realnode-probe:e2e"

var (
	node      *realnode.Node
	keepLogs  = flag.Bool("keep-workdir", false, "keep the node's workdir and logs after the suite")
	startTime time.Duration
)

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) (code int) {
	repo, err := filepath.Abs("../..")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	bin := os.Getenv("REALNODE_BIN")
	if bin == "" {
		bin = filepath.Join(repo, "bin")
	}
	workdir, err := os.MkdirTemp("", "ml-operator-e2ereal-")
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
	startTime = time.Since(began)
	fmt.Fprintf(os.Stderr, "real node Ready in %s\n", startTime.Round(100*time.Millisecond))
	if err := node.GoImage(ctx, "./test/e2ereal/probe", ProbeImage); err != nil {
		fmt.Fprintf(os.Stderr, "probe image: %v\n", err)
		code = 1
	}
	if code == 0 {
		code = m.Run()
	}

	stopped := time.Now()
	if err := node.Stop(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "tearing the real node down: %v\n", err)
		code = 1
	}
	fmt.Fprintf(os.Stderr, "real node torn down in %s\n", time.Since(stopped).Round(100*time.Millisecond))
	// Teardown is part of what the suite proves: nothing of the node may
	// stay on the machine.
	if left := realnode.Leftovers(ctx, workdir); len(left) > 0 {
		fmt.Fprintln(os.Stderr, "FAIL: the real node left behind:")
		for _, l := range left {
			fmt.Fprintln(os.Stderr, "  -", l)
		}
		code = 1
	} else {
		fmt.Fprintln(os.Stderr, "teardown left no process, mount, route, address, bridge, iptables chain, namespace, cgroup or host file")
	}
	if code != 0 || *keepLogs {
		// A failed run keeps only the logs: containerd's images and etcd
		// are gigabytes a run. -keep-workdir keeps everything.
		if err := pruneToLogs(workdir); err != nil {
			fmt.Fprintf(os.Stderr, "pruning %s to its logs: %v\n", workdir, err)
		}
		fmt.Fprintf(os.Stderr, "node logs kept in %s\n", filepath.Join(workdir, "logs"))
	} else {
		_ = os.RemoveAll(workdir)
	}
	return code
}

func pruneToLogs(workdir string) error {
	if *keepLogs {
		return nil
	}
	return realnode.PruneToLogs(workdir)
}
