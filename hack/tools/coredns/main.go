// Command coredns is CoreDNS v1.14.7 with only the plugins the real node's
// cluster DNS needs: kubernetes, errors, health, ready, loop, cache, reload
// and log. There is deliberately no forward plugin: the cluster DNS answers
// for the cluster domain only and never sends a query off the machine.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	// The plugins, each registering itself with caddy.
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

// directives is CoreDNS's plugin order (plugin.cfg) restricted to the
// plugins above; a Corefile naming any other plugin fails to load.
var directives = []string{
	"reload",
	"ready",
	"health",
	"errors",
	"log",
	"cache",
	"kubernetes",
	"loop",
}

func init() { dnsserver.Directives = directives }

func main() { coremain.Run() }
