package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// schemaRule is one constraint of a CRD's schema on a field users write: an
// OpenAPI bound, enum, pattern, length or size, or a CEL rule.
type schemaRule struct {
	Kind, Version string
	Path          string // spec.versions[*].name; list items and map values are [*]
	Type          string // required, minimum, maximum, enum, pattern, minLength, maxLength, minItems, maxItems, maxProperties, cel
	Value         string // the bound, the values, the pattern, or the CEL message
}

// embeddedTypes are Kubernetes' own types inside our specs (pod template,
// resources, env, affinity, tolerations, HPA metrics): their fields follow
// Kubernetes' rules for those types and are not listed.
var embeddedTypes = []string{
	"spec.env[*].", "spec.resources.", "spec.template.", "spec.scheduling.affinity.",
	"spec.scheduling.tolerations[*].", "spec.scaling.metrics[*].",
}

func readCRDRules(dir string) ([]schemaRule, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("no CRDs in %s", dir)
	}
	var rules []schemaRule
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal(data, &crd); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		for _, v := range crd.Spec.Versions {
			if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
				continue
			}
			root := v.Schema.OpenAPIV3Schema
			add := func(path, typ, value string) {
				for _, e := range embeddedTypes {
					if strings.HasPrefix(path, e) {
						return
					}
				}
				rules = append(rules, schemaRule{Kind: crd.Spec.Names.Kind, Version: v.Name, Path: path, Type: typ, Value: value})
			}
			// CEL rules on the object itself name metadata.name in ours.
			for _, r := range root.XValidations {
				path := strings.TrimPrefix(r.FieldPath, ".")
				if path == "" && strings.Contains(r.Rule, "self.metadata.name") {
					path = "metadata.name"
				}
				add(path, "cel", celMessage(r))
			}
			if spec, ok := root.Properties["spec"]; ok {
				walkSchema("spec", &spec, add)
			}
		}
	}
	sort.SliceStable(rules, func(i, j int) bool {
		a, b := rules[i], rules[j]
		ka, kb := kindOrder[a.Kind+"/"+a.Version], kindOrder[b.Kind+"/"+b.Version]
		if ka != kb {
			return ka < kb
		}
		if a.Path != b.Path {
			return a.Path < b.Path
		}
		return a.Type < b.Type
	})
	return rules, nil
}

// celMessage is the message of a CEL rule, or the literal start of its
// messageExpression.
func celMessage(r apiextensionsv1.ValidationRule) string {
	if r.Message != "" {
		return r.Message
	}
	if m := regexp.MustCompile(`^'([^'%]*)`).FindStringSubmatch(r.MessageExpression); m != nil {
		return strings.TrimSpace(m[1]) + " ..."
	}
	return r.Rule
}

