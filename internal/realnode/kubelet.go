package realnode

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"text/template"
	"time"

	"github.com/ml-operator/ml-operator/internal/freeport"
)

// NodeName is the real node's name.
const NodeName = "realnode"

// kubeletConfig is the KubeletConfiguration. The settings that matter on
// this machine (docs/decisions.md): cgroupfs and failCgroupV1: false (a
// cgroup v1 VM), failSwapOn: false, the node's containerd socket. The
// kubelet API listens on NodeIP only; the pod logs, plugins and state stay
// in the workdir; eviction thresholds are low so a busy shared disk does not
// evict test pods.
var kubeletConfig = template.Must(template.New("kubelet").Parse(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: {{.NodeIP}}
port: {{.Port}}
healthzBindAddress: 127.0.0.1
healthzPort: {{.HealthzPort}}
readOnlyPort: 0
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: {{.CA}}
authorization:
  mode: Webhook
tlsCertFile: {{.TLSCert}}
tlsPrivateKeyFile: {{.TLSKey}}
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://{{.Socket}}
clusterDNS:
- {{.DNS}}
clusterDomain: {{.Domain}}
resolvConf: {{.ResolvConf}}
podLogsDir: {{.PodLogs}}
volumePluginDir: {{.VolumePlugins}}
serializeImagePulls: false
maxPods: 110
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%
  imagefs.available: 1%
  nodefs.inodesFree: 1%
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
rotateCertificates: false
serverTLSBootstrap: false
`))

// startKubelet writes the kubelet's identity, configuration and an
// upstream resolv.conf that points at nothing off the machine, then starts
// it.
func (n *Node) startKubelet(ctx context.Context) error {
	w := n.opts.Workdir
	kdir := filepath.Join(w, "kubelet")
	for _, d := range []string{kdir, filepath.Join(w, "pod-logs"), filepath.Join(w, "volume-plugins")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	p := n.pki
	if err := p.issue("kubelet", "system:node:"+NodeName, []string{"system:nodes"},
		[]string{NodeName, "localhost"}, []net.IP{net.ParseIP(NodeIP), net.ParseIP("127.0.0.1")}); err != nil {
		return err
	}
	kubeconfig, err := p.kubeconfig("kubelet", n.APIServer)
	if err != nil {
		return err
	}
	// Pods with dnsPolicy Default (and the node's own lookups) get this as
	// their resolver: 127.0.0.1 in their own namespace, where nothing
	// answers. Only ClusterFirst pods resolve names, through CoreDNS.
	resolv := filepath.Join(w, "resolv.conf")
	if err := os.WriteFile(resolv, []byte("nameserver 127.0.0.1\n"), 0o644); err != nil {
		return err
	}
	port, err := freeport.On(NodeIP)
	if err != nil {
		return err
	}
	healthz, err := freeport.On("127.0.0.1")
	if err != nil {
		return err
	}
	n.kubeletHealthz = healthz
	cfgPath := filepath.Join(kdir, "config.yaml")
	if err := writeTemplate(cfgPath, kubeletConfig, map[string]any{
		"NodeIP": NodeIP, "Port": port, "HealthzPort": healthz, "CA": p.CA(),
		"TLSCert": p.path("kubelet.crt"), "TLSKey": p.path("kubelet.key"),
		"Socket": n.containerd.Socket, "DNS": DNSServiceIP, "Domain": ClusterDomain,
		"ResolvConf": resolv, "PodLogs": filepath.Join(w, "pod-logs"),
		"VolumePlugins": filepath.Join(w, "volume-plugins"),
	}); err != nil {
		return err
	}
	n.logf("Starting kubelet (node %s, %s)", NodeName, NodeIP)
	n.kubelet, err = n.start("kubelet", "kubelet", []string{
		"--config=" + cfgPath,
		"--kubeconfig=" + kubeconfig,
		"--root-dir=" + kdir,
		"--cert-dir=" + filepath.Join(kdir, "pki"),
		"--hostname-override=" + NodeName,
		"--node-ip=" + NodeIP,
		"--v=1",
	})
	return err
}

// kubeProxyConfig runs kube-proxy in iptables mode for the node, with its
// ports on 127.0.0.1, NodePorts only on NodeIP (so it never needs
// route_localnet) and the conntrack sysctls left as they are.
var kubeProxyConfig = template.Must(template.New("kube-proxy").Parse(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: {{.Kubeconfig}}
hostnameOverride: {{.Node}}
mode: iptables
clusterCIDR: {{.PodCIDR}}
detectLocalMode: ClusterCIDR
healthzBindAddress: 127.0.0.1:{{.Healthz}}
metricsBindAddress: 127.0.0.1:{{.Metrics}}
nodePortAddresses:
- {{.NodeIP}}/32
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
iptables:
  minSyncPeriod: 1s
  syncPeriod: 30s
`))

func (n *Node) startKubeProxy(ctx context.Context) error {
	if err := n.pki.issue("kube-proxy", "system:kube-proxy", nil, nil, nil); err != nil {
		return err
	}
	kubeconfig, err := n.pki.kubeconfig("kube-proxy", n.APIServer)
	if err != nil {
		return err
	}
	healthz, err := freeport.On("127.0.0.1")
	if err != nil {
		return err
	}
	metrics, err := freeport.On("127.0.0.1")
	if err != nil {
		return err
	}
	cfgPath := filepath.Join(n.opts.Workdir, "kube-proxy.yaml")
	if err := writeTemplate(cfgPath, kubeProxyConfig, map[string]any{
		"Kubeconfig": kubeconfig, "Node": NodeName, "PodCIDR": PodCIDR,
		"Healthz": healthz, "Metrics": metrics, "NodeIP": NodeIP,
	}); err != nil {
		return err
	}
	n.logf("Starting kube-proxy (iptables)")
	n.kubeProxy, err = n.start("kube-proxy", "kube-proxy", []string{"--config=" + cfgPath, "--v=1"})
	if err != nil {
		return err
	}
	return poll(ctx, time.Minute, "kube-proxy healthz", func() (bool, error) {
		return httpOK(ctx, fmt.Sprintf("http://127.0.0.1:%d/healthz", healthz))
	}, n.kubeProxy)
}
