// Command localcluster runs ml-operator on a local kwok cluster: a real
// kube-apiserver, etcd, kube-controller-manager and kube-scheduler from bin/,
// with kwok playing the kubelets of simulated GPU and CPU nodes. It is what
// `make run` uses when no cluster is reachable (or LOCAL=1). The work is
// internal/localcluster's (Run, Down); this is its command line.
//
//	localcluster run  [flags] [-- manager flags]   cluster + CRDs + webhooks + manager, until Ctrl-C
//	localcluster down [flags]                      stops a run and deletes its cluster
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/ml-operator/ml-operator/internal/localcluster"
)

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	cmd, args := os.Args[1], os.Args[2:]
	var err error
	switch cmd {
	case "run":
		err = run(args)
	case "down":
		err = down(args)
	default:
		usage()
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "localcluster %s: %v\n", cmd, err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: localcluster run|down [--workdir DIR] [--name NAME] [--bin DIR] [--gang native] [-- manager flags]")
}

func parseFlags(name string, args []string) (*localcluster.RunOptions, error) {
	wd, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	o := &localcluster.RunOptions{}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.StringVar(&o.RepoRoot, "repo", wd, "Repository root (config/crd, config/webhook, hack/kwok).")
	fs.StringVar(&o.BinDir, "bin", filepath.Join(wd, "bin"), "Directory with kwokctl, kwok, kube-apiserver, etcd, kube-controller-manager and kube-scheduler.")
	fs.StringVar(&o.Workdir, "workdir", filepath.Join(wd, ".kwok"), "Where the cluster keeps its state, kubeconfig, certificates and logs.")
	fs.StringVar(&o.Name, "name", "ml-operator", "Cluster name.")
	fs.StringVar(&o.Manager, "manager", filepath.Join(wd, "bin", "manager"), "The manager binary (go build -o bin/manager ./cmd).")
	gang := fs.String("gang", "", `"native": start the control plane with Kubernetes' native gang scheduling (feature gates `+
		localcluster.NativeGangFeatureGates+", runtime config "+localcluster.NativeGangRuntimeConfig+")")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	switch *gang {
	case "":
	case "native":
		o.NativeGangs = true
	default:
		return nil, fmt.Errorf(`--gang: %q is not "native" (or empty: no gates)`, *gang)
	}
	o.ManagerArgs = fs.Args()
	for _, p := range []*string{&o.RepoRoot, &o.BinDir, &o.Workdir, &o.Manager} {
		if *p, err = filepath.Abs(*p); err != nil {
			return nil, err
		}
	}
	o.Log, o.Out = os.Stderr, os.Stdout
	return o, nil
}

func down(args []string) error {
	o, err := parseFlags("down", args)
	if err != nil {
		return err
	}
	return localcluster.Down(context.Background(), o.Options)
}

func run(args []string) error {
	o, err := parseFlags("run", args)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return localcluster.Run(ctx, *o)
}
