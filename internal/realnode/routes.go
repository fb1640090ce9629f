package realnode

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// A pod is Ready before a Service routes to it: the EndpointSlice
// controller marks its endpoint ready, and kube-proxy writes the rule
// after that (at most every minSyncPeriod). A client that starts sending
// the moment the pods are Ready can find the Service with no rule for
// any of them, and its connections get "no route to host" from the
// node's unreachable route for the service CIDR. Found on the real node:
// 2 of 50 predictions failed that way, just after a ModelDeployment's
// pods became Ready.

// WaitServiceRouted waits until kube-proxy routes every port of the
// Service ns/name to exactly its ready endpoints, and there are want of
// them: the rules read from the node's nat table name the same
// addresses as the Service's EndpointSlices.
func (n *Node) WaitServiceRouted(ctx context.Context, ns, name string, want int, timeout time.Duration) error {
	return poll(ctx, timeout, fmt.Sprintf("Service %s/%s routed to %d ready endpoints", ns, name, want), func() (bool, error) {
		ready, err := n.readyEndpoints(ctx, ns, name)
		if err != nil {
			return false, err
		}
		out, err := run(ctx, "iptables-save", "-t", "nat")
		if err != nil {
			return false, err
		}
		routed := programmedEndpoints(out, ns, name)
		ok := len(ready) > 0 && maps.EqualFunc(ready, routed, slices.Equal[[]string])
		for _, addrs := range ready {
			ok = ok && len(addrs) == want
		}
		if !ok {
			return false, fmt.Errorf("ready endpoints %v, kube-proxy routes %v", ready, routed)
		}
		return true, nil
	})
}

// readyEndpoints returns, for each port name of the Service, the sorted
// "ip:port" of its ready endpoints as its EndpointSlices give them.
func (n *Node) readyEndpoints(ctx context.Context, ns, name string) (map[string][]string, error) {
	list := &discoveryv1.EndpointSliceList{}
	if err := n.Client.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{discoveryv1.LabelServiceName: name}); err != nil {
		return nil, err
	}
	return readyAddresses(list.Items), nil
}

// readyAddresses is readyEndpoints' pure part: "ip:port" for each ready
// endpoint address and slice port, by port name, sorted.
func readyAddresses(items []discoveryv1.EndpointSlice) map[string][]string {
	out := map[string][]string{}
	for _, s := range items {
		for _, p := range s.Ports {
			if p.Port == nil {
				continue
			}
			port := ""
			if p.Name != nil {
				port = *p.Name
			}
			for _, ep := range s.Endpoints {
				if ep.Conditions.Ready == nil || !*ep.Conditions.Ready {
					continue
				}
				for _, a := range ep.Addresses {
					out[port] = append(out[port], fmt.Sprintf("%s:%d", a, *p.Port))
				}
			}
		}
	}
	for port := range out {
		slices.Sort(out[port])
	}
	return out
}

// serviceRule matches the comment kube-proxy (iptables mode) puts on each
// rule of a Service port's chain that sends to one endpoint:
// "ns/name:port -> ip:port", or "ns/name -> ip:port" for an unnamed port.
var serviceRule = regexp.MustCompile(`--comment "?([^/" ]+)/([^:" ]+)(?::([^" ]*))? -> ([^" ]+)"?`)

// programmedEndpoints reads iptables-save's nat table and returns, for
// each port name of the Service ns/name, the sorted endpoints kube-proxy
// sends it to.
func programmedEndpoints(natRules, ns, name string) map[string][]string {
	out := map[string][]string{}
	for line := range strings.Lines(natRules) {
		if !strings.HasPrefix(line, "-A KUBE-SVC-") {
			continue
		}
		m := serviceRule.FindStringSubmatch(line)
		if m == nil || m[1] != ns || m[2] != name {
			continue
		}
		if !slices.Contains(out[m[3]], m[4]) {
			out[m[3]] = append(out[m[3]], m[4])
		}
	}
	for port := range out {
		slices.Sort(out[port])
	}
	return out
}
