package localcluster

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ml-operator/ml-operator/internal/freeport"
)

func logPath(t *testing.T) string {
	t.Helper()
	return filepath.Join(t.TempDir(), "manager.log")
}

func TestWaitReadyReportsAManagerThatExits(t *testing.T) {
	probe, err := freeport.Addr()
	require.NoError(t, err)
	p, err := startProcess("/bin/sh", "", []string{"-c", "exit 3"}, logPath(t))
	require.NoError(t, err)
	err = p.waitReady(context.Background(), probe)
	assert.ErrorIs(t, err, ErrManagerExited)
	assert.ErrorContains(t, err, "exited before it was ready")
	assert.ErrorContains(t, err, "exit status 3")
}

func TestWaitReadyReturnsOnReadyz(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/readyz" {
			_, _ = w.Write([]byte("ok"))
			return
		}
		http.NotFound(w, r)
	}))
	defer srv.Close()
	u, err := url.Parse(srv.URL)
	require.NoError(t, err)

	p, err := startProcess("/bin/sleep", "", []string{"60"}, logPath(t))
	require.NoError(t, err)
	defer p.stop()
	assert.NoError(t, p.waitReady(context.Background(), u.Host))
}

func TestStopEndsTheManager(t *testing.T) {
	p, err := startProcess("/bin/sleep", "", []string{"60"}, logPath(t))
	require.NoError(t, err)
	p.stop()
	select {
	case <-p.done:
	default:
		t.Fatal("stop returned while the manager was still running")
	}
	assert.ErrorContains(t, p.err, "terminated", "stopped with SIGTERM")
}

// The flags every manager on the local cluster runs with: nothing but
// 127.0.0.1, no leader election, its own dials kept on loopback.
func TestManagerEndpointsFlags(t *testing.T) {
	e := ManagerEndpoints{WebhookPort: 1, MetricsPort: 2, ProbePort: 3, Cert: &ServingCert{Dir: "/certs"}, Webhooks: true}
	assert.Equal(t, []string{
		"--leader-elect=false",
		"--dial-loopback-only",
		"--metrics-secure=false",
		"--metrics-bind-address=127.0.0.1:2",
		"--health-probe-bind-address=127.0.0.1:3",
		"--enable-webhooks=true",
		"--webhook-port=1",
		"--webhook-host=127.0.0.1",
		"--webhook-cert-path=/certs",
	}, e.Flags())
	assert.Equal(t, "http://127.0.0.1:2/metrics", e.MetricsURL())
	for _, f := range e.Flags() {
		if i := strings.Index(f, "127."); i >= 0 {
			assert.True(t, IsLoopback(strings.Split(f[i:], ":")[0]), f)
		}
	}
}
