package realnode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Leftovers lists what a node that ran in workdir still has on the machine
// (empty after a complete teardown): processes whose command line names
// the workdir, mounts below it, the unreachable route, the node address,
// the bridge, iptables chains, network namespaces, the kubelet's cgroups
// and sysctls not yet restored.
func Leftovers(ctx context.Context, workdir string) []string {
	var left []string
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	self := fmt.Sprintf("/proc/%d/cmdline", os.Getpid())
	for _, f := range procs {
		if f == self {
			continue
		}
		b, err := os.ReadFile(f)
		if err == nil && strings.Contains(string(b), workdir) {
			left = append(left, fmt.Sprintf("process %s: %s", filepath.Base(filepath.Dir(f)), strings.ReplaceAll(string(b), "\x00", " ")))
		}
	}
	if mounts, _ := mountsUnder(workdir); len(mounts) > 0 {
		left = append(left, "mounts: "+strings.Join(mounts, ", "))
	}
	if UnreachableRouteInPlace(ctx) == nil {
		left = append(left, "unreachable route "+ClusterRange)
	}
	if out, _ := run(ctx, "ip", "-4", "addr", "show", "dev", "lo"); strings.Contains(out, " "+NodeIP+"/32") {
		left = append(left, "address "+NodeIP+" on lo")
	}
	if linkExists(ctx, BridgeName) {
		left = append(left, "bridge "+BridgeName)
	}
	for _, table := range []string{"filter", "nat", "mangle"} {
		out, _ := run(ctx, "iptables", "-w", "-t", table, "-S")
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			if len(f) >= 2 && f[0] == "-N" && (strings.HasPrefix(f[1], "KUBE-") || f[1] == ForwardChain) {
				left = append(left, fmt.Sprintf("iptables chain %s/%s", table, f[1]))
			}
		}
	}
	before := map[string]bool{}
	_ = readJSON(filepath.Join(workdir, "netns-before.json"), &before)
	for name := range netnsNames() {
		if !before[name] && strings.HasPrefix(name, "cni-") {
			left = append(left, "network namespace "+name)
		}
	}
	if dirs, _ := filepath.Glob(filepath.Join(cgroupRoot, "*", kubepodsCgroup)); len(dirs) > 0 {
		left = append(left, "cgroups: "+strings.Join(dirs, ", "))
	}
	var host hostSnapshot
	if readJSON(filepath.Join(workdir, "host-before.json"), &host) == nil {
		left = append(left, host.describe()...)
	} else {
		left = append(left, "no record of the host paths from before the run (host-before.json)")
	}
	if _, err := os.Stat(filepath.Join(workdir, "tunables.json")); err == nil {
		left = append(left, "sysctls not restored (tunables.json still in the workdir)")
	}
	return left
}
