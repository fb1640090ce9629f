//go:build e2e_olm

package e2eolm

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/remote"
	operatorsv1 "github.com/operator-framework/api/pkg/operators/v1"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ml-operator/ml-operator/internal/images"
	"github.com/ml-operator/ml-operator/internal/localcluster"
	"github.com/ml-operator/ml-operator/internal/realnode"
)

const (
	// CatalogImage is the Makefile's CATALOG_IMG.
	CatalogImage = "ghcr.io/ml-operator/ml-operator-catalog:latest"
	// CatalogSourceName is the CatalogSource the suite creates in OLM's
	// namespace (a global catalog: Subscriptions anywhere may use it).
	CatalogSourceName = "ml-operator-catalog"
	Package           = "ml-operator"
	Channel           = "stable"
	CSV010            = "ml-operator.v0.1.0"
	CSV020            = "ml-operator.v0.2.0"
	// Release010 is the manager's source at the commit whose bundle the
	// catalog holds as 0.1.0 (catalog/ml-operator/bundle-v0.1.0.yaml was
	// last rendered at f413c8e): the 0.1.0 manager image is built from it.
	// test/integration/packaging checks it is that commit's.
	Release010 = "test/e2eolm/testdata/ml-operator-0.1.0-src.tar.gz"
	// ProbeImage is the e2e-real suite's test image (./test/e2ereal/probe).
	ProbeImage = "ghcr.io/ml-operator/realnode-probe:e2e"
	// ModelServerImage is the project's model server under a tag of the
	// suite's own.
	ModelServerImage = "ghcr.io/ml-operator/model-server:e2eolm"
)

// Releases are the catalog's bundles: the names their manager and bundle
// images are pushed under (tags; 0.2.0's catalog entry names the same
// images by digest, which the suite checks the pushed images have).
var Releases = []struct {
	CSV, Catalog, Manager, Bundle, Source string
}{
	{CSV010, "catalog/ml-operator/bundle-v0.1.0.yaml", "ghcr.io/ml-operator/ml-operator:v0.1.0", "ghcr.io/ml-operator/ml-operator-bundle:v0.1.0", Release010},
	{CSV020, "catalog/ml-operator/bundle-v0.2.0.yaml", "ghcr.io/ml-operator/ml-operator:v0.2.0", "ghcr.io/ml-operator/ml-operator-bundle:v0.2.0", ""},
}

// work is the suite's namespace for user objects: they must outlive the
// upgrade and the uninstall.
var work string

// c knows OLM's kinds and the operator's.
var c client.Client

// TestOLM installs OLM, then the operator from the catalog with a manual
// approval, and checks that it works as OLM runs it. Each step needs the
// one before; the first that fails ends the test.
func TestOLM(t *testing.T) {
	s := localcluster.Scheme()
	utilruntime.Must(operatorsv1alpha1.AddToScheme(s))
	utilruntime.Must(operatorsv1.AddToScheme(s))
	var err error
	c, err = client.New(node.Config, client.Options{Scheme: s})
	require.NoError(t, err)
	work = namespace(t)

	for _, step := range []struct {
		name string
		run  func(*testing.T)
	}{
		{"OLMRuns", testOLMRuns},
		{"CatalogSourceServesTheCatalog", testCatalogSource},
		{"ManualApprovalInstalls0.1.0", testInstall010},
		{"WebhookWithOLMCertificateRefusesBadManifest", testWebhookRefuses},
		{"ConversionWebhookServesV1alpha1", testConversion},
		{"WorkInFlight", testWorkInFlight},
		{"UpgradeTo0.2.0WithWorkInFlight", testUpgrade},
		{"SamplesOfTheCSVReachTheirState", testSamples},
		{"ScorecardDescriptorTestsPass", testScorecard},
		{"UninstallLeavesUserObjectsAndPVCs", testUninstall},
	} {
		if !t.Run(step.name, step.run) {
			t.Logf("OLM diagnostics:\n%s", olmDiagnostics())
			return
		}
	}
}

