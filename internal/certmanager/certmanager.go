// Package certmanager runs cert-manager's own controllers and CA injector
// (github.com/cert-manager/cert-manager v1.21.2, the version the operator's
// go.mod pins) inside the calling process. cert-manager's binaries are not
// on the Go module proxy; its main module exports the controllers, so the
// real node can run `make deploy` (config/default: a self-signed Issuer, the
// webhook serving Certificate and CA injection into the webhook
// configurations and the TrainingJob CRD) without a cert-manager image.
//
// Only what config/default uses runs: the Certificate controllers, the
// CertificateRequest approver, the self-signed and CA issuers, and the CA
// injector for webhook configurations and CRDs. No ACME, no Vault, no
// Venafi, no webhook (the CRDs' schemas validate).
package certmanager

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/cert-manager/cert-manager/pkg/controller"
	"github.com/cert-manager/cert-manager/pkg/controller/cainjector"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	"github.com/cert-manager/cert-manager/pkg/util"

	// Each controller and issuer registers itself with cert-manager by import.
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/ca"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/selfsigned"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/revisionmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	_ "github.com/cert-manager/cert-manager/pkg/controller/clusterissuers"
	_ "github.com/cert-manager/cert-manager/pkg/controller/issuers"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"
)

// Module is cert-manager's module; its CRDs are deploy/crds in it.
const Module = "github.com/cert-manager/cert-manager"

// CRDFiles lists cert-manager's CRD manifests from the module cache (the
// version go.mod pins), found with `go list -m`, run in dir (inside the
// operator's module).
func CRDFiles(dir string) ([]string, error) {
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", Module)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list -m %s: %w", Module, err)
	}
	files, err := filepath.Glob(filepath.Join(strings.TrimSpace(string(out)), "deploy", "crds", "*.yaml"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no CRDs in %s/deploy/crds", strings.TrimSpace(string(out)))
	}
	return files, nil
}

// Run runs the controllers and the CA injector against the cluster of
// kubeconfig until ctx ends. It returns once everything has started; done
// closes when all of it has stopped.
func Run(ctx context.Context, kubeconfig string) (done <-chan struct{}, err error) {
	factory, err := controller.NewContextFactory(ctx, controller.ContextOptions{
		Kubeconfig:         kubeconfig,
		KubernetesAPIQPS:   50,
		KubernetesAPIBurst: 100,
		IssuerOptions:      controller.IssuerOptions{ClusterResourceNamespace: "cert-manager"},
		CertificateOptions: controller.CertificateOptions{
			CertificateRequestMinimumBackoffDuration: time.Minute,
			CertificateRequestMaximumBackoffDuration: time.Hour,
		},
	})
	if err != nil {
		return nil, fmt.Errorf("cert-manager context: %w", err)
	}
	var ifaces []controller.Interface
	for name, construct := range controller.Known() {
		iface, err := construct(factory)
		if err != nil {
			return nil, fmt.Errorf("cert-manager controller %s: %w", name, err)
		}
		ifaces = append(ifaces, iface)
	}
	cctx, err := factory.Build()
	if err != nil {
		return nil, err
	}
	finished := make(chan error, len(ifaces)+1)
	for _, iface := range ifaces {
		go func() { finished <- iface.Run(2, ctx) }()
	}
	cctx.KubeSharedInformerFactory.Start(ctx.Done())
	cctx.SharedInformerFactory.Start(ctx.Done())
	if cctx.HTTP01ResourceMetadataInformersFactory != nil {
		cctx.HTTP01ResourceMetadataInformersFactory.Start(ctx.Done())
	}
	if cctx.GWShared != nil {
		cctx.GWShared.Start(ctx.Done())
	}

	mgr, err := injectorManager(kubeconfig)
	if err != nil {
		return nil, err
	}
	if err := cainjector.RegisterAllInjectors(ctx, mgr, cainjector.SetupOptions{
		EnableCertificatesDataSource: true,
		EnabledReconcilersFor: map[string]bool{
			"mutatingwebhookconfiguration":   true,
			"validatingwebhookconfiguration": true,
			"customresourcedefinition":       true,
		},
	}); err != nil {
		return nil, fmt.Errorf("cainjector: %w", err)
	}
	go func() {
		err := mgr.Start(ctx)
		if err != nil {
			fmt.Fprintf(os.Stderr, "cert-manager cainjector stopped: %v\n", err)
		}
		finished <- err
	}()

	all := make(chan struct{})
	go func() {
		var errs []error
		for range len(ifaces) + 1 {
			if err := <-finished; err != nil && !errors.Is(err, context.Canceled) {
				errs = append(errs, err)
			}
		}
		if len(errs) > 0 {
			fmt.Fprintf(os.Stderr, "cert-manager stopped with errors: %v\n", errors.Join(errs...))
		}
		close(all)
	}()
	return all, nil
}

// injectorManager is the controller-runtime manager the CA injector runs
// in, with cert-manager's own cache settings: Secrets are read directly,
// never cached whole.
func injectorManager(kubeconfig string) (manager.Manager, error) {
	cfg, err := restConfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, admissionregistrationv1.AddToScheme, cmapi.AddToScheme,
	} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	return manager.New(cfg, manager.Options{
		Logger:                 klog.NewKlogr().WithName("cainjector"),
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Client: ctrl.Options{Cache: &ctrl.CacheOptions{
			DisableFor: []ctrl.Object{&corev1.Secret{}},
		}},
	})
}

// restConfig carries cert-manager's user agent: the injector derives its
// server-side apply field manager from it (an empty one is refused).
func restConfig(kubeconfig string) (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	return util.RestConfigWithUserAgent(cfg, "cainjector"), nil
}
