package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func logFile(t *testing.T) *os.File {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "manager.log"))
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	return f
}

func TestWaitReadyReportsAManagerThatExits(t *testing.T) {
	port, err := freeManagerPorts()
	require.NoError(t, err)
	m, err := startManager("/bin/sh", "", []string{"-c", "exit 3"}, logFile(t))
	require.NoError(t, err)
	err = m.waitReady(context.Background(), port.probe)
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
	port, err := strconv.Atoi(u.Port())
	require.NoError(t, err)

	m, err := startManager("/bin/sleep", "", []string{"60"}, logFile(t))
	require.NoError(t, err)
	defer m.stop()
	assert.NoError(t, m.waitReady(context.Background(), port))
}

func TestStopEndsTheManager(t *testing.T) {
	m, err := startManager("/bin/sleep", "", []string{"60"}, logFile(t))
	require.NoError(t, err)
	m.stop()
	select {
	case <-m.done:
	default:
		t.Fatal("stop returned while the manager was still running")
	}
	assert.ErrorContains(t, m.err, "terminated", "stopped with SIGTERM")
}
