// Package freeport finds TCP ports on 127.0.0.1 that nobody listens on, so
// that parallel runs (and CI) of the local cluster, the benchmark and the
// test suites do not collide. It is the one place this is written:
// test/testutil wraps it for tests (testutil.FreePort, testutil.FreeAddr).
//
// The port is free when it is returned; a process that binds it later can
// still lose a race with another, which is why callers bind it at once.
package freeport

import (
	"net"
	"strconv"
)

// Port asks the kernel for a TCP port on 127.0.0.1 that nobody listens on.
func Port() (int, error) { return On("127.0.0.1") }

// On asks the kernel for a TCP port on host (an address of this machine)
// that nobody listens on.
func On(host string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Ports asks for n distinct free TCP ports on 127.0.0.1: every listener is
// held until all are chosen, so the kernel cannot hand one out twice.
func Ports(n int) ([]int, error) {
	ports := make([]int, n)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports, nil
}

// Addr is 127.0.0.1:<Port()>.
func Addr() (string, error) {
	p, err := Port()
	if err != nil {
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(p)), nil
}
