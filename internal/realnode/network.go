package realnode

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// The node's addresses. Every one of them lies in ClusterRange, for which an
// unreachable route exists while the node runs: a packet for a cluster
// address that nothing on this machine answers (a ClusterIP kube-proxy has
// not programmed, a pod that is gone) is refused here instead of following
// the default route off the machine. The bridge's pod route and the node
// address (local table) are more specific and win for what does exist.
const (
	// ClusterRange holds the service range, the pod range and the node IP.
	ClusterRange = "10.96.0.0/12"
	// ServiceCIDR is kube-apiserver's --service-cluster-ip-range.
	ServiceCIDR = "10.96.0.0/16"
	// APIServiceIP is the ClusterIP of the default/kubernetes Service.
	APIServiceIP = "10.96.0.1"
	// DNSServiceIP is the ClusterIP of kube-system/kube-dns (CoreDNS).
	DNSServiceIP = "10.96.0.10"
	// PodCIDR is the CNI bridge's subnet: every pod gets an address here.
	PodCIDR = "10.100.0.0/16"
	// PodGateway is the bridge's own address, the pods' default gateway.
	PodGateway = "10.100.0.1"
	// NodeIP is the node's InternalIP: an address the harness adds to lo
	// (kubelet refuses a 127.0.0.0/8 node IP). Traffic to it never leaves
	// the machine. kube-apiserver and the kubelet listen on it.
	NodeIP = "10.111.255.254"
	// BridgeName is the CNI bridge.
	BridgeName = "mlop0"
	// ForwardChain is the harness's filter chain, jumped to first from
	// FORWARD: pod traffic to anything outside PodCIDR is rejected.
	ForwardChain = "MLOP-REALNODE-FWD"
	// CNINetwork is the CNI network name (and the prefix of the files CNI
	// keeps per attachment).
	CNINetwork = "realnode"
	// ClusterDomain is the DNS domain CoreDNS serves, and the only one.
	ClusterDomain = "cluster.local"
)

// tunables are the sysctls the node's parts change (the CNI bridge plugin,
// kube-proxy and the kubelet's kernel defaults); their values before the
// node started are saved in the workdir and written back at teardown.
var tunables = []string{
	"net/ipv4/ip_forward",
	"net/bridge/bridge-nf-call-iptables",
	"net/ipv4/conf/all/route_localnet",
	"vm/overcommit_memory",
	"vm/panic_on_oom",
	"kernel/panic",
	"kernel/panic_on_oops",
	"kernel/keys/root_maxkeys",
	"kernel/keys/root_maxbytes",
}

func sysctlPath(name string) string { return filepath.Join("/proc/sys", name) }

// saveTunables records the current value of every tunable in file, unless
// file exists already: it then holds the values from before an earlier run
// that never tore down, which are the ones to restore.
func saveTunables(file string) error {
	if _, err := os.Stat(file); err == nil {
		return nil
	}
	vals := map[string]string{}
	for _, t := range tunables {
		b, err := os.ReadFile(sysctlPath(t))
		if err != nil {
			continue
		}
		vals[t] = strings.TrimSpace(string(b))
	}
	data, err := json.MarshalIndent(vals, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(file, data, 0o644)
}

// restoreTunables writes back the values saveTunables recorded and removes
// the file.
func restoreTunables(file string) error {
	data, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	vals := map[string]string{}
	if err := json.Unmarshal(data, &vals); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	var errs []error
	for t, v := range vals {
		cur, err := os.ReadFile(sysctlPath(t))
		if err == nil && strings.TrimSpace(string(cur)) == v {
			continue
		}
		if err := os.WriteFile(sysctlPath(t), []byte(v), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("restoring %s=%s: %w", t, v, err))
		}
	}
	if len(errs) == 0 {
		_ = os.Remove(file)
	}
	return errors.Join(errs...)
}

func setSysctl(name, value string) error {
	return os.WriteFile(sysctlPath(name), []byte(value), 0o644)
}

