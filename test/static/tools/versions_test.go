// Package tools checks that the tool versions pinned in hack/tools/versions.mk
// agree with the go.mod files the tools are actually built from
// (hack/tools/<name>/go.mod), so a stamp named after a version in
// versions.mk never stands for a binary built at another one.
package tools

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"golang.org/x/mod/modfile"

	"github.com/ml-operator/ml-operator/test/testutil"
)

// pin is how one versions.mk variable shows in a go.mod: the modules whose
// effective version (after replace directives) it fixes.
type pin struct {
	// goMod is the directory of the go.mod the tool is built from ("" for
	// tools installed with `go install module@$(VERSION)`, pinned in
	// versions.mk alone).
	goMod string
	// want maps a module path (at the version a go.mod has) to the version
	// versions.mk implies for it, or "" when the module is not tied to it.
	want func(version, module, got string) string
	// debian names the Debian package a tool is taken from instead
	// (hack/realnode/debian-binary.sh): its variable only names the stamp,
	// debian-<suite>, and no go.mod is involved.
	debian string
}

var (
	// A Kubernetes staging module (k8s.io/api, k8s.io/apiserver, ...) has a
	// plain v0.<minor>.<patch> version; k8s.io/klog/v2, k8s.io/utils and
	// k8s.io/kube-openapi are versioned on their own (major or pseudo-versions).
	stagingVersion = regexp.MustCompile(`^v0\.\d+\.\d+$`)
	// etcd's v3 modules share the release version.
	etcdV3Module = regexp.MustCompile(`^go\.etcd\.io/etcd/.+/v3$`)
)

// exactly ties one module to the variable's version as written.
func exactly(module string) func(string, string, string) string {
	return func(version, m, _ string) string {
		if m == module {
			return version
		}
		return ""
	}
}

// pins names, for every variable in versions.mk, the modules it fixes. A
// variable missing here fails the test, so a new tool is checked too.
var pins = map[string]pin{
	"K8S_VERSION": {goMod: "hack/tools/k8s", want: func(v, m, got string) string {
		switch {
		case m == "k8s.io/kubernetes":
			return "v" + v
		case strings.HasPrefix(m, "k8s.io/") && stagingVersion.MatchString(got):
			// 1.36.3 is v0.36.3 of every staging module.
			return "v0" + strings.TrimPrefix(v, strings.Split(v, ".")[0])
		}
		return ""
	}},
	"ETCD_VERSION": {goMod: "hack/tools/etcd", want: func(v, m, _ string) string {
		switch {
		case etcdV3Module.MatchString(m):
			return "v" + v
		}
		return ""
	}},
	"OPM_VERSION":          {goMod: "hack/tools/opm", want: exactly("github.com/operator-framework/operator-registry")},
	"OPERATOR_SDK_VERSION": {goMod: "hack/tools/opsdk", want: exactly("github.com/operator-framework/operator-sdk")},
	"COREDNS_VERSION":      {goMod: "hack/tools/coredns", want: exactly("github.com/coredns/coredns")},
	"REGISTRY_VERSION":     {debian: "docker-registry"},
	// The project's go.mod requires it (the PromQL engine) and builds the
	// server from it (a tool directive).
	"PROMETHEUS_VERSION":     {goMod: ".", want: exactly("github.com/prometheus/prometheus")},
	"CONTROLLER_GEN_VERSION": {want: exactly("sigs.k8s.io/controller-tools")},
	"KUSTOMIZE_VERSION":      {want: exactly("sigs.k8s.io/kustomize/kustomize/v5")},
	"KWOK_VERSION":           {goMod: "hack/tools/kwok", want: exactly("sigs.k8s.io/kwok")},
	"CRD_REF_DOCS_VERSION":   {want: exactly("github.com/elastic/crd-ref-docs")},
	// The benchmark's peer (make training-operator), go installed at this version.
	"TRAINING_OPERATOR_VERSION": {want: exactly("github.com/kubeflow/training-operator")},
}

// readVersionsMk reads the `NAME ?= value` lines of hack/tools/versions.mk.
func readVersionsMk(root string) (map[string]string, error) {
	data, err := os.ReadFile(filepath.Join(root, "hack", "tools", "versions.mk"))
	if err != nil {
		return nil, err
	}
	assign := regexp.MustCompile(`^([A-Z0-9_]+)\s*\??=\s*(\S+)\s*$`)
	vars := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		if m := assign.FindStringSubmatch(line); m != nil {
			vars[m[1]] = m[2]
		}
	}
	if len(vars) == 0 {
		return nil, fmt.Errorf("hack/tools/versions.mk pins no version")
	}
	return vars, nil
}

