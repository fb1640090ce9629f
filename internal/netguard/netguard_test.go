package netguard

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAllowed(t *testing.T) {
	for addr, ok := range map[string]bool{
		"127.0.0.1:8000":         true,
		"127.101.0.7:8000":       true,
		"localhost:5000":         true,
		"[::ffff:127.0.0.1]:80":  true,
		"10.0.0.8:8000":          false,
		"192.168.1.1:80":         false,
		"[::1]:80":               false,
		"mlflow.mlflow.svc:5000": false,
		"example.com:443":        false,
	} {
		assert.Equal(t, ok, Allowed(addr), addr)
	}
}

func TestGuardRefusesBeforeDialingOrResolving(t *testing.T) {
	dialed := 0
	dial := func(context.Context, string, string) (net.Conn, error) {
		dialed++
		return nil, errors.New("would dial")
	}
	_, err := Guard(true, dial)(context.Background(), "tcp", "mlflow.mlflow.svc:5000")
	var refused *RefusedError
	require.ErrorAs(t, err, &refused)
	assert.Contains(t, err.Error(), "--dial-loopback-only")
	assert.Zero(t, dialed, "a refused address is never handed to the dialer (no DNS query)")

	_, err = Guard(false, dial)(context.Background(), "tcp", "10.0.0.8:8000")
	assert.EqualError(t, err, "would dial", "off: the dialer decides")
	assert.Equal(t, 1, dialed)
}

func TestTransportReachesLoopbackOnly(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }))
	defer srv.Close()
	c := &http.Client{Transport: Transport(true, time.Second, false), Timeout: 2 * time.Second}
	resp, err := c.Get(srv.URL)
	require.NoError(t, err, "127.0.0.1 is reachable")
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	assert.Equal(t, "ok", string(body))

	_, err = c.Get("http://10.0.0.8:8000/metrics")
	var refused *RefusedError
	assert.ErrorAs(t, err, &refused, "a private address is refused")
}
