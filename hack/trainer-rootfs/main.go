// Command trainer-rootfs makes the trainer image's root filesystem
// (images.TrainerRootfs, mmdebstrap from the machine's own apt sources) in
// the image cache, unless it is there already, and prints its path: `make
// trainer-rootfs`. .ci/run runs it in the background while the tools
// compile, since making it mostly waits on downloads and dpkg; the
// real-node suite then finds it (or waits for it on the cache's lock).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/ml-operator/ml-operator/internal/images"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	began := time.Now()
	path, err := images.Cache{Dir: images.DefaultCacheDir()}.Tarball(ctx, images.TrainerRootfs)
	if err != nil {
		fmt.Fprintln(os.Stderr, "trainer-rootfs:", err)
		os.Exit(1)
	}
	fmt.Printf("trainer root filesystem ready in %s: %s\n", time.Since(began).Round(100*time.Millisecond), path)
}
