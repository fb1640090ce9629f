// Command realnode runs a real single-node cluster on this machine
// (internal/realnode): what `make run NODE=real` starts.
//
//	realnode run  [--workdir DIR] [--bin DIR] [--repo DIR]   node up until Ctrl-C, then torn down
//	realnode down [--workdir DIR]                            remove what a killed run left behind
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/ml-operator/ml-operator/internal/realnode"
)

func main() {
	if len(os.Args) < 2 || (os.Args[1] != "run" && os.Args[1] != "down") {
		fmt.Fprintln(os.Stderr, "usage: realnode run|down [--workdir DIR] [--bin DIR] [--repo DIR] [--keep-workdir]")
		os.Exit(2)
	}
	wd, _ := os.Getwd()
	opts := realnode.Options{Log: os.Stderr}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	fs.StringVar(&opts.Workdir, "workdir", filepath.Join(wd, ".realnode"), "Where the node keeps its state, certificates and logs.")
	fs.StringVar(&opts.BinDir, "bin", filepath.Join(wd, "bin"), "Directory with the node's binaries (make node-tools).")
	fs.StringVar(&opts.RepoRoot, "repo", wd, "Repository root.")
	fs.BoolVar(&opts.KeepWorkdir, "keep-workdir", false, "Keep the workdir (logs) after teardown.")
	_ = fs.Parse(os.Args[2:])

	var err error
	if os.Args[1] == "down" {
		err = realnode.Down(context.Background(), opts.Workdir)
	} else {
		err = run(opts)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "realnode %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

func run(opts realnode.Options) (err error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	began := time.Now()
	n, err := realnode.Start(ctx, opts)
	if err != nil {
		return err
	}
	defer func() {
		fmt.Fprintln(os.Stderr, "\nTearing the real node down")
		if serr := n.Stop(context.Background()); serr != nil && err == nil {
			err = serr
		}
	}()
	fmt.Printf("\nReal node %q is Ready (%s). Registry: %s. Component logs: %s\n\n",
		realnode.NodeName, time.Since(began).Round(time.Second), n.Registry, n.LogsDir())
	fmt.Printf("export KUBECONFIG=%s\n\n", n.Kubeconfig)
	fmt.Println("Stop with Ctrl-C.")
	<-ctx.Done()
	return nil
}
