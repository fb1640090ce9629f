package packaging

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/operator-framework/api/pkg/manifests"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	"github.com/operator-framework/api/pkg/validation"
	"github.com/operator-framework/api/pkg/validation/errors"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/yaml"

	"github.com/ml-operator/ml-operator/test/testutil"
)

// bundleDir is what `make bundle` generates.
func bundleDir() string { return filepath.Join(testutil.RepoRoot(), "bundle") }

// loadBundle reads bundle/ the way OLM tooling does.
func loadBundle(t *testing.T) *manifests.Bundle {
	t.Helper()
	b, err := manifests.GetBundleFromDir(bundleDir())
	if err != nil {
		t.Fatalf("loading bundle/: %v", err)
	}
	if b.CSV == nil {
		t.Fatal("bundle/ has no ClusterServiceVersion")
	}
	return b
}

// TestBundlePassesOperatorFrameworkValidators runs the validators of
// `operator-sdk bundle validate --select-optional suite=operatorframework`
// and fails on any error.
func TestBundlePassesOperatorFrameworkValidators(t *testing.T) {
	b := loadBundle(t)
	validators := validation.DefaultBundleValidators.WithValidators(
		validation.OperatorHubV2Validator,
		validation.StandardCapabilitiesValidator,
		validation.StandardCategoriesValidator,
		validation.GoodPracticesValidator,
		validation.AlphaDeprecatedAPIsValidator,
	)
	results := validators.Validate(b, map[string]string{"k8s-version": b.CSV.Spec.MinKubeVersion})
	checkResults(t, results)
}

func checkResults(t *testing.T, results []errors.ManifestResult) {
	t.Helper()
	for _, r := range results {
		for _, e := range r.Errors {
			t.Errorf("%s: %v", r.Name, e)
		}
		for _, w := range r.Warnings {
			t.Logf("warning: %s: %v", r.Name, w)
		}
	}
}

func TestBundleMetadata(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(bundleDir(), "metadata", "annotations.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var meta struct {
		Annotations map[string]string `json:"annotations"`
	}
	if err := yaml.Unmarshal(data, &meta); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"operators.operatorframework.io.bundle.package.v1":         "ml-operator",
		"operators.operatorframework.io.bundle.channels.v1":        "stable,candidate",
		"operators.operatorframework.io.bundle.channel.default.v1": "stable",
		"operators.operatorframework.io.bundle.mediatype.v1":       "registry+v1",
	}
	for k, v := range want {
		if meta.Annotations[k] != v {
			t.Errorf("annotation %s = %q, want %q", k, meta.Annotations[k], v)
		}
	}
	// bundle.Dockerfile carries the same labels, as operator-sdk writes it.
	dockerfile, err := os.ReadFile(filepath.Join(testutil.RepoRoot(), "bundle.Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range want {
		if !strings.Contains(string(dockerfile), "LABEL "+k+"="+v+"\n") {
			t.Errorf("bundle.Dockerfile lacks LABEL %s=%s", k, v)
		}
	}
}

func TestCSVDescribesTheOperator(t *testing.T) {
	csv := loadBundle(t).CSV
	ann := csv.Annotations
	if ann["categories"] != "AI/Machine Learning" {
		t.Errorf("categories = %q", ann["categories"])
	}
	if ann["capabilities"] != "Deep Insights" {
		t.Errorf("capabilities = %q, want Deep Insights (metrics, alerts and a dashboard ship with the operator)", ann["capabilities"])
	}
	if csv.Spec.DisplayName == "" || len(csv.Spec.Description) < 200 {
		t.Error("CSV needs a display name and a real description")
	}
	if len(csv.Spec.Icon) == 0 || csv.Spec.Icon[0].MediaType == "" || csv.Spec.Icon[0].Data == "" {
		t.Error("CSV icon must have data and a mediatype")
	}
	if len(csv.Spec.Keywords) < 3 || len(csv.Spec.Maintainers) == 0 || len(csv.Spec.Links) == 0 {
		t.Error("CSV needs keywords, maintainers and links")
	}
	if csv.Spec.MinKubeVersion == "" {
		t.Error("CSV has no minKubeVersion")
	}
	if csv.Spec.Version.String() == "0.0.0" {
		t.Error("CSV version was not set by make bundle")
	}
}

