package modeldeployment_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ml-operator/ml-operator/internal/manager"
)

// runManager runs the real manager (as cmd/main builds it, webhooks off) for
// the rest of the test.
func runManager(t *testing.T) {
	t.Helper()
	opts := manager.NewOptions()
	opts.MetricsAddr = "0"
	opts.ProbeAddr = "0"
	opts.LeaderElect = false
	opts.EnableWebhooks = false
	mgr, err := manager.New(restCfg, opts)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(30 * time.Second):
			t.Error("manager did not stop within 30s")
		}
	})
}
