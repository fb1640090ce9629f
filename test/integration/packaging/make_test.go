package packaging

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/ml-operator/ml-operator/test/testutil"
)

// TestMakeDeployUndeployInstallUninstall runs the make targets against
// envtest's API server: deploy installs the operator with IMG, undeploy
// removes it but keeps the CRDs, uninstall removes the CRDs, install brings
// them back.
func TestMakeDeployUndeployInstallUninstall(t *testing.T) {
	root := testutil.RepoRoot()
	env, err := testutil.StartEnv(testutil.EnvOptions{
		ExtraCRDDirs: []string{filepath.Join(root, "test", "integration", "packaging", "testdata", "crds", "cert-manager")},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	admin, err := env.Env.AddUser(envtest.User{Name: "packaging-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := admin.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfigPath := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfigPath, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	const img = "registry.example.com/team/ml-operator:v9.9.9"
	run := func(target string) {
		t.Helper()
		// envtest runs no namespace controller, so a deleted namespace never
		// goes away: do not wait for it.
		cmd := exec.Command("make", "-s", target, "IMG="+img, "DELETE_FLAGS=--wait=false",
			"DEPLOY_KUBECTL="+filepath.Join(root, "bin", "kubectl"))
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfigPath)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("make %s: %v\n%s", target, err, out)
		}
	}
	ctx := context.Background()
	c, err := client.New(env.Config, client.Options{Scheme: manifestScheme()})
	if err != nil {
		t.Fatal(err)
	}
	deployment := client.ObjectKey{Namespace: installNamespace, Name: "ml-operator-controller-manager"}
	crdPresent := func(name string) bool {
		err := c.Get(ctx, client.ObjectKey{Name: name}, &apiextensionsv1.CustomResourceDefinition{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return err == nil
	}

	run("deploy")
	d := &appsv1.Deployment{}
	if err := c.Get(ctx, deployment, d); err != nil {
		t.Fatalf("after make deploy: %v", err)
	}
	if got := d.Spec.Template.Spec.Containers[0].Image; got != img {
		t.Errorf("make deploy IMG=%s deployed image %s", img, got)
	}
	tj := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Get(ctx, client.ObjectKey{Name: "trainingjobs.ml.example.com"}, tj); err != nil {
		t.Fatal(err)
	}
	if tj.Spec.Conversion == nil || tj.Spec.Conversion.Strategy != apiextensionsv1.WebhookConverter {
		t.Error("make deploy did not install the TrainingJob conversion webhook")
	}

	run("undeploy")
	if err := c.Get(ctx, deployment, &appsv1.Deployment{}); !apierrors.IsNotFound(err) {
		t.Errorf("after make undeploy the manager Deployment is still there (err %v)", err)
	}
	for _, crd := range []string{"trainingjobs.ml.example.com", "modeldeployments.ml.example.com"} {
		if !crdPresent(crd) {
			t.Errorf("make undeploy deleted CRD %s; it must keep the CRDs and with them users' objects", crd)
		}
	}

	run("uninstall")
	testutil.Eventually(t, func() bool {
		return !crdPresent("trainingjobs.ml.example.com") && !crdPresent("modeldeployments.ml.example.com")
	}, "make uninstall did not remove the CRDs")

	run("install")
	for _, crd := range []string{"trainingjobs.ml.example.com", "modeldeployments.ml.example.com"} {
		if !crdPresent(crd) {
			t.Errorf("make install did not create CRD %s", crd)
		}
	}
}
