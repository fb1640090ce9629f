package packaging

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ml-operator/ml-operator/test/testutil"
)

// warningCollector records the API server's warnings (Pod Security
// violations of workload templates arrive as warnings).
type warningCollector struct {
	mu       sync.Mutex
	warnings []string
}

func (w *warningCollector) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.warnings = append(w.warnings, text)
}

func (w *warningCollector) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.warnings
	w.warnings = nil
	return out
}

// TestDefaultAppliesToARealAPIServer creates every object of config/default
// on envtest's kube-apiserver (with cert-manager's CRDs installed): the
// server's validation accepts all of them, and the Pod Security admission of
// the restricted namespace raises no warning for the manager Deployment.
func TestDefaultAppliesToARealAPIServer(t *testing.T) {
	env, err := testutil.StartEnv(testutil.EnvOptions{
		ExtraCRDDirs: []string{filepath.Join(testutil.RepoRoot(), "test", "integration", "packaging", "testdata", "crds", "cert-manager")},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	warnings := &warningCollector{}
	cfg := rest.CopyConfig(env.Config)
	cfg.WarningHandler = warnings
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	objs := buildAndDecode(t, "config/default")
	// Namespace and CRDs first, as kubectl's apply order does.
	rank := func(kind string) int {
		switch kind {
		case "Namespace":
			return 0
		case "CustomResourceDefinition":
			return 1
		}
		return 2
	}
	for pass := 0; pass <= 2; pass++ {
		for _, o := range objs {
			if rank(o.GVK.Kind) != pass {
				continue
			}
			u := o.Object.DeepCopy()
			if err := createOrReplace(ctx, c, u); err != nil {
				t.Errorf("%s %s/%s: %v", o.GVK.Kind, o.NS, o.Name, err)
				continue
			}
			for _, w := range warnings.take() {
				t.Errorf("%s %s: API server warning: %s", o.GVK.Kind, o.Name, w)
			}
		}
	}

	// The check above only means something if this server warns about Pod
	// Security at all: a copy of the manager that allows privilege escalation
	// must be reported.
	d := onlyOne[*appsv1.Deployment](t, objs).DeepCopy()
	d.Name += "-escalating"
	d.ResourceVersion = ""
	escalate := true
	d.Spec.Template.Spec.Containers[0].SecurityContext.AllowPrivilegeEscalation = &escalate
	if err := c.Create(ctx, d, client.DryRunAll); err != nil {
		t.Fatalf("dry-run of an escalating Deployment: %v", err)
	}
	got := strings.Join(warnings.take(), "\n")
	if !strings.Contains(got, "restricted") || !strings.Contains(got, "allowPrivilegeEscalation") {
		t.Errorf("the API server did not warn about privilege escalation in the restricted namespace; warnings: %q", got)
	}
}

// createOrReplace creates the object, or replaces the existing one (envtest
// installed the CRDs already).
func createOrReplace(ctx context.Context, c client.Client, u *unstructured.Unstructured) error {
	existing := &unstructured.Unstructured{}
	existing.SetGroupVersionKind(u.GroupVersionKind())
	err := c.Get(ctx, client.ObjectKeyFromObject(u), existing)
	if err == nil {
		u.SetResourceVersion(existing.GetResourceVersion())
		return c.Update(ctx, u)
	}
	return c.Create(ctx, u)
}
