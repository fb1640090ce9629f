package testutil

import (
	"net"
	"strconv"
	"testing"

	"github.com/ml-operator/ml-operator/internal/freeport"
)

// FreePort is a TCP port on 127.0.0.1 that nobody listens on
// (internal/freeport); the test fails when there is none.
func FreePort(t testing.TB) int {
	t.Helper()
	p, err := freeport.Port()
	if err != nil {
		t.Fatalf("finding a free port: %v", err)
	}
	return p
}

// FreePorts is n distinct free ports on 127.0.0.1 (freeport.Ports).
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	ports, err := freeport.Ports(n)
	if err != nil {
		t.Fatalf("finding %d free ports: %v", n, err)
	}
	return ports
}

// FreeAddr is 127.0.0.1:<FreePort>, for a listener's bind address.
func FreeAddr(t testing.TB) string {
	t.Helper()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(FreePort(t)))
}