// TestCSVOwnsBothCRDsWithDescriptors checks the owned CRDs and the
// descriptors for the fields people look at.
func TestCSVOwnsBothCRDsWithDescriptors(t *testing.T) {
	b := loadBundle(t)
	owned := map[string]operatorsv1alpha1.CRDDescription{}
	for _, d := range b.CSV.Spec.CustomResourceDefinitions.Owned {
		owned[d.Name+"/"+d.Version] = d
	}
	want := map[string]struct{ spec, status []string }{
		"trainingjobs.ml.example.com/v1":     {[]string{"framework", "image", "numWorkers", "gpusPerWorker", "suspend"}, []string{"state", "progress", "conditions", "allocatedGPUs", "restarts"}},
		"modeldeployments.ml.example.com/v1": {[]string{"modelName", "framework", "image"}, []string{"phase", "url", "conditions", "activeVersions"}},
	}
	for key, w := range want {
		d, ok := owned[key]
		if !ok {
			t.Errorf("CSV does not own %s", key)
			continue
		}
		var specPaths, statusPaths []string
		for _, s := range d.SpecDescriptors {
			specPaths = append(specPaths, s.Path)
		}
		for _, s := range d.StatusDescriptors {
			statusPaths = append(statusPaths, s.Path)
		}
		for _, p := range w.spec {
			if !slices.Contains(specPaths, p) {
				t.Errorf("%s has no spec descriptor for %s", key, p)
			}
		}
		for _, p := range w.status {
			if !slices.Contains(statusPaths, p) {
				t.Errorf("%s has no status descriptor for %s", key, p)
			}
		}
	}
	// Every owned CRD ships in the bundle.
	inBundle := map[string]bool{}
	for _, crd := range b.V1CRDs {
		for _, v := range crd.Spec.Versions {
			inBundle[crd.Name+"/"+v.Name] = true
		}
	}
	for key := range owned {
		if !inBundle[key] {
			t.Errorf("CSV owns %s, which is not in the bundle", key)
		}
	}
	if len(b.V1CRDs) != 2 {
		t.Errorf("bundle has %d CRDs, want 2", len(b.V1CRDs))
	}
}

// TestCSVInstallsInAllNamespacesOnly: OLM supports conversion webhooks only
// in AllNamespaces mode.
func TestCSVInstallsInAllNamespacesOnly(t *testing.T) {
	for _, m := range loadBundle(t).CSV.Spec.InstallModes {
		want := m.Type == operatorsv1alpha1.InstallModeTypeAllNamespaces
		if m.Supported != want {
			t.Errorf("install mode %s supported=%v, want %v", m.Type, m.Supported, want)
		}
	}
}

// TestCSVDeploymentMountsNoCertManagerSecret: OLM mounts its own webhook
// certificate, so the bundle's Deployment must not reference a Secret.
func TestCSVDeploymentMountsNoCertManagerSecret(t *testing.T) {
	csv := loadBundle(t).CSV
	deployments := csv.Spec.InstallStrategy.StrategySpec.DeploymentSpecs
	if len(deployments) != 1 {
		t.Fatalf("CSV has %d deployments, want 1", len(deployments))
	}
	spec := deployments[0].Spec.Template.Spec
	for _, v := range spec.Volumes {
		if v.Secret != nil {
			t.Errorf("bundle Deployment mounts Secret %s (volume %s); OLM provides the webhook certificate", v.Secret.SecretName, v.Name)
		}
	}
	for _, c := range spec.Containers {
		for _, m := range c.VolumeMounts {
			if strings.HasPrefix(m.MountPath, "/tmp/k8s-webhook-server") {
				t.Errorf("container %s mounts %s; OLM mounts its certificate there itself", c.Name, m.MountPath)
			}
		}
	}
	if r := deployments[0].Spec.Replicas; r == nil || *r != 2 {
		t.Errorf("bundle Deployment replicas = %s, want 2", ptrString(r))
	}
}

// TestCSVRelatedImages lists the manager image and the default worker images,
// so disconnected clusters can mirror them.
func TestCSVRelatedImages(t *testing.T) {
	csv := loadBundle(t).CSV
	images := map[string]string{}
	for _, ri := range csv.Spec.RelatedImages {
		images[ri.Name] = ri.Image
	}
	container := csv.Spec.InstallStrategy.StrategySpec.DeploymentSpecs[0].Spec.Template.Spec.Containers[0]
	if images["manager"] != container.Image {
		t.Errorf("relatedImages manager = %q, want the Deployment's image %q", images["manager"], container.Image)
	}
	if csv.Annotations["containerImage"] != container.Image {
		t.Errorf("containerImage annotation %q differs from the Deployment's image %q", csv.Annotations["containerImage"], container.Image)
	}
	// By digest (TestProjectImagesArePinnedByDigest checks every image
	// the project builds).
	if !regexp.MustCompile(`^ghcr\.io/ml-operator/ml-operator@sha256:[0-9a-f]{64}$`).MatchString(container.Image) {
		t.Errorf("manager image %q is not the project's manager repository by digest", container.Image)
	}
	for _, fw := range []string{"pytorch", "tensorflow", "xgboost", "jax"} {
		if images[fw] == "" {
			t.Errorf("relatedImages has no %s default worker image", fw)
		}
	}
}