// run runs a command and returns its combined output, and an error that
// includes the output when it fails.
func run(ctx context.Context, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return out.String(), nil
}

// setUpNetwork puts the host-side safety rules in place before any part of
// the node runs: the node address on lo, the unreachable route for the
// whole cluster range and the FORWARD chain that rejects pod traffic to
// anything outside the pod range. It also turns on bridge netfilter, which
// ClusterIPs need between pods on the same bridge.
func setUpNetwork(ctx context.Context) error {
	if _, err := run(ctx, "ip", "addr", "replace", NodeIP+"/32", "dev", "lo"); err != nil {
		return err
	}
	if _, err := run(ctx, "ip", "route", "replace", "unreachable", ClusterRange); err != nil {
		return err
	}
	if err := setUpForwardChain(ctx); err != nil {
		return err
	}
	return setSysctl("net/bridge/bridge-nf-call-iptables", "1")
}

// forwardRules are ForwardChain's rules: pod-to-pod traffic returns to
// FORWARD (kube-proxy's chains and the default policy), anything else a pod
// sends is refused at once with an ICMP error, so a pod that tries the
// internet fails immediately and no packet leaves the machine.
var forwardRules = [][]string{
	{"-s", PodCIDR, "-d", PodCIDR, "-j", "RETURN"},
	{"-s", PodCIDR, "-j", "REJECT", "--reject-with", "icmp-net-prohibited"},
	{"-d", PodCIDR, "!", "-o", BridgeName, "-j", "REJECT", "--reject-with", "icmp-net-prohibited"},
}

func setUpForwardChain(ctx context.Context) error {
	if _, err := run(ctx, "iptables", "-w", "-t", "filter", "-N", ForwardChain); err != nil {
		if _, ferr := run(ctx, "iptables", "-w", "-t", "filter", "-F", ForwardChain); ferr != nil {
			return err
		}
	}
	for _, r := range forwardRules {
		if _, err := run(ctx, "iptables", append([]string{"-w", "-t", "filter", "-A", ForwardChain}, r...)...); err != nil {
			return err
		}
	}
	if _, err := run(ctx, "iptables", "-w", "-t", "filter", "-C", "FORWARD", "-j", ForwardChain); err != nil {
		if _, err := run(ctx, "iptables", "-w", "-t", "filter", "-I", "FORWARD", "1", "-j", ForwardChain); err != nil {
			return err
		}
	}
	return nil
}

// ForwardRulesInPlace reports whether FORWARD jumps to ForwardChain before
// any other rule that could accept pod traffic, and the chain holds the
// rejecting rules; the e2e suite checks it before a pod tries to reach out.
func ForwardRulesInPlace(ctx context.Context) error {
	out, err := run(ctx, "iptables", "-w", "-t", "filter", "-S", "FORWARD")
	if err != nil {
		return err
	}
	jump := "-A FORWARD -j " + ForwardChain
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "-A FORWARD") {
			// kube-proxy prepends its own jumps; they accept only
			// established, related or masquerade-marked (service) traffic.
			if line == jump {
				break
			}
			if !strings.Contains(line, "-j KUBE-") {
				return fmt.Errorf("FORWARD rule %q comes before the jump to %s", line, ForwardChain)
			}
		}
	}
	if !strings.Contains(out, jump) {
		return fmt.Errorf("FORWARD does not jump to %s:\n%s", ForwardChain, out)
	}
	chain, err := run(ctx, "iptables", "-w", "-t", "filter", "-S", ForwardChain)
	if err != nil {
		return err
	}
	for _, r := range forwardRules {
		want := "-A " + ForwardChain + " " + strings.Join(r, " ")
		if !strings.Contains(chain, want) {
			return fmt.Errorf("%s lacks %q:\n%s", ForwardChain, want, chain)
		}
	}
	return nil
}

// UnreachableRouteInPlace reports whether the unreachable route for
// ClusterRange exists.
func UnreachableRouteInPlace(ctx context.Context) error {
	out, err := run(ctx, "ip", "route", "show", "type", "unreachable", ClusterRange)
	if err != nil {
		return err
	}
	if !strings.Contains(out, ClusterRange) {
		return fmt.Errorf("no unreachable route for %s", ClusterRange)
	}
	return nil
}