// testOLMRuns builds OLM's images from bin/olm-v0.38.0 and installs OLM's
// quickstart manifests from its module; its two operators become Available.
func testOLMRuns(t *testing.T) {
	ctx := context.Background()
	bin := os.Getenv("OLM_BIN")
	if bin == "" {
		bin = filepath.Join(repo, "bin", "olm-"+realnode.OLMVersion)
	}
	dir, err := realnode.OLMModuleDir(ctx, repo)
	require.NoError(t, err)
	began := time.Now()
	require.NoError(t, node.InstallOLM(ctx, realnode.OLMOptions{BinDir: bin, ModuleDir: dir, Busybox: "/bin/busybox"}))
	t.Logf("OLM %s installed in %s", realnode.OLMVersion, time.Since(began).Round(100*time.Millisecond))

	// The catalog names a bundle image per release, and each bundle its
	// manager image: 0.1.0's manager is built from the source of its
	// bundle's commit, 0.2.0's from this tree. A bundle image holds what the
	// catalog rendered for it. The catalog image is catalog/ on the opm
	// image, as catalog.Dockerfile builds it.
	annotations, err := os.ReadFile(filepath.Join(repo, "bundle", "metadata", "annotations.yaml"))
	require.NoError(t, err)
	for _, r := range Releases {
		began = time.Now()
		if r.Source != "" {
			require.NoError(t, node.PushManagerImageFrom(ctx, filepath.Join(repo, r.Source), r.Manager))
		} else {
			require.NoError(t, node.PushManagerImage(ctx, r.Manager))
		}
		dir := t.TempDir()
		require.NoError(t, realnode.WriteBundleFromCatalog(filepath.Join(repo, r.Catalog), r.CSV, annotations, dir))
		spec, err := realnode.BundleImageSpec(r.Bundle, dir)
		require.NoError(t, err)
		require.NoError(t, node.PushImage(ctx, spec))
		t.Logf("%s: manager %s and bundle %s built and pushed in %s", r.CSV, r.Manager, r.Bundle, time.Since(began).Round(100*time.Millisecond))
	}
	began = time.Now()
	spec, err := realnode.CatalogImageSpec(ctx, CatalogImage, bin, filepath.Join(repo, "catalog"), t.TempDir())
	require.NoError(t, err)
	require.NoError(t, node.PushImage(ctx, spec))
	require.NoError(t, node.GoImage(ctx, "./test/e2ereal/probe", ProbeImage))
	require.NoError(t, node.PushModelServer(ctx, ModelServerImage))
	// 0.2.0's manager gives ModelDeployment versions whose modelPath is
	// fetched a storage-initializer init container (its
	// RELATED_IMAGE_STORAGE_INITIALIZER).
	require.NoError(t, node.PushStorageInitializer(ctx))
	t.Logf("catalog, probe, model server and storage initializer images built and pushed in %s", time.Since(began).Round(100*time.Millisecond))

	// Every image of the project a catalog bundle names (0.2.0's by
	// digest) is in the registry: the images built here are the ones the
	// catalog pins.
	for _, r := range Releases {
		imgs, err := readCatalogImages(filepath.Join(repo, r.Catalog), r.CSV)
		require.NoError(t, err)
		for _, ref := range append([]string{imgs.Bundle}, slices.Sorted(maps.Values(imgs.Related))...) {
			if !strings.HasPrefix(ref, "ghcr.io/ml-operator/") {
				continue
			}
			lr, err := images.LocalRef(node.Registry, ref)
			require.NoError(t, err)
			_, err = remote.Head(lr, remote.WithContext(ctx))
			require.NoError(t, err, "%s (%s) names %s, which is not the image built here: when it is a digest, bundle/ and the catalog head are stale (make bundle catalog-add, docs/install.md)", r.CSV, r.Catalog, ref)
		}
	}
}

// catalogImages are the images a catalog bundle names: its bundle image
// and its relatedImages by name (manager, storage-initializer, ...).
type catalogImages struct {
	Bundle  string
	Related map[string]string
}

// readCatalogImages reads the olm.bundle named name of a rendered catalog
// file.
func readCatalogImages(file, name string) (catalogImages, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return catalogImages{}, err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var doc struct {
			Schema        string `json:"schema"`
			Name          string `json:"name"`
			Image         string `json:"image"`
			RelatedImages []struct {
				Name  string `json:"name"`
				Image string `json:"image"`
			} `json:"relatedImages"`
		}
		if err := dec.Decode(&doc); err == io.EOF {
			return catalogImages{}, fmt.Errorf("%s: no olm.bundle %s", file, name)
		} else if err != nil {
			return catalogImages{}, fmt.Errorf("%s: %w", file, err)
		}
		if doc.Schema != "olm.bundle" || doc.Name != name {
			continue
		}
		out := catalogImages{Bundle: doc.Image, Related: map[string]string{}}
		for _, ri := range doc.RelatedImages {
			out.Related[ri.Name] = ri.Image
		}
		return out, nil
	}
}

// managerImage is the manager image a release's catalog bundle names.
func managerImage(t *testing.T, csv string) string {
	t.Helper()
	for _, r := range Releases {
		if r.CSV == csv {
			imgs, err := readCatalogImages(filepath.Join(repo, r.Catalog), r.CSV)
			require.NoError(t, err)
			require.NotEmpty(t, imgs.Related["manager"], "%s has no manager in relatedImages", r.Catalog)
			return imgs.Related["manager"]
		}
	}
	t.Fatalf("no release %s", csv)
	return ""
}

