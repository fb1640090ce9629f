// Command gen-admission-rules writes the "Every rule and its exact message"
// table of docs/admission.md from the invalid-manifest corpus in
// test/testdata/invalid: one row per manifest, with the causes its header
// lines (# expect: / # error:) give, which webhooks/integration's
// TestInvalidManifestsAreRefused asserts word for word against a real
// kube-apiserver. Only the text between the markers
//
//	<!-- BEGIN GENERATED: rules ... -->
//	<!-- END GENERATED: rules -->
//
// is replaced. `make docs` runs it; test/static/docs/admission_rules_test.go fails
// when the committed section is stale.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// The sections this command writes, each between
// "<!-- BEGIN GENERATED: <name> ... -->" and "<!-- END GENERATED: <name> -->".
const (
	rulesSection       = "rules"
	schemaRulesSection = "schema-rules"
)

func main() {
	corpus := flag.String("corpus", "test/testdata/invalid", "directory of the invalid manifests (*.yaml)")
	crds := flag.String("crds", "config/crd/bases", "directory of the generated CRDs (*.yaml)")
	doc := flag.String("doc", "docs/admission.md", "the document holding the markers")
	out := flag.String("out", "", "where to write the document (default: -doc, in place)")
	flag.Parse()
	if *out == "" {
		*out = *doc
	}
	if err := run(*corpus, *crds, *doc, *out); err != nil {
		fmt.Fprintln(os.Stderr, "gen-admission-rules:", err)
		os.Exit(1)
	}
}

func run(corpusDir, crdDir, docPath, outPath string) error {
	rules, err := readCorpus(corpusDir)
	if err != nil {
		return err
	}
	schemaRules, err := readCRDRules(crdDir)
	if err != nil {
		return err
	}
	doc, err := os.ReadFile(docPath)
	if err != nil {
		return err
	}
	if doc, err = replaceSection(doc, rulesSection, renderTable(rules)); err != nil {
		return fmt.Errorf("%s: %w", docPath, err)
	}
	if doc, err = replaceSection(doc, schemaRulesSection, renderSchemaTable(schemaRules, rules)); err != nil {
		return fmt.Errorf("%s: %w", docPath, err)
	}
	return os.WriteFile(outPath, doc, 0o644)
}

// rule is one manifest of the corpus: what it breaks and how it is refused.
type rule struct {
	File        string   // base name in the corpus
	Kind        string   // of the last document, which is the one refused
	Version     string   // ml.example.com/<Version>
	Description string   // the header's comment lines, joined
	Causes      []string // # expect: lines, in order
	FullError   string   // # error: line
	RefusedBy   string   // # refused-by: line ("schema"), empty for the webhooks
	Strict      bool     // # field-validation: Strict
	Update      bool     // several documents: the last one updates the object
}

// directive matches the header lines the integration harness reads.
var directive = regexp.MustCompile(`^# (expect|error|refused-by|field-validation): (.*)$`)

// documentSeparator splits a multi-document YAML file.
var documentSeparator = regexp.MustCompile(`(?m)^---[ \t]*$`)

// unknownField is the path a strict decoding error names.
var unknownField = regexp.MustCompile(`unknown field "([^"]+)"`)

func readCorpus(dir string) ([]rule, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("no manifests in %s", dir)
	}
	rules := make([]rule, 0, len(paths))
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		r, err := parseManifest(filepath.Base(p), data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		rules = append(rules, r)
	}
	sortRules(rules)
	return rules, nil
}

// parseManifest reads the header comment (up to the first other line) and
// the kind and version of the last document.
func parseManifest(name string, data []byte) (rule, error) {
	r := rule{File: name}
	var description []string
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimRight(line, "\r")
		if strings.TrimSpace(line) == "" {
			continue
		}
		if !strings.HasPrefix(line, "#") {
			break
		}
		m := directive.FindStringSubmatch(line)
		if m == nil {
			description = append(description, strings.TrimSpace(strings.TrimPrefix(line, "#")))
			continue
		}
		switch m[1] {
		case "expect":
			r.Causes = append(r.Causes, m[2])
		case "error":
			r.FullError = m[2]
		case "refused-by":
			r.RefusedBy = m[2]
		case "field-validation":
			r.Strict = m[2] == "Strict"
		}
	}
	r.Description = strings.Join(description, " ")
	if len(r.Causes) == 0 && r.FullError == "" {
		return r, fmt.Errorf("no # expect: or # error: line")
	}

	var docs []string
	for _, d := range documentSeparator.Split(string(data), -1) {
		if strings.TrimSpace(stripComments(d)) != "" {
			docs = append(docs, d)
		}
	}
	if len(docs) == 0 {
		return r, fmt.Errorf("no manifest")
	}
	r.Update = len(docs) > 1
	var tm struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := yaml.Unmarshal([]byte(docs[len(docs)-1]), &tm); err != nil {
		return r, fmt.Errorf("last document: %w", err)
	}
	if tm.Kind == "" || tm.APIVersion == "" {
		return r, fmt.Errorf("last document has no apiVersion or kind")
	}
	r.Kind = tm.Kind
	r.Version = tm.APIVersion[strings.LastIndex(tm.APIVersion, "/")+1:]
	return r, nil
}

