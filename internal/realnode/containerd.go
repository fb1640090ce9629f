package realnode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/template"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// PauseImage is the sandbox image: a static Go binary that sleeps until
// SIGTERM (internal/realnode/pause), built and pushed by the harness.
const PauseImage = "realnode.local/pause:v1"

// Registries get a hosts.toml of their own; every other registry host falls
// to the _default directory. All of them point at the local registry and
// nothing else: a missing image fails at 127.0.0.1 instead of being asked
// for on the internet.
var Registries = []string{"docker.io", "ghcr.io", "registry.k8s.io", "quay.io", "realnode.local"}

// containerdConfig is containerd 1.6's config (version 2): its own root,
// state, socket and runc root under the workdir, the CRI plugin with runc
// (restrict_oom_score_adj: this machine lacks CAP_SYS_RESOURCE), the CNI
// configuration of the workdir and the registry hosts directory.
var containerdConfig = template.Must(template.New("containerd").Parse(`version = 2
root = "{{.Dir}}/root"
state = "{{.Dir}}/state"
disabled_plugins = [
  "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.tracing.processor.v1.otlp",
  "io.containerd.internal.v1.tracing",
]

[grpc]
  address = "{{.Socket}}"

[ttrpc]
  address = "{{.Socket}}.ttrpc"

[debug]
  address = ""
  level = "info"

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = "{{.Dir}}/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{{.PauseImage}}"
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  disable_apparmor = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "{{.Dir}}/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{{.CNIBinDir}}"
    conf_dir = "{{.CNIConfDir}}"
    max_conf_num = 1
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "{{.Dir}}/certs.d"
`))

// hostsTOML sends pulls and resolves for one registry host to the local
// registry; server is the fallback containerd would otherwise take (the
// upstream registry), so it is the local registry too.
var hostsTOML = template.Must(template.New("hosts").Parse(`server = "http://{{.}}"

[host."http://{{.}}"]
  capabilities = ["pull", "resolve"]
`))

// cniConfig is the pod network: the bridge plugin with host-local IPAM on
// PodCIDR, no masquerading (pods are never NATed towards the outside), and
// the IPAM state in the workdir.
var cniConfig = template.Must(template.New("cni").Parse(`{
  "cniVersion": "1.0.0",
  "name": "{{.Network}}",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "{{.Bridge}}",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "{{.PodCIDR}}", "gateway": "{{.Gateway}}"}]],
        "routes": [{"dst": "0.0.0.0/0"}],
        "dataDir": "{{.IPAMDir}}"
      }
    }
  ]
}
`))

// CNIBinDir is where Debian's containernetworking-plugins installs them.
const CNIBinDir = "/usr/lib/cni"

type containerdPaths struct {
	Dir, Socket, PauseImage, CNIBinDir, CNIConfDir string
}

// writeContainerdConfig writes config.toml, the hosts.toml files for
// registryAddr and the CNI conflist, and returns the config file's path.
func writeContainerdConfig(workdir, registryAddr string) (string, containerdPaths, error) {
	p := containerdPaths{
		Dir:        filepath.Join(workdir, "containerd"),
		PauseImage: PauseImage,
		CNIBinDir:  CNIBinDir,
		CNIConfDir: filepath.Join(workdir, "cni", "net.d"),
	}
	p.Socket = filepath.Join(p.Dir, "containerd.sock")
	for _, d := range []string{p.Dir, p.CNIConfDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return "", p, err
		}
	}
	cfgPath := filepath.Join(p.Dir, "config.toml")
	if err := writeTemplate(cfgPath, containerdConfig, p); err != nil {
		return "", p, err
	}
	for _, host := range append([]string{"_default"}, Registries...) {
		dir := filepath.Join(p.Dir, "certs.d", host)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", p, err
		}
		if err := writeTemplate(filepath.Join(dir, "hosts.toml"), hostsTOML, registryAddr); err != nil {
			return "", p, err
		}
	}
	err := writeTemplate(filepath.Join(p.CNIConfDir, "10-realnode.conflist"), cniConfig, map[string]string{
		"Network": CNINetwork, "Bridge": BridgeName, "PodCIDR": PodCIDR, "Gateway": PodGateway,
		"IPAMDir": filepath.Join(workdir, "cni", "ipam"),
	})
	return cfgPath, p, err
}

func writeTemplate(path string, t *template.Template, data any) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := t.Execute(f, data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// criClient talks CRI to the node's containerd.
func criClient(socket string) (runtimeapi.RuntimeServiceClient, func(), error) {
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, nil, err
	}
	return runtimeapi.NewRuntimeServiceClient(conn), func() { _ = conn.Close() }, nil
}

// criReady reports whether containerd answers CRI on socket.
func criReady(ctx context.Context, socket string) (bool, error) {
	if _, err := os.Stat(socket); err != nil {
		return false, err
	}
	c, closeConn, err := criClient(socket)
	if err != nil {
		return false, err
	}
	defer closeConn()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err = c.Version(ctx, &runtimeapi.VersionRequest{})
	return err == nil, err
}

// removeAllSandboxes stops and removes every pod sandbox through CRI, the
// way the kubelet would: containerd kills the containers, runs the CNI DEL
// (which takes the pod's veth and address back) and removes the network
// namespace.
func removeAllSandboxes(ctx context.Context, socket string) error {
	if _, err := os.Stat(socket); err != nil {
		return nil
	}
	c, closeConn, err := criClient(socket)
	if err != nil {
		return err
	}
	defer closeConn()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	list, err := c.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return fmt.Errorf("listing pod sandboxes: %w", err)
	}
	var errs []error
	for _, s := range list.Items {
		if _, err := c.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: s.Id}); err != nil {
			errs = append(errs, fmt.Errorf("stopping sandbox of %s/%s: %w", s.Metadata.GetNamespace(), s.Metadata.GetName(), err))
			continue
		}
		if _, err := c.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: s.Id}); err != nil {
			errs = append(errs, fmt.Errorf("removing sandbox of %s/%s: %w", s.Metadata.GetNamespace(), s.Metadata.GetName(), err))
		}
	}
	return errors.Join(errs...)
}

// killContainers ends, through runc, every container still running under
// the node's runc root (after containerd died without stopping them).
func killContainers(ctx context.Context, runcRoot string) {
	dirs, _ := filepath.Glob(filepath.Join(runcRoot, "*"))
	for _, nsDir := range dirs {
		out, err := run(ctx, "runc", "--root", nsDir, "list", "-q")
		if err != nil {
			continue
		}
		for _, id := range strings.Fields(out) {
			_, _ = run(ctx, "runc", "--root", nsDir, "kill", id, "KILL")
			_, _ = run(ctx, "runc", "--root", nsDir, "delete", "-f", id)
		}
	}
}

func imageClient(socket string) (runtimeapi.ImageServiceClient, error) {
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	return runtimeapi.NewImageServiceClient(conn), nil
}