// testCatalogSource: OLM runs the catalog image as a registry pod and
// connects to it.
func testCatalogSource(t *testing.T) {
	ctx := context.Background()
	cs := &operatorsv1alpha1.CatalogSource{
		ObjectMeta: metav1.ObjectMeta{Name: CatalogSourceName, Namespace: realnode.OLMNamespace},
		Spec: operatorsv1alpha1.CatalogSourceSpec{
			SourceType:  operatorsv1alpha1.SourceTypeGrpc,
			Image:       CatalogImage,
			DisplayName: "ml-operator",
			Publisher:   "ml-operator",
		},
	}
	require.NoError(t, c.Create(ctx, cs))
	began := time.Now()
	state := ""
	err := poll(3*time.Minute, func() bool {
		if c.Get(ctx, client.ObjectKeyFromObject(cs), cs) != nil || cs.Status.GRPCConnectionState == nil {
			return false
		}
		state = cs.Status.GRPCConnectionState.LastObservedState
		return state == "READY"
	})
	require.NoError(t, err, "CatalogSource connection state %q", state)
	t.Logf("CatalogSource READY in %s", time.Since(began).Round(100*time.Millisecond))
}

// GPUPool is the node label an admin asks the manager, through the
// Subscription's spec.config.env, to put on GPU worker pods
// (ML_OPERATOR_GPU_NODE_SELECTOR); the suite labels the real node with it,
// so the samples' GPU pods still wait for GPUs only.
var GPUPool = [2]string{"ml.example.com/gpu-pool", "e2eolm"}

// testInstall010: an OperatorGroup for all namespaces (the conversion
// webhook needs AllNamespaces) and a Subscription to stable starting at
// 0.1.0 with manual approval give an InstallPlan that waits; approved, it
// installs the CSV, which reaches Succeeded. The Subscription configures
// the manager (spec.config.env), as docs/install.md tells admins to;
// the samples step sees it take effect under 0.2.0.
func testInstall010(t *testing.T) {
	ctx := context.Background()
	ns := realnode.OperatorNamespace
	require.NoError(t, c.Patch(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: realnode.NodeName}}, client.RawPatch(types.MergePatchType,
		[]byte(fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, GPUPool[0], GPUPool[1])))))
	require.NoError(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	require.NoError(t, c.Create(ctx, &operatorsv1.OperatorGroup{ObjectMeta: metav1.ObjectMeta{Name: "ml-operator", Namespace: ns}}))
	sub := &operatorsv1alpha1.Subscription{
		ObjectMeta: metav1.ObjectMeta{Name: Package, Namespace: ns},
		Spec: &operatorsv1alpha1.SubscriptionSpec{
			CatalogSource:          CatalogSourceName,
			CatalogSourceNamespace: realnode.OLMNamespace,
			Package:                Package,
			Channel:                Channel,
			StartingCSV:            CSV010,
			InstallPlanApproval:    operatorsv1alpha1.ApprovalManual,
			Config: &operatorsv1alpha1.SubscriptionConfig{Env: []corev1.EnvVar{
				{Name: "ML_OPERATOR_GPU_NODE_SELECTOR", Value: GPUPool[0] + "=" + GPUPool[1]},
			}},
		},
	}
	require.NoError(t, c.Create(ctx, sub))
	began := time.Now()
	require.NoError(t, poll(3*time.Minute, func() bool {
		return c.Get(ctx, client.ObjectKeyFromObject(sub), sub) == nil && sub.Status.InstallPlanRef != nil
	}), "Subscription status %+v", sub.Status)
	ip := &operatorsv1alpha1.InstallPlan{}
	key := client.ObjectKey{Namespace: ns, Name: sub.Status.InstallPlanRef.Name}
	require.NoError(t, poll(2*time.Minute, func() bool {
		return c.Get(ctx, key, ip) == nil && ip.Status.Phase == operatorsv1alpha1.InstallPlanPhaseRequiresApproval
	}), "InstallPlan phase %q conditions %+v", ip.Status.Phase, ip.Status.Conditions)
	t.Logf("InstallPlan %s waits for approval (%s after the Subscription)", ip.Name, time.Since(began).Round(100*time.Millisecond))
	// Manual approval: nothing is installed before it.
	assert.Equal(t, []string{CSV010}, ip.Spec.ClusterServiceVersionNames)
	assert.False(t, ip.Spec.Approved)
	assert.True(t, isNotFound(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: CSV010}, &operatorsv1alpha1.ClusterServiceVersion{})),
		"the CSV exists before the InstallPlan was approved")

	ip.Spec.Approved = true
	require.NoError(t, c.Update(ctx, ip))
	began = time.Now()
	csv := &operatorsv1alpha1.ClusterServiceVersion{}
	err := poll(5*time.Minute, func() bool {
		return c.Get(ctx, client.ObjectKey{Namespace: ns, Name: CSV010}, csv) == nil &&
			(csv.Status.Phase == operatorsv1alpha1.CSVPhaseSucceeded || csv.Status.Phase == operatorsv1alpha1.CSVPhaseFailed)
	})
	require.NoError(t, err, "CSV phase %q reason %q message %q", csv.Status.Phase, csv.Status.Reason, csv.Status.Message)
	require.Equal(t, operatorsv1alpha1.CSVPhaseSucceeded, csv.Status.Phase, "reason %q message %q", csv.Status.Reason, csv.Status.Message)
	t.Logf("CSV %s Succeeded %s after approval", CSV010, time.Since(began).Round(100*time.Millisecond))
	require.NoError(t, c.Get(ctx, key, ip))
	assert.Equal(t, operatorsv1alpha1.InstallPlanPhaseComplete, ip.Status.Phase)
	t.Logf("kubectl get subscription,installplan,csv -n %s:\n%s", ns,
		kubectl(t, "get", "subscription,installplan,csv", "-n", ns))
}

