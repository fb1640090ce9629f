package manager_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ml-operator/ml-operator/internal/manager"
	"github.com/ml-operator/ml-operator/test/testutil"
)

// The manager starts against a real API server, wins leader election, serves
// its probes and metrics, and exits cleanly when its context ends.
func TestManagerStartsAndStops(t *testing.T) {

	opts := manager.NewOptions()
	opts.MetricsAddr = testutil.FreeAddr(t)
	opts.MetricsSecure = false
	opts.ProbeAddr = testutil.FreeAddr(t)
	opts.PprofAddr = testutil.FreeAddr(t)
	opts.LeaderElectionNamespace = "default"
	opts.EnableWebhooks = false

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- manager.Run(ctx, env.Config, opts) }()

	get := func(url string) (int, error) {
		resp, err := http.Get(url)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		return resp.StatusCode, nil
	}
	for _, url := range []string{
		fmt.Sprintf("http://%s/readyz", opts.ProbeAddr),
		fmt.Sprintf("http://%s/healthz", opts.ProbeAddr),
		fmt.Sprintf("http://%s/metrics", opts.MetricsAddr),
		// --pprof-bind-address: the heap profile the benchmark reads.
		fmt.Sprintf("http://%s/debug/pprof/heap", opts.PprofAddr),
	} {
		require.Eventually(t, func() bool {
			code, err := get(url)
			return err == nil && code == http.StatusOK
		}, 20*time.Second, 100*time.Millisecond, "GET %s", url)
	}

	lease := testutil.EventuallyLeaseHeld(t, env.Client, "default", opts.LeaderElectionID)
	require.NotEmpty(t, lease)

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("manager did not stop within 30s of its context ending")
	}
}