// modFile is what a go.mod builds with: its requires, with replace
// directives applied, and the packages its tool directives name.
type modFile struct {
	versions map[string]string
	tools    []string
}

func readGoMod(path string) (modFile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return modFile{}, err
	}
	f, err := modfile.Parse(path, data, nil)
	if err != nil {
		return modFile{}, err
	}
	m := modFile{versions: map[string]string{}}
	for _, tool := range f.Tool {
		m.tools = append(m.tools, tool.Path)
	}
	for _, r := range f.Require {
		m.versions[r.Mod.Path] = r.Mod.Version
	}
	for _, r := range f.Replace {
		switch {
		case r.New.Version == "":
			m.versions[r.Old.Path] = "(replaced by the directory " + r.New.Path + ")"
		case r.Old.Version == "" || m.versions[r.Old.Path] == r.Old.Version:
			m.versions[r.Old.Path] = r.New.Version
		}
	}
	return m, nil
}

// disagreements lists every place a go.mod under root disagrees with
// root/hack/tools/versions.mk. For a tool built from
// hack/tools/<name>/go.mod, the tool module and the modules released with it
// (Kubernetes staging, etcd) must be at the version versions.mk names. A tool
// versions.mk pins for `go install` is in no go.mod; should one ever build it
// (a tool directive), its module must be at the pinned version there too.
// (go.mod files may require these modules as libraries at their own
// versions: kubectl embeds kustomize, operator-sdk links controller-tools.)
func disagreements(root string) ([]string, error) {
	vars, err := readVersionsMk(root)
	if err != nil {
		return nil, err
	}
	paths, err := filepath.Glob(filepath.Join(root, "hack", "tools", "*", "go.mod"))
	if err != nil {
		return nil, err
	}
	paths = append([]string{filepath.Join(root, "go.mod")}, paths...)
	mods := map[string]modFile{}
	var dirs []string
	for _, path := range paths {
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return nil, err
		}
		dir := filepath.ToSlash(rel)
		if mods[dir], err = readGoMod(path); err != nil {
			return nil, err
		}
		dirs = append(dirs, dir)
	}

	var problems []string
	for _, name := range sortedKeys(vars) {
		version := vars[name]
		p, ok := pins[name]
		if !ok {
			problems = append(problems, fmt.Sprintf("versions.mk pins %s, which this test does not know: add the module(s) it fixes to pins", name))
			continue
		}
		if p.debian != "" {
			if !strings.HasPrefix(version, "debian-") {
				problems = append(problems, fmt.Sprintf("%s=%s: %s comes from Debian's package %s; name its stamp debian-<suite>", name, version, name, p.debian))
			}
			continue
		}
		if p.goMod != "" {
			m, ok := mods[p.goMod]
			if !ok {
				problems = append(problems, fmt.Sprintf("%s: %s/go.mod does not exist", name, p.goMod))
				continue
			}
			checked := 0
			for _, module := range sortedKeys(m.versions) {
				got := m.versions[module]
				if want := p.want(version, module, got); want != "" {
					checked++
					if got != want {
						problems = append(problems, fmt.Sprintf("%s/go.mod has %s %s, but versions.mk says %s=%s (want %s)",
							p.goMod, module, got, name, version, want))
					}
				}
			}
			if checked == 0 {
				problems = append(problems, fmt.Sprintf("%s/go.mod requires no module tied to %s=%s", p.goMod, name, version))
			}
			continue
		}
		for _, dir := range dirs {
			m := mods[dir]
			for _, tool := range m.tools {
				for _, module := range sortedKeys(m.versions) {
					got := m.versions[module]
					want := p.want(version, module, got)
					if want != "" && (tool == module || strings.HasPrefix(tool, module+"/")) && got != want {
						problems = append(problems, fmt.Sprintf("%s/go.mod builds %s from %s %s, but versions.mk says %s=%s",
							dir, tool, module, got, name, version))
					}
				}
			}
		}
	}
	return problems, nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// TestToolVersionsAgreeWithGoMods fails when a version in
