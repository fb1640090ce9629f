package packaging

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/blang/semver/v4"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/ml-operator/ml-operator/test/testutil"
)

// TestCSVHasADescriptorForEveryTopLevelField walks the schema of every CRD
// version the CSV owns: each top-level field of spec has a spec descriptor
// and each of status a status descriptor, at the field's own path, so
// OperatorHub's forms and details pages show every field, and scorecard's
// olm-spec-descriptors and olm-status-descriptors find them. A descriptor
// of a path below the field (scaling.minReplicas) is not enough: the
// scorecard looks for the top-level key of the example itself, and failed
// for scaling, rollout and checkpoint when it first ran on the real node
// (make e2e-olm).
func TestCSVHasADescriptorForEveryTopLevelField(t *testing.T) {
	b := loadBundle(t)
	schemas := map[string]map[string][]string{} // name/version -> spec|status -> fields
	for _, crd := range b.V1CRDs {
		for _, v := range crd.Spec.Versions {
			props := v.Schema.OpenAPIV3Schema.Properties
			fields := map[string][]string{}
			for _, part := range []string{"spec", "status"} {
				for f := range props[part].Properties {
					fields[part] = append(fields[part], f)
				}
				sort.Strings(fields[part])
			}
			schemas[crd.Name+"/"+v.Name] = fields
		}
	}
	owned := b.CSV.Spec.CustomResourceDefinitions.Owned
	require.NotEmpty(t, owned)
	for _, d := range owned {
		key := d.Name + "/" + d.Version
		fields, ok := schemas[key]
		if !ok {
			t.Errorf("the CSV owns %s, which no bundled CRD serves", key)
			continue
		}
		var specPaths, statusPaths []string
		for _, s := range d.SpecDescriptors {
			specPaths = append(specPaths, s.Path)
		}
		for _, s := range d.StatusDescriptors {
			statusPaths = append(statusPaths, s.Path)
		}
		covered := func(paths []string, field string) bool {
			return slices.Contains(paths, field)
		}
		for _, f := range fields["spec"] {
			if !covered(specPaths, f) {
				t.Errorf("%s: spec.%s has no spec descriptor (config/manifests/bases, then make bundle)", key, f)
			}
		}
		for _, f := range fields["status"] {
			if !covered(statusPaths, f) {
				t.Errorf("%s: status.%s has no status descriptor (config/manifests/bases, then make bundle)", key, f)
			}
		}
		// No descriptor names a field the schema does not have.
		for part, paths := range map[string][]string{"spec": specPaths, "status": statusPaths} {
			for _, p := range paths {
				top, _, _ := strings.Cut(p, ".")
				if !slices.Contains(fields[part], top) {
					t.Errorf("%s: %s descriptor %q names no field of the schema", key, part, p)
				}
			}
		}
		for _, s := range d.SpecDescriptors {
			if s.DisplayName == "" || len(s.XDescriptors) == 0 {
				t.Errorf("%s: spec descriptor %s lacks a displayName or x-descriptors", key, s.Path)
			}
		}
		for _, s := range d.StatusDescriptors {
			if s.DisplayName == "" || len(s.XDescriptors) == 0 {
				t.Errorf("%s: status descriptor %s lacks a displayName or x-descriptors", key, s.Path)
			}
		}
	}
}

// TestCSVReplacesMatchesTheChannels: the upgrade edge is on the CSV
// (spec.replaces, olm.skipRange) as well as in the catalog, and both say
// the same, for bundle/ and for every bundle the catalog holds. OLM and
// OperatorHub's community pipeline read the CSV's; opm serves the catalog's.
func TestCSVReplacesMatchesTheChannels(t *testing.T) {
	cfg, m := loadCatalog(t)
	entryReplaces := map[string]map[string]string{} // bundle -> channel -> replaces
	entrySkipRange := map[string]string{}
	for _, ch := range cfg.Channels {
		for _, e := range ch.Entries {
			if entryReplaces[e.Name] == nil {
				entryReplaces[e.Name] = map[string]string{}
			}
			entryReplaces[e.Name][ch.Name] = e.Replaces
		}
	}
	for _, pkg := range m {
		for _, ch := range pkg.Channels {
			for _, b := range ch.Bundles {
				entrySkipRange[b.Name] = b.SkipRange
			}
		}
	}
	check := func(where string, csv *operatorsv1alpha1.ClusterServiceVersion) {
		t.Helper()
		chans, ok := entryReplaces[csv.Name]
		if !ok {
			t.Errorf("%s: %s is in no channel", where, csv.Name)
			return
		}
		for ch, replaces := range chans {
			if csv.Spec.Replaces != replaces {
				t.Errorf("%s: CSV %s spec.replaces %q, channel %s says %q", where, csv.Name, csv.Spec.Replaces, ch, replaces)
			}
		}
		if got := csv.Annotations["olm.skipRange"]; got != entrySkipRange[csv.Name] {
			t.Errorf("%s: CSV %s olm.skipRange %q, the catalog says %q", where, csv.Name, got, entrySkipRange[csv.Name])
		}
	}
	bundleCSV := loadBundle(t).CSV
	check("bundle/", bundleCSV)
	if bundleCSV.Spec.Replaces == "" && bundleCSV.Annotations["olm.skipRange"] == "" {
		t.Errorf("bundle/ CSV %s has neither spec.replaces nor olm.skipRange", bundleCSV.Name)
	}
	for _, b := range cfg.Bundles {
		csv := &operatorsv1alpha1.ClusterServiceVersion{}
		require.NoError(t, json.Unmarshal([]byte(b.CsvJSON), csv), "catalog bundle %s", b.Name)
		check("catalog/"+b.Name, csv)
	}
}