// testWebhookRefuses: OLM, not cert-manager, issued the webhook's serving
// certificate and put its CA into the webhook configuration; through it,
// the API server refuses a bad manifest with the field path.
func testWebhookRefuses(t *testing.T) {
	ctx := context.Background()
	vw := &admissionregistrationv1.ValidatingWebhookConfigurationList{}
	require.NoError(t, c.List(ctx, vw, client.MatchingLabels{"olm.owner": CSV010}))
	require.NotEmpty(t, vw.Items, "no ValidatingWebhookConfiguration owned by %s", CSV010)
	for _, cfg := range vw.Items {
		for _, w := range cfg.Webhooks {
			assert.NotEmpty(t, w.ClientConfig.CABundle, "%s has no CA bundle", w.Name)
		}
	}
	ns := namespace(t)
	manifest := fmt.Sprintf(`apiVersion: ml.example.com/v1
kind: TrainingJob
metadata:
  name: reserved-env
  namespace: %s
spec:
  framework: pytorch
  image: ghcr.io/ml-operator/trainer-example:e2e
  gpusPerWorker: 0
  env:
  - name: MASTER_ADDR
    value: somewhere-else
`, ns)
	// Only the webhook says this (the CRD schema has no rule for it); the
	// API server words the webhook's field error as "... is invalid: <field
	// path>: ..." (found on the real node). Until the webhook answers, the
	// error is a failed call instead, and the poll goes on.
	refusal := `The TrainingJob "reserved-env" is invalid: spec.env[0].name: Invalid value: "MASTER_ADDR": is set by the operator`
	var out string
	var err error
	require.NoError(t, poll(2*time.Minute, func() bool {
		out, err = kubectlIn(manifest, "apply", "-f", "-")
		return err != nil && strings.Contains(out, refusal)
	}), "kubectl apply: %v: %s", err, out)
	t.Logf("kubectl apply of a TrainingJob setting MASTER_ADDR:\n%s", out)
}

// testConversion: OLM points the CRD's conversion webhook at the manager
// with its CA; a v1alpha1 object is stored as v1 and reads back in both.
func testConversion(t *testing.T) {
	ctx := context.Background()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	require.NoError(t, c.Get(ctx, client.ObjectKey{Name: "trainingjobs.ml.example.com"}, crd))
	require.NotNil(t, crd.Spec.Conversion)
	require.Equal(t, apiextensionsv1.WebhookConverter, crd.Spec.Conversion.Strategy)
	require.NotNil(t, crd.Spec.Conversion.Webhook.ClientConfig.Service)
	assert.Equal(t, realnode.OperatorNamespace, crd.Spec.Conversion.Webhook.ClientConfig.Service.Namespace)
	assert.NotEmpty(t, crd.Spec.Conversion.Webhook.ClientConfig.CABundle)

	// The object stays for the upgrade: it must read back under 0.2.0.
	ns := work
	manifest := fmt.Sprintf(`apiVersion: ml.example.com/v1alpha1
kind: TrainingJob
metadata:
  name: old-style
  namespace: %s
spec:
  framework: pytorch
  image: ghcr.io/ml-operator/trainer-example:e2e
  command: ["python", "train.py"]
  workers: 3
  gpuPerWorker: 0
  checkpointDir: /ckpt
`, ns)
	out, err := kubectlIn(manifest, "apply", "-f", "-")
	require.NoError(t, err, out)
	t.Logf("kubectl apply (v1alpha1):\n%s", out)
	v1 := kubectl(t, "get", "trainingjobs.v1.ml.example.com", "old-style", "-n", ns,
		"-o", "jsonpath={.apiVersion} numWorkers={.spec.numWorkers} checkpoint.path={.spec.checkpoint.path}")
	assert.Equal(t, "ml.example.com/v1 numWorkers=3 checkpoint.path=/ckpt", v1)
	old := kubectl(t, "get", "trainingjobs.v1alpha1.ml.example.com", "old-style", "-n", ns,
		"-o", "jsonpath={.apiVersion} workers={.spec.workers} checkpointDir={.spec.checkpointDir}")
	assert.Equal(t, "ml.example.com/v1alpha1 workers=3 checkpointDir=/ckpt", old)
	t.Logf("read back as v1: %s; as v1alpha1: %s", v1, old)
}

