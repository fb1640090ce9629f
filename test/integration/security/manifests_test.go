package security_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/ml-operator/ml-operator/test/testutil"
)

// The two ways the operator is installed: kustomize (config/default, and
// config/manager on its own) and OLM (the bundle's ClusterServiceVersion).
// Every posture check covers both.

// kustomizeBuild renders a directory of the repository with bin/kustomize,
// as `make deploy` does.
func kustomizeBuild(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	root := testutil.RepoRoot()
	bin := filepath.Join(root, "bin", "kustomize")
	_, err := os.Stat(bin)
	require.NoError(t, err, "bin/kustomize is missing: run `make kustomize`")
	cmd := exec.Command(bin, "build", filepath.Join(root, dir))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "kustomize build %s: %s", dir, stderr.String())
	objs, err := testutil.DecodeManifests(out)
	require.NoError(t, err)
	require.NotEmpty(t, objs, "%s builds nothing", dir)
	return objs
}

// typed converts every object of kind into T.
func typed[T any](t *testing.T, objs []*unstructured.Unstructured, kind string) []*T {
	t.Helper()
	var out []*T
	for _, o := range objs {
		if o.GetKind() != kind {
			continue
		}
		v := new(T)
		require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, v, true), "%s %s", kind, o.GetName())
		out = append(out, v)
	}
	return out
}

// loadCSV reads the bundle's ClusterServiceVersion.
func loadCSV(t *testing.T) *operatorsv1alpha1.ClusterServiceVersion {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(testutil.RepoRoot(), "bundle", "manifests", "*.clusterserviceversion.yaml"))
	require.NoError(t, err)
	require.Len(t, paths, 1, "want one ClusterServiceVersion in bundle/manifests")
	data, err := os.ReadFile(paths[0])
	require.NoError(t, err)
	csv := &operatorsv1alpha1.ClusterServiceVersion{}
	require.NoError(t, yaml.UnmarshalStrict(data, csv))
	return csv
}

// managerPod is the manager's pod template as one install path creates it.
type managerPod struct {
	source   string
	template corev1.PodTemplateSpec
}

// managerPods are the manager's pod templates of every install path.
func managerPods(t *testing.T) []managerPod {
	t.Helper()
	var pods []managerPod
	for _, dir := range []string{"config/default", "config/manager"} {
		ds := typed[appsv1.Deployment](t, kustomizeBuild(t, dir), "Deployment")
		require.Len(t, ds, 1, "%s: want the manager Deployment only", dir)
		pods = append(pods, managerPod{dir, ds[0].Spec.Template})
	}
	csv := loadCSV(t)
	deployments := csv.Spec.InstallStrategy.StrategySpec.DeploymentSpecs
	require.Len(t, deployments, 1, "the CSV installs one Deployment")
	pods = append(pods, managerPod{"bundle CSV", deployments[0].Spec.Template})
	return pods
}

// managerContainer is the container named manager.
func managerContainer(t *testing.T, spec *corev1.PodSpec) *corev1.Container {
	t.Helper()
	for i := range spec.Containers {
		if spec.Containers[i].Name == "manager" {
			return &spec.Containers[i]
		}
	}
	t.Fatalf("no container named manager in %v", spec.Containers)
	return nil
}
