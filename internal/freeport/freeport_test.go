package freeport

import (
	"net"
	"strings"
	"testing"
)

func TestPortCanBeListenedOn(t *testing.T) {
	addr, err := Addr()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Fatalf("Addr() = %q, want 127.0.0.1:<port>", addr)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listening on %s: %v", addr, err)
	}
	l.Close()
}
