// Package testutil holds what every test suite shares: the envtest harness
// (a real kube-apiserver and etcd from bin/), the scheme, fluent object
// wrappers and polling helpers.
package testutil

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/ml-operator/ml-operator/cmd/manager"
)

// RepoRoot returns the repository root (the directory holding go.mod).
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// Env is a running envtest control plane.
type Env struct {
	Env    *envtest.Environment
	Config *rest.Config
	// Client talks to the API server directly (no cache), so assertions see
	// what the server has.
	Client client.Client
}

// EnvOptions tune StartEnv.
type EnvOptions struct {
	// ExtraCRDDirs are installed beside the project's CRDs (test fixtures such
	// as the Gateway API or Istio CRDs).
	ExtraCRDDirs []string
	// Webhooks installs the project's webhook configurations from config/webhook
	// and serves them from the test process.
	Webhooks bool
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
	}
	if o.Webhooks {
		env.WebhookInstallOptions = envtest.WebhookInstallOptions{
			Paths: []string{filepath.Join(root, "config", "webhook")},
		}
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("starting envtest: %w", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: manager.NewScheme()})
	if err != nil {
		_ = env.Stop()
		return nil, fmt.Errorf("creating client: %w", err)
	}
	return &Env{Env: env, Config: cfg, Client: c}, nil
}

// Stop stops the control plane.
func (e *Env) Stop() error { return e.Env.Stop() }