// olmDiagnostics describes the catalog, the Subscription, its InstallPlans
// and CSVs, and the pods and events of OLM's and the operator's namespaces.
func olmDiagnostics() string {
	ctx := context.Background()
	var b strings.Builder
	css := &operatorsv1alpha1.CatalogSourceList{}
	_ = c.List(ctx, css)
	for _, cs := range css.Items {
		fmt.Fprintf(&b, "catalogsource %s/%s status %+v\n", cs.Namespace, cs.Name, cs.Status.GRPCConnectionState)
	}
	subs := &operatorsv1alpha1.SubscriptionList{}
	_ = c.List(ctx, subs)
	for _, s := range subs.Items {
		fmt.Fprintf(&b, "subscription %s/%s state %q conditions %+v\n", s.Namespace, s.Name, s.Status.State, s.Status.Conditions)
	}
	ips := &operatorsv1alpha1.InstallPlanList{}
	_ = c.List(ctx, ips)
	for _, ip := range ips.Items {
		fmt.Fprintf(&b, "installplan %s/%s phase %q csvs %v approved %t conditions %+v\n", ip.Namespace, ip.Name, ip.Status.Phase, ip.Spec.ClusterServiceVersionNames, ip.Spec.Approved, ip.Status.Conditions)
	}
	csvs := &operatorsv1alpha1.ClusterServiceVersionList{}
	_ = c.List(ctx, csvs)
	for _, csv := range csvs.Items {
		fmt.Fprintf(&b, "csv %s/%s phase %q reason %q message %q\n", csv.Namespace, csv.Name, csv.Status.Phase, csv.Status.Reason, csv.Status.Message)
	}
	b.WriteString("--- namespace olm\n" + node.NamespaceDiagnostics(ctx, realnode.OLMNamespace))
	b.WriteString("--- namespace " + realnode.OperatorNamespace + "\n" + node.OperatorDiagnostics(ctx))
	return b.String()
}

// namespace creates a namespace of the test's own and deletes it after.
func namespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "e2eolm-"}}
	require.NoError(t, c.Create(context.Background(), ns))
	t.Cleanup(func() { _ = c.Delete(context.Background(), ns) })
	// Pods need the namespace's default service account.
	require.NoError(t, poll(30*time.Second, func() bool {
		return c.Get(context.Background(), client.ObjectKey{Namespace: ns.Name, Name: "default"}, &corev1.ServiceAccount{}) == nil
	}), "default service account in %s", ns.Name)
	return ns.Name
}

// kubectl runs the repository's kubectl against the node and returns its
// standard output only: the API server's warnings (v1alpha1 is
// deprecated) go to standard error, and are not part of what was read
// (found on the real node).
func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(repo, "bin", "kubectl"), args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+node.Kubeconfig)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "kubectl %s: %s%s", strings.Join(args, " "), out, stderr.String())
	if w := strings.TrimSpace(stderr.String()); w != "" {
		t.Logf("kubectl %s: %s", strings.Join(args, " "), w)
	}
	return strings.TrimSpace(string(out))
}

// kubectlIn runs the repository's kubectl against the node with stdin;
// it returns standard output and error together.
func kubectlIn(stdin string, args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(repo, "bin", "kubectl"), args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+node.Kubeconfig)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

func poll(timeout time.Duration, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %s", timeout)
		}
		time.Sleep(time.Second)
	}
	return nil
}

func isNotFound(err error) bool { return client.IgnoreNotFound(err) == nil && err != nil }
