package bench

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ml-operator/ml-operator/internal/freeport"
	"github.com/ml-operator/ml-operator/internal/localcluster"
	"github.com/ml-operator/ml-operator/internal/manifests"
)

// The no-op webhook is admission's floor in the same run: a program that
// allows everything (test/bench/noopwebhook), registered beside each of the
// manager's admission webhooks for the same resources and operations, so
// the API server calls it for the same requests, under the same load.
// Whatever time its calls take is not the manager's.

// NoopPrefix starts the name of every no-op twin of one of our webhooks
// (noop-mtrainingjob.ml.example.com) and of their configurations.
const NoopPrefix = "noop-"

// isNoop reports whether an admission webhook's name is a no-op twin's.
func isNoop(name string) bool { return strings.HasPrefix(name, NoopPrefix) }

// startNoopWebhook builds and runs the no-op webhook on a free port of
// 127.0.0.1 and registers a twin of each webhook in ours (the names the
// manager's webhooks were installed under). It returns the twins' names
// and how to stop the server.
func startNoopWebhook(ctx context.Context, o EnvOptions, c client.Client, ours []string) (names []string, stop func(), err error) {
	bin := filepath.Join(o.Workdir, "noopwebhook")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./test/bench/noopwebhook")
	build.Dir = o.RepoRoot
	if out, err := build.CombinedOutput(); err != nil {
		return nil, nil, fmt.Errorf("building the no-op webhook: %w: %s", err, out)
	}
	cert, err := localcluster.WriteServingCert(filepath.Join(o.Workdir, "noop-webhook-certs"))
	if err != nil {
		return nil, nil, err
	}
	port, err := freeport.Port()
	if err != nil {
		return nil, nil, err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	logFile, err := os.Create(filepath.Join(o.Workdir, "noopwebhook.log"))
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.Command(bin, "--addr="+addr,
		"--cert="+filepath.Join(cert.Dir, "tls.crt"), "--key="+filepath.Join(cert.Dir, "tls.key"))
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM, Setpgid: true}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, nil, fmt.Errorf("starting the no-op webhook: %w", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); logFile.Close(); close(exited) }()
	stop = func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}
	defer func() {
		if err != nil {
			stop()
		}
	}()
	if _, err := waitUntil(ctx, 30*time.Second, "the no-op webhook to serve TLS", func() bool {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // only checks the server is up
		if err == nil {
			conn.Close()
		}
		return err == nil
	}); err != nil {
		return nil, nil, err
	}

	configs, err := manifests.Read(filepath.Join(o.RepoRoot, localcluster.WebhookManifests))
	if err != nil {
		return nil, nil, err
	}
	for _, obj := range configs {
		twins, err := noopTwins(obj, localcluster.Webhook{Port: port, CABundle: cert.CABundle}, ours)
		if err != nil {
			return nil, nil, err
		}
		if len(twins) == 0 {
			continue
		}
		if err := c.Create(ctx, obj); err != nil {
			return nil, nil, fmt.Errorf("registering the no-op webhooks %v: %w", twins, err)
		}
		names = append(names, twins...)
	}
	return names, stop, nil
}

// noopTwins turns one of our webhook configurations into its no-op twin in
// place: the same webhooks (rules, operations, match policy, timeouts,
// failure policy) for those in ours, renamed with NoopPrefix, calling w.
// It returns the twins' names.
func noopTwins(obj *unstructured.Unstructured, w localcluster.Webhook, ours []string) ([]string, error) {
	if err := localcluster.LocalWebhookConfig(obj, w); err != nil {
		return nil, err
	}
	kept, _ := localcluster.FilterWebhooks(obj, func(string) bool { return true })
	hooks, _, _ := unstructured.NestedSlice(obj.Object, "webhooks")
	var twins []any
	var names []string
	for i, h := range hooks {
		if !slices.Contains(ours, kept[i]) {
			continue
		}
		hook := h.(map[string]any)
		hook["name"] = NoopPrefix + kept[i]
		twins = append(twins, hook)
		names = append(names, NoopPrefix+kept[i])
	}
	obj.SetName(NoopPrefix + obj.GetName())
	obj.SetResourceVersion("")
	return names, unstructured.SetNestedSlice(obj.Object, twins, "webhooks")
}
