package freeport

import (
	"net"
	"strconv"
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

func TestOnAnotherLoopbackAddress(t *testing.T) {
	p, err := On("127.0.0.2")
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.2", strconv.Itoa(p)))
	if err != nil {
		t.Fatalf("listening on 127.0.0.2:%d: %v", p, err)
	}
	l.Close()
}

func TestPortsAreDistinct(t *testing.T) {
	ports, err := Ports(8)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if seen[p] {
			t.Fatalf("Ports(8) = %v: %d twice", ports, p)
		}
		seen[p] = true
	}
}
