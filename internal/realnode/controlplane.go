package realnode

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/ml-operator/ml-operator/internal/freeport"
)

// startControlPlane starts etcd, kube-apiserver, kube-controller-manager
// and kube-scheduler from BinDir and waits until the API server is ready.
// kube-apiserver listens on NodeIP (pods reach it through the kubernetes
// Service, which kube-proxy sends to NodeIP) and nowhere else; everything
// else listens on 127.0.0.1.
func (n *Node) startControlPlane(ctx context.Context) error {
	w := n.opts.Workdir
	etcdClient, err := freeport.On("127.0.0.1")
	if err != nil {
		return err
	}
	etcdPeer, err := freeport.On("127.0.0.1")
	if err != nil {
		return err
	}
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", etcdClient)
	n.logf("Starting etcd on %s", etcdURL)
	etcd, err := n.start("etcd", "etcd", []string{
		"--data-dir=" + filepath.Join(w, "etcd"),
		"--listen-client-urls=" + etcdURL,
		"--advertise-client-urls=" + etcdURL,
		fmt.Sprintf("--listen-peer-urls=http://127.0.0.1:%d", etcdPeer),
		fmt.Sprintf("--initial-advertise-peer-urls=http://127.0.0.1:%d", etcdPeer),
		fmt.Sprintf("--initial-cluster=default=http://127.0.0.1:%d", etcdPeer),
		"--unsafe-no-fsync=true",
		"--quota-backend-bytes=4294967296",
	})
	if err != nil {
		return err
	}

	apiPort, err := freeport.On(NodeIP)
	if err != nil {
		return err
	}
	n.APIServer = "https://" + net.JoinHostPort(NodeIP, fmt.Sprint(apiPort))
	p := n.pki
	if err := p.issue("apiserver", "kube-apiserver", nil,
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc." + ClusterDomain},
		[]net.IP{net.ParseIP(NodeIP), net.ParseIP("127.0.0.1"), net.ParseIP(APIServiceIP)}); err != nil {
		return err
	}
	// The API server's client for the kubelet API (logs, exec).
	if err := p.issue("apiserver-kubelet-client", "kube-apiserver-kubelet-client", []string{"system:masters"}, nil, nil); err != nil {
		return err
	}
	if err := p.issue("admin", "realnode-admin", []string{"system:masters"}, nil, nil); err != nil {
		return err
	}
	if n.Kubeconfig, err = p.kubeconfig("admin", n.APIServer); err != nil {
		return err
	}
	policy, err := writeAuditPolicy(w)
	if err != nil {
		return err
	}
	n.logf("Starting kube-apiserver on %s", n.APIServer)
	apiserver, err := n.start("kube-apiserver", "kube-apiserver", []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=" + NodeIP,
		"--advertise-address=" + NodeIP,
		fmt.Sprintf("--secure-port=%d", apiPort),
		"--tls-cert-file=" + p.path("apiserver.crt"),
		"--tls-private-key-file=" + p.path("apiserver.key"),
		"--client-ca-file=" + p.CA(),
		"--kubelet-client-certificate=" + p.path("apiserver-kubelet-client.crt"),
		"--kubelet-client-key=" + p.path("apiserver-kubelet-client.key"),
		"--kubelet-preferred-address-types=InternalIP",
		"--service-account-issuer=https://kubernetes.default.svc." + ClusterDomain,
		"--service-account-key-file=" + p.path("sa.pub"),
		"--service-account-signing-key-file=" + p.path("sa.key"),
		"--service-cluster-ip-range=" + ServiceCIDR,
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		// Webhooks and aggregated APIs are called at their pods' addresses,
		// not their ClusterIPs: a connection from this machine to a ClusterIP
		// meets the unreachable route before kube-proxy's OUTPUT rules.
		"--enable-aggregator-routing=true",
		"--allow-privileged=true",
		"--profiling=false",
		"--event-ttl=30m",
		// Every call of the operator's service account, for the check that
		// the RBAC it ships covers what it does (test/e2ereal).
		"--audit-policy-file=" + policy,
		"--audit-log-path=" + n.AuditLog(),
		"--audit-log-format=json",
	})
	if err != nil {
		return err
	}
	if err := n.connect(); err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(n.Config)
	if err != nil {
		return err
	}
	if err := poll(ctx, 2*time.Minute, "kube-apiserver /readyz", func() (bool, error) {
		body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil && strings.TrimSpace(string(body)) == "ok", err
	}, etcd, apiserver); err != nil {
		return err
	}

	kcmPort, err := freeport.On("127.0.0.1")
	if err != nil {
		return err
	}
	n.logf("Starting kube-controller-manager and kube-scheduler")
	if _, err := n.start("kube-controller-manager", "kube-controller-manager", []string{
		"--kubeconfig=" + n.Kubeconfig,
		"--authentication-kubeconfig=" + n.Kubeconfig,
		"--authorization-kubeconfig=" + n.Kubeconfig,
		"--bind-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", kcmPort),
		// One instance: leader election would only add a way to exit on a
		// loaded machine (a missed renewal), and nothing restarts it.
		"--leader-elect=false",
		"--service-account-private-key-file=" + p.path("sa.key"),
		"--root-ca-file=" + p.CA(),
		"--use-service-account-credentials=true",
		"--service-cluster-ip-range=" + ServiceCIDR,
		"--cluster-signing-cert-file=" + p.CA(),
		"--cluster-signing-key-file=" + p.path("ca.key"),
		// Its default is under /usr/libexec; nothing uses FlexVolume here.
		"--flex-volume-plugin-dir=" + filepath.Join(w, "volume-plugins"),
		"--profiling=false",
	}); err != nil {
		return err
	}
	schedPort, err := freeport.On("127.0.0.1")
	if err != nil {
		return err
	}
	if _, err := n.start("kube-scheduler", "kube-scheduler", []string{
		"--kubeconfig=" + n.Kubeconfig,
		"--authentication-kubeconfig=" + n.Kubeconfig,
		"--authorization-kubeconfig=" + n.Kubeconfig,
		"--bind-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", schedPort),
		"--leader-elect=false",
		"--profiling=false",
	}); err != nil {
		return err
	}
	return nil
}