// hack/tools/versions.mk and a go.mod disagree (see disagreements).
func TestToolVersionsAgreeWithGoMods(t *testing.T) {
	problems, err := disagreements(testutil.RepoRoot())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// The check finds a disagreement in each kind of pin: a copy of versions.mk
// and the go.mod files, each changed on one side.
func TestDisagreementsAreFound(t *testing.T) {
	root := testutil.RepoRoot()
	copyFile := func(t *testing.T, dst, rel string, edit func(string) string) {
		t.Helper()
		data, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		out := string(data)
		if edit != nil {
			if out = edit(out); out == string(data) {
				t.Fatalf("the edit of %s changed nothing", rel)
			}
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dst, rel)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, rel), []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	replace := func(old, new string) func(string) string {
		return func(s string) string { return strings.Replace(s, old, new, 1) }
	}
	vars, err := readVersionsMk(root)
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		versionsMk func(string) string
		goMods     map[string]func(string) string
		want       string
	}{
		"etcd bumped in versions.mk only": {
			versionsMk: replace("ETCD_VERSION           ?= "+vars["ETCD_VERSION"], "ETCD_VERSION           ?= 3.6.99"),
			want:       "hack/tools/etcd/go.mod has go.etcd.io/etcd/api/v3 v" + vars["ETCD_VERSION"] + ", but versions.mk says ETCD_VERSION=3.6.99",
		},
		"kwok bumped in its go.mod only": {
			goMods: map[string]func(string) string{"hack/tools/kwok/go.mod": replace(
				"sigs.k8s.io/kwok "+vars["KWOK_VERSION"], "sigs.k8s.io/kwok v0.99.0")},
			want: "hack/tools/kwok/go.mod has sigs.k8s.io/kwok v0.99.0, but versions.mk says KWOK_VERSION=" + vars["KWOK_VERSION"],
		},
		"opm bumped in its go.mod only": {
			goMods: map[string]func(string) string{"hack/tools/opm/go.mod": replace(
				"github.com/operator-framework/operator-registry "+vars["OPM_VERSION"], "github.com/operator-framework/operator-registry v1.99.0")},
			want: "hack/tools/opm/go.mod has github.com/operator-framework/operator-registry v1.99.0, but versions.mk says OPM_VERSION=" + vars["OPM_VERSION"],
		},
		"operator-sdk bumped in versions.mk only": {
			versionsMk: replace("OPERATOR_SDK_VERSION   ?= "+vars["OPERATOR_SDK_VERSION"], "OPERATOR_SDK_VERSION   ?= v1.99.0"),
			want:       "hack/tools/opsdk/go.mod has github.com/operator-framework/operator-sdk " + vars["OPERATOR_SDK_VERSION"] + ", but versions.mk says OPERATOR_SDK_VERSION=v1.99.0",
		},
		"one Kubernetes staging module left behind": {
			goMods: map[string]func(string) string{"hack/tools/k8s/go.mod": replace(
				"k8s.io/apiserver => k8s.io/apiserver v0.", "k8s.io/apiserver => k8s.io/apiserver v0.35.0 // ")},
			want: "hack/tools/k8s/go.mod has k8s.io/apiserver v0.35.0, but versions.mk says K8S_VERSION=" + vars["K8S_VERSION"],
		},
		"a tool versions.mk does not know": {
			versionsMk: func(s string) string { return s + "YQ_VERSION ?= v4.0.0\n" },
			want:       "versions.mk pins YQ_VERSION, which this test does not know",
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			copyFile(t, dir, "hack/tools/versions.mk", c.versionsMk)
			copyFile(t, dir, "go.mod", nil)
			for _, tool := range []string{"etcd", "k8s", "kwok", "opm", "opsdk"} {
				rel := "hack/tools/" + tool + "/go.mod"
				copyFile(t, dir, rel, c.goMods[rel])
			}
			problems, err := disagreements(dir)
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, p := range problems {
				found = found || strings.HasPrefix(p, c.want)
			}
			if !found {
				t.Errorf("want a problem starting %q, got %q", c.want, problems)
			}
		})
	}
}

// The project's go.mod carries no Kubernetes internals: kube-apiserver and
// etcd are built from hack/tools alone.
func TestProjectGoModHasNoKubernetesInternals(t *testing.T) {
	m, err := readGoMod(filepath.Join(testutil.RepoRoot(), "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for _, internal := range []string{"k8s.io/kubernetes", "go.etcd.io/etcd/server/v3"} {
		if v, ok := m.versions[internal]; ok {
			t.Errorf("go.mod requires %s %s: build it from hack/tools instead", internal, v)
		}
	}
}
