// Package testutil holds what every test suite shares: the envtest harness
// (a real kube-apiserver and etcd from bin/), the scheme, fluent object
// wrappers and polling helpers.
package testutil

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/ml-operator/ml-operator/internal/manager"
	"github.com/ml-operator/ml-operator/webhooks"
)

// modulePath is the main module's path, on the first line of its go.mod.
const modulePath = "github.com/ml-operator/ml-operator"

// RepoRoot returns the repository root (the directory holding the main
// module's go.mod): the nearest directory at or above the working
// directory whose go.mod declares the module (go test runs a package's
// tests in its directory; hack/tools/* hold go.mods of other modules). It
// does not read the source path compiled into the binary, which -trimpath
// (as .ci/run builds) removes.
func RepoRoot() string {
	dir, err := os.Getwd()
	if err != nil {
		panic(fmt.Sprintf("testutil.RepoRoot: %v", err))
	}
	for d := dir; ; d = filepath.Dir(d) {
		if b, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil {
			first, _, _ := strings.Cut(string(b), "\n")
			if strings.TrimSpace(first) == "module "+modulePath {
				return d
			}
		}
		if filepath.Dir(d) == d {
			panic(fmt.Sprintf("testutil.RepoRoot: no go.mod of %s at or above %s", modulePath, dir))
		}
	}
}

// Env is a running envtest control plane.
type Env struct {
	Env    *envtest.Environment
	Config *rest.Config
	// Client talks to the API server directly (no cache), so assertions see
	// what the server has.
	Client client.Client

	// stopWebhooks ends the webhook server started for EnvOptions.Webhooks.
	stopWebhooks context.CancelFunc
}

// EnvOptions tune StartEnv.
type EnvOptions struct {
	// ExtraCRDDirs are installed beside the project's CRDs (test fixtures such
	// as the Gateway API or Istio CRDs).
	ExtraCRDDirs []string
	// Webhooks installs the project's webhook configurations from config/webhook
	// and the TrainingJob CRD's conversion webhook, and serves them (with the
	// operator's default framework images) from the test process.
	Webhooks bool
	// DefaultImages replaces the webhooks' per-framework default images
	// (manager.DefaultFrameworkImages() when nil).
	DefaultImages map[string]string
	// APIServerFlags are extra kube-apiserver flags, without the leading
	// dashes: {"watch-cache": "false"}.
	APIServerFlags map[string]string
	// WrapWebhook, when set, wraps the handler of every webhook path the
	// test process serves (EnvOptions.Webhooks): a suite can see each
	// request the API server sends, /convert included.
	WrapWebhook func(path string, h http.Handler) http.Handler
}

// StartEnv starts kube-apiserver and etcd from bin/ (or KUBEBUILDER_ASSETS)
// with the project's CRDs installed. Build them with `make envtest-tools`.
func StartEnv(o EnvOptions) (*Env, error) {
	root := RepoRoot()
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		assets = filepath.Join(root, "bin")
	}
	if _, err := os.Stat(filepath.Join(assets, "kube-apiserver")); err != nil {
		return nil, fmt.Errorf("kube-apiserver not found in %s: run `make envtest-tools` (or `make test`): %w", assets, err)
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     append([]string{filepath.Join(root, "config", "crd", "bases")}, o.ExtraCRDDirs...),
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: assets,
		// A deadline, not a wait: envtest's default of 10 s for the CRDs
		// to be served ran out at a load average of 50 on the shared
		// 2-core machine.
		CRDInstallOptions: envtest.CRDInstallOptions{MaxTime: 2 * time.Minute},
	}
	for flag, value := range o.APIServerFlags {
		env.ControlPlane.GetAPIServer().Configure().Set(flag, value)
	}
	if o.Webhooks {
		env.WebhookInstallOptions = envtest.WebhookInstallOptions{
			Paths: []string{filepath.Join(root, "config", "webhook")},
		}
		// With our scheme, envtest points the CRD conversion of every type
		// with a hub and spokes (TrainingJob) at the local webhook server.
		env.Scheme = manager.NewScheme()
	}
	cfg, err := env.Start()
	if err != nil {
		// Start can fail after kube-apiserver and etcd are up (a CRD the
		// server refuses, say): stop them, or they outlive the test binary.
		_ = env.Stop()
		return nil, fmt.Errorf("starting envtest: %w", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: manager.NewScheme()})
	if err != nil {
		_ = env.Stop()
		return nil, fmt.Errorf("creating client: %w", err)
	}
	e := &Env{Env: env, Config: cfg, Client: c}
	if o.Webhooks {
		images := o.DefaultImages
		if images == nil {
			images = manager.DefaultFrameworkImages()
		}
		if e.stopWebhooks, err = serveWebhooks(cfg, &env.WebhookInstallOptions, images, o.WrapWebhook); err != nil {
			_ = env.Stop()
			return nil, err
		}
	}
	return e, nil
}

// serveWebhooks runs the project's webhooks where envtest told the API server
// to find them, and returns once they answer TLS connections.
func serveWebhooks(cfg *rest.Config, wo *envtest.WebhookInstallOptions, images map[string]string, wrap func(string, http.Handler) http.Handler) (context.CancelFunc, error) {
	opts := ManagerOptions()
	opts.WebhookServer = webhook.NewServer(webhook.Options{
		Host:    wo.LocalServingHost,
		Port:    wo.LocalServingPort,
		CertDir: wo.LocalServingCertDir,
	})
	if wrap != nil {
		opts.WebhookServer = wrappingServer{Server: opts.WebhookServer, wrap: wrap}
	}
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		return nil, fmt.Errorf("creating the webhook manager: %w", err)
	}
	if err := webhooks.SetupWithManager(mgr, webhooks.Options{DefaultImages: images}); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { _ = mgr.Start(ctx) }()

	addr := net.JoinHostPort(wo.LocalServingHost, strconv.Itoa(wo.LocalServingPort))
	deadline := time.Now().Add(Timeout)
	for {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // only checks the server is up
		if err == nil {
			_ = conn.Close()
			return cancel, nil
		}
		if time.Now().After(deadline) {
			cancel()
			return nil, fmt.Errorf("webhook server at %s did not come up: %w", addr, err)
		}
		time.Sleep(Interval)
	}
}

// wrappingServer registers every webhook wrapped (EnvOptions.WrapWebhook).
type wrappingServer struct {
	webhook.Server
	wrap func(path string, h http.Handler) http.Handler
}

func (s wrappingServer) Register(path string, h http.Handler) {
	s.Server.Register(path, s.wrap(path, h))
}

// Stop stops the webhook server, if any, and the control plane.
func (e *Env) Stop() error {
	if e.stopWebhooks != nil {
		e.stopWebhooks()
	}
	return e.Env.Stop()
}
