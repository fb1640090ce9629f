// Command realnode runs a real single-node cluster on this machine
// (internal/realnode): what `make run NODE=real` starts.
//
//	realnode run  [--workdir DIR] [--bin DIR] [--repo DIR] [--operator=false]
//	                                     node up, operator deployed (make deploy), until Ctrl-C; then torn down
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

	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

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
	operator := fs.Bool("operator", true, "Deploy the operator (manager image from ./cmd, cert-manager, make deploy).")
	_ = fs.Parse(os.Args[2:])

	var err error
	if os.Args[1] == "down" {
		err = realnode.Down(context.Background(), opts.Workdir)
	} else {
		err = run(opts, *operator)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "realnode %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

func run(opts realnode.Options, operator bool) (err error) {
	// A Ctrl-C also ends whatever reads our output (make's pipe, tee): a
	// write to it must not kill this process half way through teardown.
	signal.Ignore(syscall.SIGPIPE)
	// cert-manager logs through klog and controller-runtime: into a file
	// of the workdir, not over the terminal.
	if operator {
		if err := os.MkdirAll(filepath.Join(opts.Workdir, "logs"), 0o755); err != nil {
			return err
		}
		f, err := os.Create(filepath.Join(opts.Workdir, "logs", "cert-manager.log"))
		if err != nil {
			return err
		}
		defer f.Close()
		fs := flag.NewFlagSet("klog", flag.ContinueOnError)
		klog.InitFlags(fs)
		_ = fs.Set("logtostderr", "false")
		_ = fs.Set("alsologtostderr", "false")
		_ = fs.Set("stderrthreshold", "FATAL")
		klog.SetOutput(f)
		ctrllog.SetLogger(klog.NewKlogr())
	}
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
	if operator {
		// cert-manager runs in this process until cmCtx ends; it stops
		// before the node does (defers run last first).
		cmCtx, stopCM := context.WithCancel(ctx)
		done, err := n.DeployOperator(cmCtx)
		defer func() {
			stopCM()
			if done != nil {
				<-done
			}
		}()
		if err != nil {
			return err
		}
		if err := n.PushModelServer(ctx); err != nil {
			return err
		}
	}
	fmt.Printf("\nReal node %q is Ready (%s). Registry: %s. Component logs: %s\n",
		realnode.NodeName, time.Since(began).Round(time.Second), n.Registry, n.LogsDir())
	if operator {
		fmt.Printf("The operator runs in %s (image %s, from make deploy); cert-manager runs in this process.\n",
			realnode.OperatorNamespace, realnode.ManagerImage)
		fmt.Printf("A ModelDeployment can serve with the project's model server, image %s (docs/local-cluster.md).\n",
			realnode.ModelServerImage)
	}
	fmt.Println()
	fmt.Printf("export KUBECONFIG=%s\n\n", n.Kubeconfig)
	fmt.Printf("Then, in another terminal (kubectl is in %s):\n", opts.BinDir)
	fmt.Println("  kubectl get nodes -o wide")
	fmt.Println("  kubectl get pods -A")
	fmt.Println("Stop with Ctrl-C.")
	<-ctx.Done()
	return nil
}
