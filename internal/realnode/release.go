package realnode

import (
	"bytes"
	"fmt"
	"sort"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/semver"
)

// raiseToProject rewrites an earlier release's go.mod (release) so that
// every module it requires at an older version than the project's go.mod
// (project) does is required at the project's version, and returns the new
// go.mod with the modules it raised ("path old => new", sorted).
//
// Why: Go's build cache compiles a package once only when the package and
// everything it imports are at the same versions. 0.1.0's go.mod differs
// from the project's by patch releases of a few modules, go-logr/logr
// among them, and logr sits under klog, so building 0.1.0's manager as it
// was would compile the whole client-go stack a second time (minutes of a
// cold CI run) for the upgrade test's old manager. Its code is 0.1.0's;
// the modules it shares with the project are the project's versions, never
// older (docs/decisions.md, "0.1.0's manager builds at the project's
// dependency versions").
func raiseToProject(release, project []byte) ([]byte, []string, error) {
	rel, err := modfile.Parse("go.mod", release, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("the release's go.mod: %w", err)
	}
	proj, err := modfile.Parse("go.mod", project, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("the project's go.mod: %w", err)
	}
	want := map[string]string{}
	for _, r := range proj.Require {
		want[r.Mod.Path] = r.Mod.Version
	}
	var raised []string
	for _, r := range rel.Require {
		v, ok := want[r.Mod.Path]
		if !ok || semver.Compare(v, r.Mod.Version) <= 0 {
			continue
		}
		raised = append(raised, fmt.Sprintf("%s %s => %s", r.Mod.Path, r.Mod.Version, v))
		if err := rel.AddRequire(r.Mod.Path, v); err != nil {
			return nil, nil, err
		}
	}
	sort.Strings(raised)
	out, err := rel.Format()
	if err != nil {
		return nil, nil, err
	}
	return out, raised, nil
}

// mergeSums returns the lines of a and b, each once, sorted: a go.sum that
// verifies both modules' dependencies.
func mergeSums(a, b []byte) []byte {
	seen := map[string]bool{}
	var lines [][]byte
	for _, l := range append(bytes.Split(a, []byte("\n")), bytes.Split(b, []byte("\n"))...) {
		if len(bytes.TrimSpace(l)) == 0 || seen[string(l)] {
			continue
		}
		seen[string(l)] = true
		lines = append(lines, l)
	}
	sort.Slice(lines, func(i, j int) bool { return bytes.Compare(lines[i], lines[j]) < 0 })
	return append(bytes.Join(lines, []byte("\n")), '\n')
}