func walkSchema(path string, s *apiextensionsv1.JSONSchemaProps, add func(path, typ, value string)) {
	num := func(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
	for _, name := range s.Required {
		add(path+"."+name, "required", "")
	}
	if s.Minimum != nil {
		add(path, "minimum", num(*s.Minimum))
	}
	if s.Maximum != nil {
		add(path, "maximum", num(*s.Maximum))
	}
	if len(s.Enum) > 0 {
		var values []string
		for _, e := range s.Enum {
			values = append(values, string(e.Raw))
		}
		add(path, "enum", strings.Join(values, ", "))
	}
	if s.Pattern != "" {
		add(path, "pattern", s.Pattern)
	}
	if s.MinLength != nil {
		add(path, "minLength", strconv.FormatInt(*s.MinLength, 10))
	}
	if s.MaxLength != nil {
		add(path, "maxLength", strconv.FormatInt(*s.MaxLength, 10))
	}
	if s.MinItems != nil {
		add(path, "minItems", strconv.FormatInt(*s.MinItems, 10))
	}
	if s.MaxItems != nil {
		add(path, "maxItems", strconv.FormatInt(*s.MaxItems, 10))
	}
	if s.MaxProperties != nil {
		add(path, "maxProperties", strconv.FormatInt(*s.MaxProperties, 10))
	}
	for _, r := range s.XValidations {
		p := path
		if r.FieldPath != "" {
			p = path + r.FieldPath
		}
		add(p, "cel", celMessage(r))
	}
	names := make([]string, 0, len(s.Properties))
	for n := range s.Properties {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		child := s.Properties[n]
		walkSchema(path+"."+n, &child, add)
	}
	if s.Items != nil && s.Items.Schema != nil {
		walkSchema(path+"[*]", s.Items.Schema, add)
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		walkSchema(path+"[*]", s.AdditionalProperties.Schema, add)
	}
}

// indexOrKey is a list index or map key in a field path.
var indexOrKey = regexp.MustCompile(`\[[^\]]*\]`)

// betweenBounds is a webhook's range message with the value refused.
var betweenBounds = regexp.MustCompile(`^Invalid value: (-?\d+): must be between (-?\d+) and (-?\d+)$`)

// celKeywords tie a CEL rule's message to the webhook message for the same
// rule (the webhooks answer first, in their own words).
var celKeywords = []string{"immutable", "greater than zero", "sum to 100", "less than or equal to",
	"less than", "only supported with framework", "required when", "at most 52 characters"}

// exercises reports whether a cause (path: message) of a corpus manifest
// refuses the object for rule r: the cause names r's field, and its message
// is the schema's message for r's kind of constraint, or the webhook's
// message for the same rule.
func exercises(r schemaRule, cause string) bool {
	i := strings.Index(cause, ": ")
	if i < 0 {
		return false
	}
	path, msg := indexOrKey.ReplaceAllString(cause[:i], "[*]"), cause[i+2:]
	if path != r.Path {
		return false
	}
	switch r.Type {
	case "required":
		// Left out: the webhooks' Required, the schema's type error for
		// null, or the empty value a left-out string decodes to.
		return strings.HasPrefix(msg, "Required value") || strings.HasSuffix(msg, `: "null"`) ||
			strings.HasPrefix(msg, `Invalid value: "": `)
	case "minimum":
		if m := betweenBounds.FindStringSubmatch(msg); m != nil {
			v, _ := strconv.Atoi(m[1])
			lo, _ := strconv.Atoi(m[2])
			return v < lo && m[2] == r.Value
		}
		return strings.Contains(msg, "should be greater than or equal to "+r.Value) ||
			strings.Contains(msg, "must be at least "+r.Value)
	case "maximum":
		if m := betweenBounds.FindStringSubmatch(msg); m != nil {
			v, _ := strconv.Atoi(m[1])
			hi, _ := strconv.Atoi(m[3])
			return v > hi && m[3] == r.Value
		}
		return strings.Contains(msg, "should be less than or equal to "+r.Value)
	case "enum":
		return strings.HasPrefix(msg, "Unsupported value:")
	case "pattern":
		return strings.Contains(msg, "should match '") || strings.Contains(msg, "quantities must match the regular expression") ||
			strings.Contains(msg, "regex used for validation") || strings.Contains(msg, "must start with one of")
	case "minLength":
		return strings.Contains(msg, "should be at least "+r.Value+" chars long") ||
			strings.HasPrefix(msg, `Invalid value: "": a lowercase RFC 1123 label`)
	case "maxLength":
		return strings.Contains(msg, "may not be more than "+r.Value+" bytes")
	case "minItems":
		return strings.HasPrefix(msg, "Required value: between "+r.Value+" ")
	case "maxItems", "maxProperties":
		return strings.HasPrefix(msg, "Too many: ") && strings.HasSuffix(msg, "must have at most "+r.Value+" items")
	case "cel":
		if strings.Contains(msg, strings.TrimSuffix(r.Value, " ...")) {
			return true
		}
		for _, k := range celKeywords {
			if strings.Contains(r.Value, k) && strings.Contains(msg, k) {
				return true
			}
		}
	}
	return false
}

// corpusFilesFor are the corpus manifests that exercise r.
func corpusFilesFor(r schemaRule, corpus []rule) []string {
	var files []string
	for _, c := range corpus {
		if c.Kind != r.Kind || c.Version != r.Version {
			continue
		}
		for _, cause := range c.Causes {
			if exercises(r, cause) {
				files = append(files, c.File)
				break
			}
		}
	}
	return files
}

func describeSchemaRule(r schemaRule) string {
	switch r.Type {
	case "required":
		return "required"
	case "minimum":
		return "at least " + r.Value
	case "maximum":
		return "at most " + r.Value
	case "enum":
		return "one of " + r.Value
	case "pattern":
		return "matches " + code(r.Value)
	case "minLength":
		return "at least " + plural(r.Value, "character")
	case "maxLength":
		return "at most " + plural(r.Value, "byte")
	case "minItems":
		return "at least " + plural(r.Value, "item")
	case "maxItems":
		return "at most " + plural(r.Value, "item")
	case "maxProperties":
		return "at most " + plural(r.Value, "entry")
	case "cel":
		return "CEL: " + code(r.Value)
	}
	return r.Type + " " + r.Value
}

func plural(n, word string) string {
	switch {
	case n == "1":
		return n + " " + word
	case strings.HasSuffix(word, "y"):
		return n + " " + strings.TrimSuffix(word, "y") + "ies"
	}
	return n + " " + word + "s"
}

func renderSchemaTable(rules []schemaRule, corpus []rule) string {
	var b strings.Builder
	covered := 0
	rows := make([]string, 0, len(rules))
	for _, r := range rules {
		files := corpusFilesFor(r, corpus)
		var links []string
		for _, f := range files {
			links = append(links, fmt.Sprintf("[%s](../test/testdata/invalid/%s)", f, f))
		}
		cell := strings.Join(links, "<br>")
		if len(files) > 0 {
			covered++
		} else {
			cell = "none yet"
		}
		rows = append(rows, fmt.Sprintf("| %s/%s | %s | %s | %s |\n", r.Kind, r.Version, code(r.Path), describeSchemaRule(r), cell))
	}
	fmt.Fprintf(&b, "%d schema rules on fields users write; %d are exercised by a corpus manifest (its exact message is in the table above), %d by none yet.\n\n",
		len(rules), covered, len(rules)-covered)
	b.WriteString("| kind/version | field path | rule (as the CRD states it) | corpus manifests |\n")
	b.WriteString("|---|---|---|---|\n")
	for _, row := range rows {
		b.WriteString(row)
	}
	return b.String()
}
