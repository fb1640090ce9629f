package realnode

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestAddressesLieInTheUnreachableRange(t *testing.T) {
	_, cluster, err := net.ParseCIDR(ClusterRange)
	require.NoError(t, err)
	for _, cidr := range []string{ServiceCIDR, PodCIDR} {
		ip, n, err := net.ParseCIDR(cidr)
		require.NoError(t, err)
		require.True(t, cluster.Contains(ip), "%s in %s", cidr, ClusterRange)
		ones, _ := n.Mask.Size()
		cOnes, _ := cluster.Mask.Size()
		require.Greater(t, ones, cOnes, "%s is more specific than %s, so its route wins", cidr, ClusterRange)
	}
	for _, ip := range []string{NodeIP, APIServiceIP, DNSServiceIP, PodGateway} {
		require.True(t, cluster.Contains(net.ParseIP(ip)), "%s in %s", ip, ClusterRange)
	}
	_, svc, _ := net.ParseCIDR(ServiceCIDR)
	_, pods, _ := net.ParseCIDR(PodCIDR)
	require.False(t, svc.Contains(pods.IP) || pods.Contains(svc.IP), "service and pod ranges overlap")
	require.True(t, svc.Contains(net.ParseIP(APIServiceIP)) && svc.Contains(net.ParseIP(DNSServiceIP)))
	require.False(t, svc.Contains(net.ParseIP(NodeIP)) || pods.Contains(net.ParseIP(NodeIP)), "node IP inside a range kube-proxy or CNI hands out")
}

func TestContainerdAndCNIConfiguration(t *testing.T) {
	w := t.TempDir()
	cfgPath, paths, err := writeContainerdConfig(w, "127.0.0.1:5999")
	require.NoError(t, err)
	cfg, err := os.ReadFile(cfgPath)
	require.NoError(t, err)
	for _, want := range []string{
		"restrict_oom_score_adj = true",
		`sandbox_image = "` + PauseImage + `"`,
		`config_path = "` + filepath.Join(w, "containerd", "certs.d") + `"`,
		`address = "` + paths.Socket + `"`,
		`root = "` + filepath.Join(w, "containerd", "root") + `"`,
		`state = "` + filepath.Join(w, "containerd", "state") + `"`,
		"SystemdCgroup = false",
	} {
		require.Contains(t, string(cfg), want)
	}

	// Every registry, and every other one through _default, resolves to
	// the local registry and only to it.
	for _, host := range append([]string{"_default"}, Registries...) {
		b, err := os.ReadFile(filepath.Join(w, "containerd", "certs.d", host, "hosts.toml"))
		require.NoError(t, err, host)
		require.Equal(t, 2, strings.Count(string(b), "http://"), host)
		require.Equal(t, 2, strings.Count(string(b), "http://127.0.0.1:5999"), host)
		require.Contains(t, string(b), `server = "http://127.0.0.1:5999"`, host)
	}

	raw, err := os.ReadFile(filepath.Join(paths.CNIConfDir, "10-realnode.conflist"))
	require.NoError(t, err)
	var conflist struct {
		Plugins []struct {
			Type   string `json:"type"`
			Bridge string `json:"bridge"`
			IPMasq *bool  `json:"ipMasq"`
			IPAM   struct {
				Ranges [][]struct {
					Subnet string `json:"subnet"`
				} `json:"ranges"`
				DataDir string `json:"dataDir"`
			} `json:"ipam"`
		} `json:"plugins"`
	}
	require.NoError(t, json.Unmarshal(raw, &conflist))
	require.Len(t, conflist.Plugins, 1)
	br := conflist.Plugins[0]
	require.Equal(t, "bridge", br.Type)
	require.Equal(t, BridgeName, br.Bridge)
	require.NotNil(t, br.IPMasq)
	require.False(t, *br.IPMasq, "pods must not be masqueraded")
	require.Equal(t, PodCIDR, br.IPAM.Ranges[0][0].Subnet)
	require.True(t, strings.HasPrefix(br.IPAM.DataDir, w))
}

func TestCorefileServesTheClusterDomainOnly(t *testing.T) {
	require.NotContains(t, Corefile, "forward")
	require.NotContains(t, Corefile, ".:53")
	require.True(t, strings.HasPrefix(Corefile, ClusterDomain+":53 "))
}

func TestSplitRuleKeepsQuotedComments(t *testing.T) {
	got := splitRule(`-A FORWARD -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD`)
	require.Equal(t, []string{"-A", "FORWARD", "-m", "comment", "--comment", "kubernetes forwarding rules", "-j", "KUBE-FORWARD"}, got)
}

func TestUnescapeMount(t *testing.T) {
	require.Equal(t, "/a b/c", unescapeMount(`/a\040b/c`))
	require.Equal(t, "/plain", unescapeMount("/plain"))
}

func TestRemoveWorkdirRefusesWhileMounted(t *testing.T) {
	dir := t.TempDir()
	keep := filepath.Join(dir, "containerd", "rootfs", "data")
	require.NoError(t, os.MkdirAll(keep, 0o755))
	mounted := func(string) ([]string, error) { return []string{filepath.Join(dir, "containerd", "rootfs")}, nil }
	require.ErrorContains(t, removeUnlessMounted(dir, mounted), "still mounted")
	require.DirExists(t, keep)

	none := func(string) ([]string, error) { return nil, nil }
	require.NoError(t, removeUnlessMounted(dir, none))
	require.NoDirExists(t, dir)
}

func TestPruneToLogsKeepsOnlyTheLogs(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"logs", "pod-logs/ns_pod_uid", "containerd/content", "etcd/member"} {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, d), 0o755))
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "logs", "kubelet.log"), []byte("x"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "kube-proxy.yaml"), []byte("x"), 0o644))

	none := func(string) ([]string, error) { return nil, nil }
	require.NoError(t, pruneToLogs(dir, none))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	require.Equal(t, []string{"logs", "pod-logs"}, names)
	require.FileExists(t, filepath.Join(dir, "logs", "kubelet.log"))
	require.DirExists(t, filepath.Join(dir, "pod-logs", "ns_pod_uid"))

	// A mount left below a directory keeps that directory, and says so.
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "containerd", "rootfs"), 0o755))
	mounted := func(string) ([]string, error) { return []string{filepath.Join(dir, "containerd", "rootfs")}, nil }
	require.ErrorContains(t, pruneToLogs(dir, mounted), "still mounted")
	require.DirExists(t, filepath.Join(dir, "containerd", "rootfs"))
}

func TestMountsUnderFindsProc(t *testing.T) {
	mounts, err := mountsUnder("/proc")
	require.NoError(t, err)
	require.Contains(t, mounts, "/proc")
}