// TestCSVALMExamples: alm-examples (from config/samples) parse and give an
// example for each kind, which OperatorHub shows as the starting point.
func TestCSVALMExamples(t *testing.T) {
	var examples []map[string]any
	if err := json.Unmarshal([]byte(loadBundle(t).CSV.Annotations["alm-examples"]), &examples); err != nil {
		t.Fatalf("alm-examples is not a JSON list: %v", err)
	}
	kinds := map[string]int{}
	for _, e := range examples {
		if e["apiVersion"] == "ml.example.com/v1" {
			kinds[e["kind"].(string)]++
		}
	}
	for _, kind := range []string{"TrainingJob", "ModelDeployment"} {
		if kinds[kind] == 0 {
			t.Errorf("alm-examples has no ml.example.com/v1 %s (got %v)", kind, kinds)
		}
	}

	// They are config/samples, as `make bundle` renders them: a sample
	// changed without regenerating the bundle fails here.
	samplesDir := filepath.Join(testutil.RepoRoot(), "config", "samples")
	var kust struct {
		Resources []string `json:"resources"`
	}
	raw, err := os.ReadFile(filepath.Join(samplesDir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, &kust); err != nil {
		t.Fatal(err)
	}
	samples := map[string]map[string]any{}
	for _, f := range kust.Resources {
		raw, err := os.ReadFile(filepath.Join(samplesDir, f))
		if err != nil {
			t.Fatal(err)
		}
		var obj map[string]any
		if err := yaml.Unmarshal(raw, &obj); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		samples[exampleKey(obj)] = obj
	}
	if len(examples) != len(samples) {
		t.Errorf("alm-examples has %d objects, config/samples %d", len(examples), len(samples))
	}
	for _, e := range examples {
		s, ok := samples[exampleKey(e)]
		if !ok {
			t.Errorf("alm-examples has %s, which config/samples does not", exampleKey(e))
			continue
		}
		if !equality.Semantic.DeepEqual(e, s) {
			t.Errorf("alm-examples' %s differs from config/samples: run `make bundle VERSION=<current>` and `make catalog-add`", exampleKey(e))
		}
	}
}

func exampleKey(obj map[string]any) string {
	meta, _ := obj["metadata"].(map[string]any)
	return fmt.Sprintf("%v %v/%v", obj["apiVersion"], obj["kind"], meta["name"])
}

func TestScorecardConfigShips(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(bundleDir(), "tests", "scorecard", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, test := range []string{"basic-check-spec", "olm-bundle-validation", "olm-crds-have-validation", "olm-spec-descriptors", "olm-status-descriptors"} {
		if !strings.Contains(string(data), "- "+test+"\n") {
			t.Errorf("scorecard config lacks %s", test)
		}
	}
}

// TestCSVPermissions: OLM grants the manager what config/default grants it:
// the generated manager role (cluster-wide), the leader-election Role
// (install namespace) and the metrics authentication role, and nothing with
// wildcards, Secrets or escalate/bind.
func TestCSVPermissions(t *testing.T) {
	spec := loadBundle(t).CSV.Spec.InstallStrategy.StrategySpec
	sa := spec.DeploymentSpecs[0].Spec.Template.Spec.ServiceAccountName
	grants := func(perms []operatorsv1alpha1.StrategyDeploymentPermissions) map[string]bool {
		out := map[string]bool{}
		for _, p := range perms {
			if p.ServiceAccountName != sa {
				t.Errorf("permissions for service account %s, the manager runs as %s", p.ServiceAccountName, sa)
			}
			for _, r := range p.Rules {
				for _, res := range r.Resources {
					for _, verb := range r.Verbs {
						out[res+":"+verb] = true
						if strings.Contains(res+verb+strings.Join(r.APIGroups, ""), "*") || res == "secrets" ||
							verb == "escalate" || verb == "bind" || verb == "impersonate" {
							t.Errorf("CSV grants %s on %s %v", verb, res, r.APIGroups)
						}
					}
				}
			}
		}
		return out
	}
	cluster := grants(spec.ClusterPermissions)
	for _, want := range []string{"pods:create", "trainingjobs:watch", "trainingjobs/status:update", "modeldeployments:watch",
		"deployments:create", "tokenreviews:create", "subjectaccessreviews:create"} {
		if !cluster[want] {
			t.Errorf("CSV clusterPermissions lack %s", want)
		}
	}
	if ns := grants(spec.Permissions); !ns["leases:create"] {
		t.Error("CSV permissions lack the leader-election lease")
	}
}

// TestBundleCRDsAreCurrent: the bundle ships the CRDs config/default
// installs. When the API changes, regenerate with `make bundle` and
// `make catalog-add` (docs/install.md, release procedure).
func TestBundleCRDsAreCurrent(t *testing.T) {
	want := map[string]apiextensionsv1.CustomResourceDefinitionSpec{}
	for _, crd := range typedOf[*apiextensionsv1.CustomResourceDefinition](buildAndDecode(t, "config/default")) {
		want[crd.Name] = crd.Spec
	}
	for _, crd := range loadBundle(t).V1CRDs {
		spec, ok := want[crd.Name]
		if !ok {
			t.Errorf("bundle ships CRD %s, which config/default does not install", crd.Name)
			continue
		}
		// generate bundle rewrites only the conversion webhook's service
		// reference (OLM replaces it at install time); compare the rest.
		got := crd.Spec.DeepCopy()
		got.Conversion, spec.Conversion = nil, nil
		if !equality.Semantic.DeepEqual(*got, spec) {
			t.Errorf("bundle/manifests CRD %s differs from config/crd: run `make bundle VERSION=<current>` and `make catalog-add`", crd.Name)
		}
	}
}

// TestCSVPermissionsAreCurrent: the CSV grants the manager exactly what
// config/default grants its service account (the roles generated from the
// kubebuilder:rbac markers, plus leader election and metrics auth), so an
// RBAC marker changed without `make bundle` fails here instead of failing
// at install time on an OLM cluster.
func TestCSVPermissionsAreCurrent(t *testing.T) {
	objs := buildAndDecode(t, "config/default")
	dep := onlyOne[*appsv1.Deployment](t, objs)
	sa := dep.Spec.Template.Spec.ServiceAccountName
	boundTo := func(subjects []rbacv1.Subject) bool {
		for _, s := range subjects {
			if s.Kind == rbacv1.ServiceAccountKind && s.Name == sa {
				return true
			}
		}
		return false
	}
	clusterRoles := map[string][]rbacv1.PolicyRule{}
	for _, cr := range typedOf[*rbacv1.ClusterRole](objs) {
		clusterRoles[cr.Name] = cr.Rules
	}
	roles := map[string][]rbacv1.PolicyRule{}
	for _, r := range typedOf[*rbacv1.Role](objs) {
		roles[r.Name] = r.Rules
	}
	var wantCluster, wantNamespaced []rbacv1.PolicyRule
	for _, b := range typedOf[*rbacv1.ClusterRoleBinding](objs) {
		if boundTo(b.Subjects) {
			wantCluster = append(wantCluster, clusterRoles[b.RoleRef.Name]...)
		}
	}
	for _, b := range typedOf[*rbacv1.RoleBinding](objs) {
		if boundTo(b.Subjects) {
			wantNamespaced = append(wantNamespaced, roles[b.RoleRef.Name]...)
		}
	}
	require.NotEmpty(t, wantCluster, "config/default binds no ClusterRole to %s", sa)

	spec := loadBundle(t).CSV.Spec.InstallStrategy.StrategySpec
	rulesOf := func(perms []operatorsv1alpha1.StrategyDeploymentPermissions) []rbacv1.PolicyRule {
		var out []rbacv1.PolicyRule
		for _, p := range perms {
			out = append(out, p.Rules...)
		}
		return out
	}
	same := func(what string, want, got []string) {
		t.Helper()
		missing := slices.DeleteFunc(slices.Clone(want), func(x string) bool { return slices.Contains(got, x) })
		extra := slices.DeleteFunc(slices.Clone(got), func(x string) bool { return slices.Contains(want, x) })
		if len(missing)+len(extra) > 0 {
			t.Errorf("CSV %s differ from what config/default grants %s (run `make bundle VERSION=<current>` and `make catalog-add`):\n  granted by config/default, not by the CSV: %v\n  granted by the CSV, not by config/default: %v",
				what, sa, missing, extra)
		}
	}
	same("clusterPermissions", testutil.Grants(wantCluster), testutil.Grants(rulesOf(spec.ClusterPermissions)))
	same("permissions", testutil.Grants(wantNamespaced), testutil.Grants(rulesOf(spec.Permissions)))
}
