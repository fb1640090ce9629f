// Package netguard keeps the operator's own outbound connections (progress
// scrapes, MLflow, Prometheus) on this machine when it runs on the local
// cluster: with loopback-only on, every target outside 127.0.0.0/8 is refused
// before it is dialed, and a host name other than localhost before it is
// resolved, so not even a DNS query leaves the machine. The local cluster,
// make e2e, the chaos suite and the benchmarks run the manager this way
// (--dial-loopback-only); on a real cluster it is off.
package netguard

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"time"
)

// DialFunc is net.Dialer.DialContext's shape.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// RefusedError is a dial that loopback-only refused.
type RefusedError struct{ Addr string }

func (e *RefusedError) Error() string {
	return fmt.Sprintf("dialing %s refused: the manager runs with --dial-loopback-only (the local cluster) and reaches only 127.0.0.0/8", e.Addr)
}

// Allowed says whether addr (host:port) may be dialed under loopback-only.
func Allowed(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && netip.MustParsePrefix("127.0.0.0/8").Contains(ip.Unmap())
}

// Guard wraps dial: with loopbackOnly it refuses every address Allowed
// refuses; otherwise it is dial.
func Guard(loopbackOnly bool, dial DialFunc) DialFunc {
	if !loopbackOnly {
		return dial
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if !Allowed(addr) {
			return nil, &RefusedError{Addr: addr}
		}
		return dial(ctx, network, addr)
	}
}

// Transport is an HTTP transport whose dials go through Guard, with a
// connect timeout. It never uses a proxy from the environment.
func Transport(loopbackOnly bool, connectTimeout time.Duration, keepAlives bool) *http.Transport {
	return &http.Transport{
		Proxy:             nil,
		DialContext:       Guard(loopbackOnly, (&net.Dialer{Timeout: connectTimeout}).DialContext),
		DisableKeepAlives: !keepAlives,
	}
}
