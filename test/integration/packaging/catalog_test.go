package packaging

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	"github.com/operator-framework/operator-registry/alpha/declcfg"
	"github.com/operator-framework/operator-registry/alpha/model"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/ml-operator/ml-operator/test/testutil"
)

const (
	packageName   = "ml-operator"
	latestRelease = "ml-operator.v0.2.0"
)

// loadCatalog loads catalog/ with operator-registry's declarative-config
// loader and converts it to the model opm validate checks.
func loadCatalog(t *testing.T) (*declcfg.DeclarativeConfig, model.Model) {
	t.Helper()
	cfg, err := declcfg.LoadFS(context.Background(), os.DirFS(filepath.Join(testutil.RepoRoot(), "catalog")))
	if err != nil {
		t.Fatalf("loading catalog/: %v", err)
	}
	m, err := declcfg.ConvertToModel(*cfg)
	if err != nil {
		t.Fatalf("catalog/ does not convert to a valid model: %v", err)
	}
	if err := m.Validate(); err != nil {
		t.Fatalf("catalog/ is invalid: %v", err)
	}
	return cfg, m
}

// TestCatalogUpgradeGraph checks the channels: stable (default) and candidate
// both hold 0.1.0 and 0.2.0, 0.2.0 replaces 0.1.0 and heads each channel, and
// no entry replaces a bundle the channel does not have.
func TestCatalogUpgradeGraph(t *testing.T) {
	cfg, m := loadCatalog(t)
	pkg, ok := m[packageName]
	if !ok {
		t.Fatalf("catalog has no package %s", packageName)
	}
	if pkg.DefaultChannel == nil || pkg.DefaultChannel.Name != "stable" {
		t.Errorf("default channel = %v, want stable", pkg.DefaultChannel)
	}
	if got := sortedKeys(pkg.Channels); strings.Join(got, ",") != "candidate,stable" {
		t.Errorf("channels = %v, want candidate and stable", got)
	}
	for _, name := range []string{"stable", "candidate"} {
		ch, ok := pkg.Channels[name]
		if !ok {
			continue
		}
		head, err := ch.Head()
		if err != nil {
			t.Errorf("channel %s: %v", name, err)
			continue
		}
		if head.Name != latestRelease {
			t.Errorf("channel %s head = %s, want %s", name, head.Name, latestRelease)
		}
		if head.Replaces != "ml-operator.v0.1.0" {
			t.Errorf("channel %s: %s replaces %q, want ml-operator.v0.1.0", name, head.Name, head.Replaces)
		}
		// Walking replaces from the head reaches every bundle of the channel,
		// so a subscription on any version upgrades to the head.
		seen := map[string]bool{}
		for b := head; b != nil; {
			if seen[b.Name] {
				t.Fatalf("channel %s: replaces cycle at %s", name, b.Name)
			}
			seen[b.Name] = true
			if b.Replaces == "" {
				break
			}
			next, ok := ch.Bundles[b.Replaces]
			if !ok {
				t.Errorf("channel %s: %s replaces %s, which the channel does not have", name, b.Name, b.Replaces)
				break
			}
			b = next
		}
		if len(seen) != len(ch.Bundles) {
			t.Errorf("channel %s: the replaces chain from the head reaches %d of %d bundles", name, len(seen), len(ch.Bundles))
		}
	}
	// Every olm.bundle blob has a real image and belongs to the package.
	var versions []string
	for _, b := range cfg.Bundles {
		if b.Package != packageName {
			t.Errorf("bundle %s belongs to package %q", b.Name, b.Package)
		}
		// By tag (released before digests) or by digest
		// (TestProjectImagesArePinnedByDigest).
		if b.Image == "" || !strings.HasPrefix(b.Image, "ghcr.io/ml-operator/ml-operator-bundle") {
			t.Errorf("bundle %s has image %q, want the bundle image reference", b.Name, b.Image)
		}
		versions = append(versions, b.Name)
	}
	sort.Strings(versions)
	if strings.Join(versions, ",") != "ml-operator.v0.1.0,ml-operator.v0.2.0" {
		t.Errorf("catalog bundles = %v, want 0.1.0 and 0.2.0", versions)
	}
}

// TestCatalogHeadMatchesBundleDir: the newest catalog entry is the bundle/
// directory rendered by `make catalog-add`, so they carry the same CSV version.
func TestCatalogHeadMatchesBundleDir(t *testing.T) {
	_, m := loadCatalog(t)
	head, err := m[packageName].Channels["stable"].Head()
	if err != nil {
		t.Fatal(err)
	}
	csv := loadBundle(t).CSV
	if head.Name != csv.Name {
		t.Errorf("catalog head %s, bundle/ holds %s: run `make catalog-add` after `make bundle` (docs/install.md)", head.Name, csv.Name)
	}
	if head.Version.String() != csv.Spec.Version.String() {
		t.Errorf("catalog head version %s, bundle/ CSV version %s", head.Version, csv.Spec.Version)
	}
}

// TestCatalogHeadIsTheCurrentBundle: the newest catalog entry carries the
// CSV and CRDs of bundle/ (run `make catalog-add` after `make bundle`).
func TestCatalogHeadIsTheCurrentBundle(t *testing.T) {
	cfg, _ := loadCatalog(t)
	b := loadBundle(t)
	for _, entry := range cfg.Bundles {
		if entry.Name != latestRelease {
			continue
		}
		if entry.CsvJSON == "" {
			t.Fatalf("catalog entry %s has no CSV object", entry.Name)
		}
		csv := &operatorsv1alpha1.ClusterServiceVersion{}
		if err := json.Unmarshal([]byte(entry.CsvJSON), csv); err != nil {
			t.Fatal(err)
		}
		if !equality.Semantic.DeepEqual(csv.Spec, b.CSV.Spec) {
			t.Errorf("catalog entry %s has a different CSV spec than bundle/: run `make catalog-add VERSION=%s`", entry.Name, b.CSV.Spec.Version)
		}
		crds := 0
		for _, obj := range entry.Objects {
			if strings.Contains(obj, `"kind":"CustomResourceDefinition"`) {
				crds++
				var crd apiextensionsv1.CustomResourceDefinition
				if err := json.Unmarshal([]byte(obj), &crd); err != nil {
					t.Fatal(err)
				}
				found := false
				for _, want := range b.V1CRDs {
					if want.Name == crd.Name {
						found = true
						if !equality.Semantic.DeepEqual(want.Spec, crd.Spec) {
							t.Errorf("catalog entry %s has CRD %s different from bundle/", entry.Name, crd.Name)
						}
					}
				}
				if !found {
					t.Errorf("catalog entry %s has CRD %s, bundle/ has not", entry.Name, crd.Name)
				}
			}
		}
		if crds != len(b.V1CRDs) {
			t.Errorf("catalog entry %s has %d CRDs, bundle/ %d", entry.Name, crds, len(b.V1CRDs))
		}
		return
	}
	t.Fatalf("catalog has no %s", latestRelease)
}
