package packaging

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	certmanagerv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"

	"github.com/ml-operator/ml-operator/test/testutil"
)

// installNamespace is where config/default installs the operator.
const installNamespace = "ml-operator-system"

// monitoringGroup holds the Prometheus Operator kinds, which are checked as
// unstructured objects (their Go types are not a dependency of the project).
const monitoringGroup = "monitoring.coreos.com"

// manifestScheme knows every kind the kustomize install may contain: the
// built-in kinds, CRDs and cert-manager's Certificate and Issuer.
func manifestScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	utilruntime.Must(certmanagerv1.AddToScheme(s))
	return s
}

// builtObject is one object of a kustomize build: typed when the scheme knows
// its kind, unstructured for the monitoring kinds.
type builtObject struct {
	GVK    schema.GroupVersionKind
	Name   string
	NS     string
	Typed  runtime.Object
	Object *unstructured.Unstructured
}

// kustomizeBuild runs bin/kustomize on a directory of the repository.
func kustomizeBuild(t *testing.T, dir string) []byte {
	t.Helper()
	root := testutil.RepoRoot()
	bin := filepath.Join(root, "bin", "kustomize")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("bin/kustomize is missing: run `make kustomize`: %v", err)
	}
	cmd := exec.Command(bin, "build", filepath.Join(root, dir))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kustomize build %s: %v\n%s", dir, err, stderr.String())
	}
	return out
}

// decodeBuild decodes every document strictly (unknown or duplicate fields
// are errors) into the scheme's Go types; monitoring kinds stay unstructured.
// A kind nobody knows is an error too.
func decodeBuild(data []byte) ([]builtObject, error) {
	objs, err := testutil.DecodeManifests(data)
	if err != nil {
		return nil, err
	}
	scheme := manifestScheme()
	strict := serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()
	var out []builtObject
	for _, u := range objs {
		gvk := u.GroupVersionKind()
		b := builtObject{GVK: gvk, Name: u.GetName(), NS: u.GetNamespace(), Object: u}
		switch {
		case scheme.Recognizes(gvk):
			raw, err := yaml.Marshal(u.Object)
			if err != nil {
				return nil, err
			}
			typed, _, err := strict.Decode(raw, nil, nil)
			if err != nil {
				return nil, fmt.Errorf("%s %s: %w", gvk.Kind, u.GetName(), err)
			}
			b.Typed = typed
		case gvk.Group == monitoringGroup:
		default:
			return nil, fmt.Errorf("%s %s: kind %s is not in the scheme", gvk.Kind, u.GetName(), gvk)
		}
		out = append(out, b)
	}
	return out, nil
}

// buildAndDecode is kustomizeBuild plus decodeBuild, failing the test on error.
func buildAndDecode(t *testing.T, dir string) []builtObject {
	t.Helper()
	objs, err := decodeBuild(kustomizeBuild(t, dir))
	if err != nil {
		t.Fatalf("%s: %v", dir, err)
	}
	if len(objs) == 0 {
		t.Fatalf("%s built no objects", dir)
	}
	return objs
}

// typedOf returns the typed objects of type T in a build.
func typedOf[T runtime.Object](objs []builtObject) []T {
	var out []T
	for _, o := range objs {
		if v, ok := o.Typed.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

// onlyOne returns the single typed object of type T, failing otherwise.
func onlyOne[T runtime.Object](t *testing.T, objs []builtObject) T {
	t.Helper()
	all := typedOf[T](objs)
	if len(all) != 1 {
		var zero T
		t.Fatalf("want exactly one %T in the build, got %d", zero, len(all))
	}
	return all[0]
}

// unstructuredOf returns the objects of one kind, as unstructured.
func unstructuredOf(objs []builtObject, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GVK.Kind == kind {
			out = append(out, o.Object)
		}
	}
	return out
}
