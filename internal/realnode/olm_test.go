package realnode

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// olmYAML has the shape of OLM's deploy/upstream/quickstart/olm.yaml.
const olmYAML = `
apiVersion: v1
kind: Namespace
metadata:
  name: olm
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: olm-operator
  namespace: olm
spec:
  selector:
    matchLabels: {app: olm-operator}
  template:
    metadata:
      labels: {app: olm-operator}
    spec:
      containers:
      - name: olm-operator
        command: [/bin/olm]
        args: [--namespace, $(OPERATOR_NAMESPACE)]
        image: quay.io/operator-framework/olm@sha256:e74b2ac57963c7f3ba19122a8c31c9f2a0deb3c0c5cac9e5323ccffd0ca198ed
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: catalog-operator
  namespace: olm
spec:
  selector:
    matchLabels: {app: catalog-operator}
  template:
    metadata:
      labels: {app: catalog-operator}
    spec:
      containers:
      - name: catalog-operator
        command: [/bin/catalog]
        args:
        - '-namespace'
        - olm
        - -configmapServerImage=quay.io/operator-framework/configmap-operator-registry:latest
        - -util-image
        - '  quay.io/operator-framework/olm@sha256:e74b2ac57963c7f3ba19122a8c31c9f2a0deb3c0c5cac9e5323ccffd0ca198ed'
        image: quay.io/operator-framework/olm@sha256:e74b2ac57963c7f3ba19122a8c31c9f2a0deb3c0c5cac9e5323ccffd0ca198ed
---
apiVersion: operators.coreos.com/v1alpha1
kind: ClusterServiceVersion
metadata:
  name: packageserver
  namespace: olm
---
apiVersion: operators.coreos.com/v1alpha1
kind: CatalogSource
metadata:
  name: operatorhubio-catalog
  namespace: olm
`

func TestOLMQuickstart(t *testing.T) {
	objs, err := OLMQuickstart([]byte(olmYAML))
	require.NoError(t, err)
	var names []string
	for _, o := range objs {
		names = append(names, o.GetKind()+"/"+o.GetName())
	}
	// The packageserver CSV and the community catalog are left out.
	if d := cmp.Diff([]string{"Namespace/olm", "Deployment/olm-operator", "Deployment/catalog-operator"}, names); d != "" {
		t.Errorf("objects (-want +got):\n%s", d)
	}
	container := func(u *unstructured.Unstructured) map[string]any {
		cs, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
		require.Len(t, cs, 1)
		return cs[0].(map[string]any)
	}
	olm := container(objs[1])
	if d := cmp.Diff(map[string]any{
		"name":      "olm-operator",
		"command":   []any{"/bin/olm"},
		"args":      []any{"--namespace", "$(OPERATOR_NAMESPACE)"},
		"image":     OLMImage,
		"resources": map[string]any{},
	}, olm); d != "" {
		t.Errorf("olm-operator container (-want +got):\n%s", d)
	}
	catalog := container(objs[2])
	// The util image's value (on its own line, with leading blanks, as
	// upstream writes it) is replaced, the opm image is named, and every
	// flag has two dashes (the catalog command's pflag reads `-namespace`
	// as shorthands).
	if d := cmp.Diff([]any{
		"--namespace", "olm",
		"--configmapServerImage=quay.io/operator-framework/configmap-operator-registry:latest",
		"--util-image=" + OLMImage, "--opmImage=" + OPMImage,
	}, catalog["args"]); d != "" {
		t.Errorf("catalog-operator args (-want +got):\n%s", d)
	}
	require.Equal(t, OLMImage, catalog["image"])
}

func TestOLMQuickstartNeedsBothOperators(t *testing.T) {
	_, err := OLMQuickstart([]byte("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: olm\n"))
	require.ErrorContains(t, err, "no Deployment olm-operator")
}

// The 0.1.0 bundle directory written from the catalog holds the objects
// the catalog rendered for it, and the bundle image holds that directory.
func TestWriteBundleFromCatalog(t *testing.T) {
	out := t.TempDir()
	annotations := []byte("annotations:\n  operators.operatorframework.io.bundle.package.v1: ml-operator\n")
	require.NoError(t, WriteBundleFromCatalog("../../catalog/ml-operator/bundle-v0.1.0.yaml", "ml-operator.v0.1.0", annotations, out))
	entries, err := os.ReadDir(filepath.Join(out, "manifests"))
	require.NoError(t, err)
	var files []string
	for _, e := range entries {
		files = append(files, e.Name())
	}
	require.Contains(t, files, "ml-operator.v0.1.0_clusterserviceversion.yaml")
	require.Contains(t, files, "trainingjobs.ml.example.com_customresourcedefinition.yaml")
	csv, err := os.ReadFile(filepath.Join(out, "manifests", "ml-operator.v0.1.0_clusterserviceversion.yaml"))
	require.NoError(t, err)
	require.Contains(t, string(csv), "version: 0.1.0")
	require.Contains(t, string(csv), "image: ghcr.io/ml-operator/ml-operator:v0.1.0")
	got, err := os.ReadFile(filepath.Join(out, "metadata", "annotations.yaml"))
	require.NoError(t, err)
	require.Equal(t, annotations, got)

	spec, err := BundleImageSpec("ghcr.io/ml-operator/ml-operator-bundle:v0.1.0", out)
	require.NoError(t, err)
	require.Len(t, spec.Files, len(files)+1)
	for _, f := range spec.Files {
		require.Regexp(t, `^/(manifests/[^/]+\.yaml|metadata/annotations\.yaml)$`, f.Path)
	}

	require.ErrorContains(t, WriteBundleFromCatalog("../../catalog/ml-operator/bundle-v0.1.0.yaml", "ml-operator.v9.9.9", annotations, t.TempDir()),
		"no olm.bundle ml-operator.v9.9.9")
}