// tearDownNetwork removes what setUpNetwork, the CNI bridge plugin and
// kube-proxy put on the host. Each step tolerates its thing being gone.
func tearDownNetwork(ctx context.Context) error {
	var errs []error
	// The jump first, then the chain.
	for {
		if _, err := run(ctx, "iptables", "-w", "-t", "filter", "-D", "FORWARD", "-j", ForwardChain); err != nil {
			break
		}
	}
	if chainExists(ctx, "filter", ForwardChain) {
		if _, err := run(ctx, "iptables", "-w", "-t", "filter", "-F", ForwardChain); err != nil {
			errs = append(errs, err)
		}
		if _, err := run(ctx, "iptables", "-w", "-t", "filter", "-X", ForwardChain); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, removeKubeChains(ctx))
	if linkExists(ctx, BridgeName) {
		if _, err := run(ctx, "ip", "link", "del", BridgeName); err != nil {
			errs = append(errs, err)
		}
	}
	if out, _ := run(ctx, "ip", "route", "show", "type", "unreachable", ClusterRange); strings.Contains(out, ClusterRange) {
		if _, err := run(ctx, "ip", "route", "del", "unreachable", ClusterRange); err != nil {
			errs = append(errs, err)
		}
	}
	if out, _ := run(ctx, "ip", "-4", "addr", "show", "dev", "lo"); strings.Contains(out, " "+NodeIP+"/32") {
		if _, err := run(ctx, "ip", "addr", "del", NodeIP+"/32", "dev", "lo"); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func linkExists(ctx context.Context, name string) bool {
	_, err := run(ctx, "ip", "link", "show", "dev", name)
	return err == nil
}

func chainExists(ctx context.Context, table, chain string) bool {
	_, err := run(ctx, "iptables", "-w", "-t", table, "-S", chain)
	return err == nil
}

// removeKubeChains deletes every KUBE-* chain kube-proxy and the kubelet
// made in the filter, nat and mangle tables, and the rules of built-in
// chains that jump to them (what `kube-proxy --cleanup` does, also when
// kube-proxy never got that far).
func removeKubeChains(ctx context.Context) error {
	var errs []error
	for _, table := range []string{"filter", "nat", "mangle"} {
		out, err := run(ctx, "iptables", "-w", "-t", table, "-S")
		if err != nil {
			errs = append(errs, err)
			continue
		}
		var chains []string
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			switch {
			case len(f) >= 2 && f[0] == "-N" && strings.HasPrefix(f[1], "KUBE-"):
				chains = append(chains, f[1])
			case len(f) >= 2 && f[0] == "-A" && !strings.HasPrefix(f[1], "KUBE-") && strings.Contains(line, " -j KUBE-"):
				// A built-in chain's jump into a KUBE- chain.
				del := append([]string{"-w", "-t", table, "-D"}, splitRule(line)[1:]...)
				if _, err := run(ctx, "iptables", del...); err != nil {
					errs = append(errs, err)
				}
			}
		}
		for _, c := range chains {
			if _, err := run(ctx, "iptables", "-w", "-t", table, "-F", c); err != nil {
				errs = append(errs, err)
			}
		}
		for _, c := range chains {
			if _, err := run(ctx, "iptables", "-w", "-t", table, "-X", c); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// splitRule splits an iptables -S line into arguments, keeping quoted
// comments ("-m comment --comment \"a b\"") together.
func splitRule(line string) []string {
	var args []string
	var cur strings.Builder
	quoted := false
	for _, r := range line {
		switch {
		case r == '"':
			quoted = !quoted
		case r == ' ' && !quoted:
			if cur.Len() > 0 {
				args = append(args, cur.String())
				cur.Reset()
			}
		default:
			cur.WriteRune(r)
		}
	}
	if cur.Len() > 0 {
		args = append(args, cur.String())
	}
	return args
}
