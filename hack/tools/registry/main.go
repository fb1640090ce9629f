// Command registry is the OCI registry of distribution v3.1.2 with only its
// filesystem storage driver: the real node's local registry, which the
// harness runs on 127.0.0.1 (`registry serve <config>`).
package main

import (
	"os"

	"github.com/distribution/distribution/v3/registry"
	// The one storage driver the harness configures.
	_ "github.com/distribution/distribution/v3/registry/storage/driver/filesystem"
)

func main() {
	if err := registry.RootCmd.Execute(); err != nil {
		os.Exit(1)
	}
}
