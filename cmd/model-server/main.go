// Command model-server is the project's model server
// (internal/modelserver): the image ghcr.io/ml-operator/model-server that a
// ModelDeployment's pods run on the real node. It is configured by the
// environment the operator sets (MODEL_NAME, MODEL_VERSION, MODEL_PATH,
// FRAMEWORK), DRAIN_DELAY (how long it keeps answering after SIGTERM, 5 s
// by default) and, for tests, FAIL_RATE, CRASH_AFTER, READY and
// MODEL_SERVER_ADMIN.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/ml-operator/ml-operator/internal/modelserver"
)

func main() {
	logf := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "model-server: "+format+"\n", args...)
	}
	cfg, err := modelserver.ConfigFromEnv(os.Getenv)
	if err != nil {
		logf("%v", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := modelserver.Run(ctx, cfg, logf); err != nil {
		logf("%v", err)
		os.Exit(1)
	}
}
