// Command storage-initializer is the init container of a ModelDeployment
// version's pods (internal/storageinit): the image
// ghcr.io/ml-operator/storage-initializer. It fetches the model named by
// its first argument (the version's modelPath) into its second (the local
// path in the model volume) and, on failure, writes one line to
// /dev/termination-log, which the operator quotes in the ModelDeployment's
// conditions. Credentials come from the environment (the Secret the
// version names).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/ml-operator/ml-operator/internal/storageinit"
)

// terminationLog is the kubelet's default terminationMessagePath.
const terminationLog = "/dev/termination-log"

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: storage-initializer <modelPath> <destination>")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	src, dest := os.Args[1], os.Args[2]
	fmt.Fprintf(os.Stderr, "storage-initializer: fetching %s into %s\n", src, dest)
	f := storageinit.Fetcher{Getenv: os.Getenv}
	if err := storageinit.Run(ctx, f, src, dest, terminationLog); err != nil {
		fmt.Fprintf(os.Stderr, "storage-initializer: %v\n", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "storage-initializer: %s is at %s\n", src, dest)
}