func stripComments(doc string) string {
	var kept []string
	for _, l := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			kept = append(kept, l)
		}
	}
	return strings.Join(kept, "\n")
}

// kindOrder puts the stored version first and the deprecated one after it.
var kindOrder = map[string]int{"TrainingJob/v1": 0, "TrainingJob/v1alpha1": 1, "ModelDeployment/v1": 2}

func order(r rule) int {
	if o, ok := kindOrder[r.Kind+"/"+r.Version]; ok {
		return o
	}
	return len(kindOrder)
}

// sortRules orders by kind and version, then field path, then file.
func sortRules(rules []rule) {
	sort.SliceStable(rules, func(i, j int) bool {
		a, b := rules[i], rules[j]
		if order(a) != order(b) {
			return order(a) < order(b)
		}
		if a.Kind+a.Version != b.Kind+b.Version {
			return a.Kind+a.Version < b.Kind+b.Version
		}
		pa, pb := strings.Join(a.fieldPaths(), ","), strings.Join(b.fieldPaths(), ",")
		if pa != pb {
			return pa < pb
		}
		return a.File < b.File
	})
}

// fieldPaths are the distinct paths the causes name, in order. The API
// server's "<nil>: ... some validation rules were not checked" companion
// cause names none.
func (r rule) fieldPaths() []string {
	var paths []string
	seen := map[string]bool{}
	add := func(p string) {
		if p != "" && p != "<nil>" && !seen[p] {
			seen[p] = true
			paths = append(paths, p)
		}
	}
	for _, c := range r.Causes {
		if i := strings.Index(c, ": "); i > 0 {
			add(c[:i])
		}
	}
	if m := unknownField.FindStringSubmatch(r.FullError); m != nil {
		add(m[1])
	}
	return paths
}

func (r rule) refusedBy() string {
	switch {
	case r.FullError != "" && r.Strict:
		return "API server (strict decoding, before the webhooks)"
	case r.FullError != "":
		return "API server (before the webhooks)"
	case r.RefusedBy != "":
		return r.RefusedBy
	default:
		return "webhook"
	}
}

func renderTable(rules []rule) string {
	var b strings.Builder
	counts := map[string]int{}
	for _, r := range rules {
		switch {
		case r.FullError != "":
			counts["decoding"]++
		case r.RefusedBy == "schema":
			counts["schema"]++
		default:
			counts["webhook"]++
		}
	}
	fmt.Fprintf(&b, "%d manifests: %d refused by the webhooks, %d by the CRD schema (OpenAPI bounds, enums, CEL), %d by the API server before the webhooks.\n\n",
		len(rules), counts["webhook"], counts["schema"], counts["decoding"])
	b.WriteString("| kind/version | field path | rule (what the manifest does) | exact message | refused by | corpus file |\n")
	b.WriteString("|---|---|---|---|---|---|\n")
	for _, r := range rules {
		var paths []string
		for _, p := range r.fieldPaths() {
			paths = append(paths, code(p))
		}
		description := r.Description
		if r.Update {
			description += " (update)"
		}
		var messages []string
		for _, c := range r.Causes {
			messages = append(messages, code(c))
		}
		if r.FullError != "" {
			messages = append(messages, code(r.FullError))
		}
		fmt.Fprintf(&b, "| %s/%s | %s | %s | %s | %s | [%s](../test/testdata/invalid/%s) |\n",
			r.Kind, r.Version, strings.Join(paths, "<br>"), cell(description),
			strings.Join(messages, "<br>"), r.refusedBy(), r.File, r.File)
	}
	return b.String()
}

// code is s as a code span that survives a table cell: pipes escaped, and
// a fence longer than any run of backticks inside.
func code(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	fence := "`"
	for strings.Contains(s, fence) {
		fence += "`"
	}
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") {
		s = " " + s + " "
	}
	return fence + s + fence
}

// cell is prose that survives a table cell and shows <name> as written.
func cell(s string) string {
	return strings.NewReplacer("|", `\|`, "<", "&lt;", ">", "&gt;").Replace(s)
}

// replaceSection puts body between the markers of the named section,
// leaving the rest of doc byte for byte.
func replaceSection(doc []byte, name, body string) ([]byte, error) {
	beginPrefix := []byte("<!-- BEGIN GENERATED: " + name + " ")
	endMarker := []byte("<!-- END GENERATED: " + name + " -->")
	begin := bytes.Index(doc, beginPrefix)
	end := bytes.Index(doc, endMarker)
	if begin < 0 || end < 0 || end < begin {
		return nil, fmt.Errorf("want the markers %q ... -->, then %q", beginPrefix, endMarker)
	}
	beginEnd := bytes.Index(doc[begin:], []byte("-->"))
	if beginEnd < 0 || begin+beginEnd > end {
		return nil, fmt.Errorf("the marker %q ... does not end with -->", beginPrefix)
	}
	var out bytes.Buffer
	out.Write(doc[:begin+beginEnd+len("-->")])
	out.WriteString("\n")
	out.WriteString(body)
	out.Write(doc[end:])
	return out.Bytes(), nil
}
