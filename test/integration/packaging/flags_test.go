package packaging

import (
	"flag"
	"io"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/ml-operator/ml-operator/internal/manager"
	"github.com/ml-operator/ml-operator/internal/storageinit"
)

// parseManagerArgs parses a manager container's args with the manager's real
// flag set, expanding $(VAR) references from the container's env the way the
// kubelet does.
func parseManagerArgs(t *testing.T, c corev1.Container) *manager.Options {
	t.Helper()
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	args := make([]string, 0, len(c.Args))
	for _, a := range c.Args {
		for name, value := range env {
			a = strings.ReplaceAll(a, "$("+name+")", value)
		}
		if strings.Contains(a, "$(") {
			t.Errorf("arg %q references a variable the container does not set", a)
		}
		args = append(args, a)
	}
	opts := manager.NewOptions()
	// Start without the built-in images, so the check below sees what the
	// args set.
	opts.DefaultImages = map[string]string{}
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	opts.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("the manager rejects its args %v: %v", args, err)
	}
	if fs.NArg() != 0 {
		t.Errorf("the manager ignores positional args %v", fs.Args())
	}
	return opts
}

// checkManagerOptions checks the settings both install paths rely on.
func checkManagerOptions(t *testing.T, c corev1.Container, opts *manager.Options) {
	t.Helper()
	if opts.MetricsBindAddress() != ":8443" || !opts.MetricsSecure {
		t.Errorf("metrics on %q secure=%v, want HTTPS on :8443", opts.MetricsBindAddress(), opts.MetricsSecure)
	}
	if opts.ProbeAddr != ":8081" || !opts.LeaderElect || !opts.EnableWebhooks {
		t.Errorf("probes %q, leader election %v, webhooks %v", opts.ProbeAddr, opts.LeaderElect, opts.EnableWebhooks)
	}
	// The profiler has no authentication: what ships serves none.
	if opts.PprofAddr != "" {
		t.Errorf("the profiler is served on %q; it has no authentication", opts.PprofAddr)
	}
	if opts.WebhookCertDir != webhookCertDir {
		t.Errorf("webhook certificates read from %q, want %q", opts.WebhookCertDir, webhookCertDir)
	}
	if !hasContainerPort(c, int32(opts.WebhookPort)) || opts.WebhookPort != webhookPort {
		t.Errorf("the manager serves webhooks on %d, the container declares %v", opts.WebhookPort, c.Ports)
	}
	for _, fw := range []string{"pytorch", "tensorflow", "xgboost", "jax"} {
		if img := opts.DefaultImages[fw]; img == "" || img != envValue(c, "RELATED_IMAGE_"+strings.ToUpper(fw)) {
			t.Errorf("default %s image %q does not come from RELATED_IMAGE_%s", fw, img, strings.ToUpper(fw))
		}
	}
	// The storage initializer's image is listed in relatedImages too, under
	// the name the manager would default to and the real node builds (in
	// the bundle by digest: TestProjectImagesArePinnedByDigest).
	repo, _, _ := strings.Cut(storageinit.DefaultImage, ":v")
	img := opts.StorageInitializerImage
	if img != envValue(c, "RELATED_IMAGE_STORAGE_INITIALIZER") || (img != storageinit.DefaultImage && !strings.HasPrefix(img, repo+"@sha256:")) {
		t.Errorf("storage initializer image %q: want RELATED_IMAGE_STORAGE_INITIALIZER = %s, or its repository by digest", img, storageinit.DefaultImage)
	}
}

func envValue(c corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

// TestManagerArgsParse runs the Deployment's args through the manager's flag
// parsing, for the kustomize install and for the OLM bundle.
func TestManagerArgsParse(t *testing.T) {
	t.Run("config/default", func(t *testing.T) {
		_, c := managerDeployment(t, buildAndDecode(t, "config/default"))
		checkManagerOptions(t, c, parseManagerArgs(t, c))
	})
	t.Run("bundle", func(t *testing.T) {
		spec := loadBundle(t).CSV.Spec.InstallStrategy.StrategySpec.DeploymentSpecs[0].Spec.Template.Spec
		c := spec.Containers[0]
		checkManagerOptions(t, c, parseManagerArgs(t, c))
	})
}