// TestCSVMaturityMatchesTheDefaultChannel: the CSV's maturity is the
// channel it is published to by default (stable), not "alpha" on a stable
// channel.
func TestCSVMaturityMatchesTheDefaultChannel(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(bundleDir(), "metadata", "annotations.yaml"))
	require.NoError(t, err)
	var meta struct {
		Annotations map[string]string `json:"annotations"`
	}
	require.NoError(t, yaml.Unmarshal(data, &meta))
	def := meta.Annotations["operators.operatorframework.io.bundle.channel.default.v1"]
	require.NotEmpty(t, def)
	assert.Equal(t, def, loadBundle(t).CSV.Spec.Maturity, "CSV maturity vs the bundle's default channel")
	_, m := loadCatalog(t)
	assert.Equal(t, def, m[packageName].DefaultChannel.Name, "the catalog's default channel")
}

// TestCSVOpenShiftFeatureAnnotations: the features.operators.openshift.io
// annotations the community-operators checks require, each "true" or
// "false".
func TestCSVOpenShiftFeatureAnnotations(t *testing.T) {
	ann := loadBundle(t).CSV.Annotations
	for _, f := range []string{"disconnected", "fips-compliant", "proxy-aware", "tls-profiles",
		"token-auth-aws", "token-auth-azure", "token-auth-gcp", "cnf", "cni", "csi"} {
		key := "features.operators.openshift.io/" + f
		v, ok := ann[key]
		if !ok {
			t.Errorf("CSV lacks the annotation %s", key)
			continue
		}
		if v != "true" && v != "false" {
			t.Errorf("CSV annotation %s = %q, want \"true\" or \"false\"", key, v)
		}
	}
}

// TestCatalogDockerfilePinsTheTestedOpm: catalog.Dockerfile builds and
// serves the catalog with the opm release the project builds and tests
// (OPM_VERSION, hack/tools/opm, and the operator-registry module the
// catalog tests load it with), never :latest; `make catalog-build`
// regenerates it with the same pins.
func TestCatalogDockerfilePinsTheTestedOpm(t *testing.T) {
	root := testutil.RepoRoot()
	read := func(p string) string {
		data, err := os.ReadFile(filepath.Join(root, p))
		require.NoError(t, err)
		return string(data)
	}
	opm := regexp.MustCompile(`(?m)^OPM_VERSION\s*\?=\s*(\S+)$`).FindStringSubmatch(read("hack/tools/versions.mk"))
	require.NotNil(t, opm, "OPM_VERSION in hack/tools/versions.mk")
	version := opm[1]

	froms := regexp.MustCompile(`(?m)^FROM\s+(\S+)`).FindAllStringSubmatch(read("catalog.Dockerfile"), -1)
	require.Len(t, froms, 2, "catalog.Dockerfile: a builder and a base stage")
	for _, f := range froms {
		assert.True(t, strings.HasSuffix(f[1], "/opm:"+version), "catalog.Dockerfile FROM %s, want the opm image at %s", f[1], version)
	}
	for _, gomod := range []string{"go.mod", "hack/tools/opm/go.mod"} {
		assert.Regexp(t, `(?m)^\s*github.com/operator-framework/operator-registry `+regexp.QuoteMeta(version)+`(\s*//.*)?$`, read(gomod),
			"%s pins operator-registry at another version than OPM_VERSION %s", gomod, version)
	}
	mk := read("hack/mk/bundle.mk")
	for _, flag := range []string{"--builder-image", "--base-image"} {
		assert.Regexp(t, regexp.QuoteMeta(flag)+` \S+/opm:\$\(OPM_VERSION\)`, mk, "make catalog-build must pass %s at $(OPM_VERSION)", flag)
	}
}

// TestChangelogHasAnEntryPerBundle: CHANGELOG.md has a "## <version>"
// section for every bundle of the catalog, newest first.
func TestChangelogHasAnEntryPerBundle(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(testutil.RepoRoot(), "CHANGELOG.md"))
	require.NoError(t, err)
	var headings []string
	for _, m := range regexp.MustCompile(`(?m)^## (\S+)\s*$`).FindAllStringSubmatch(string(data), -1) {
		headings = append(headings, m[1])
	}
	_, m := loadCatalog(t)
	var versions []string
	for _, ch := range m[packageName].Channels {
		for _, b := range ch.Bundles {
			if !slices.Contains(versions, b.Version.String()) {
				versions = append(versions, b.Version.String())
			}
		}
	}
	require.NotEmpty(t, versions)
	for _, v := range versions {
		assert.Contains(t, headings, v, "CHANGELOG.md has no \"## %s\" entry", v)
	}
	sorted := slices.Clone(headings)
	slices.SortFunc(sorted, func(a, b string) int { return semver.MustParse(b).Compare(semver.MustParse(a)) })
	assert.Equal(t, sorted, headings, "CHANGELOG.md entries are not newest first")
}
