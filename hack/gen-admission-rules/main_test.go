package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

func TestParseManifestReadsTheHeader(t *testing.T) {
	data := []byte(`# Changing the framework of an existing job,
# over two comment lines.
# refused-by: schema
# expect: spec.framework: Invalid value: "tensorflow": field is immutable
# expect: <nil>: Invalid value: null: some validation rules were not checked
apiVersion: ml.example.com/v1
kind: TrainingJob
metadata:
  name: a
---
# a comment inside the second document
apiVersion: ml.example.com/v1alpha1
kind: TrainingJob
metadata:
  name: a
`)
	r, err := parseManifest("x.yaml", data)
	require.NoError(t, err)
	assert.Equal(t, rule{
		File:        "x.yaml",
		Kind:        "TrainingJob",
		Version:     "v1alpha1",
		Description: "Changing the framework of an existing job, over two comment lines.",
		Causes: []string{
			`spec.framework: Invalid value: "tensorflow": field is immutable`,
			`<nil>: Invalid value: null: some validation rules were not checked`,
		},
		RefusedBy: "schema",
		Update:    true,
	}, r)
	assert.Equal(t, []string{"spec.framework"}, r.fieldPaths())
	assert.Equal(t, "schema", r.refusedBy())
}

func TestParseManifestStrictDecodingError(t *testing.T) {
	r, err := parseManifest("u.yaml", []byte(`# A misspelt field.
# error: TrainingJob in version "v1" cannot be handled as a TrainingJob: strict decoding error: unknown field "spec.numWorker"
# field-validation: Strict
apiVersion: ml.example.com/v1
kind: TrainingJob
`))
	require.NoError(t, err)
	assert.Equal(t, []string{"spec.numWorker"}, r.fieldPaths())
	assert.Equal(t, "API server (strict decoding, before the webhooks)", r.refusedBy())
	assert.False(t, r.Update)
}

func TestParseManifestWithoutExpectationIsAnError(t *testing.T) {
	_, err := parseManifest("n.yaml", []byte("# Nothing expected.\napiVersion: ml.example.com/v1\nkind: TrainingJob\n"))
	require.Error(t, err)
}

func TestRenderTableEscapesCells(t *testing.T) {
	table := renderTable([]rule{{
		File: "p.yaml", Kind: "ModelDeployment", Version: "v1",
		Description: "A name (<name>-<version>) with a | pipe",
		Causes:      []string{"spec.x: Invalid value: \"a|b`c\": bad"},
	}})
	assert.Contains(t, table, "| ModelDeployment/v1 | `spec.x` | A name (&lt;name&gt;-&lt;version&gt;) with a \\| pipe | ``spec.x: Invalid value: \"a\\|b`c\": bad`` | webhook | [p.yaml](../test/testdata/invalid/p.yaml) |\n")
	assert.True(t, strings.HasPrefix(table, "1 manifests: 1 refused by the webhooks, 0 by the CRD schema"))
}

func TestSortRulesByKindVersionThenPath(t *testing.T) {
	rules := []rule{
		{File: "c", Kind: "ModelDeployment", Version: "v1", Causes: []string{"spec.a: x"}},
		{File: "b", Kind: "TrainingJob", Version: "v1alpha1", Causes: []string{"spec.a: x"}},
		{File: "z", Kind: "TrainingJob", Version: "v1", Causes: []string{"spec.b: x"}},
		{File: "y", Kind: "TrainingJob", Version: "v1", Causes: []string{"spec.a: x"}},
	}
	sortRules(rules)
	var files []string
	for _, r := range rules {
		files = append(files, r.File)
	}
	assert.Equal(t, []string{"y", "z", "b", "c"}, files)
}

func TestReplaceSectionKeepsTheRest(t *testing.T) {
	begin, end := "<!-- BEGIN GENERATED: rules (how) -->", "<!-- END GENERATED: rules -->"
	other := "<!-- BEGIN GENERATED: schema-rules (how) -->\nkept\n<!-- END GENERATED: schema-rules -->\n"
	doc := "before\n" + begin + "\nold\n" + end + "\nbetween\n" + other
	out, err := replaceSection([]byte(doc), "rules", "new\n")
	require.NoError(t, err)
	assert.Equal(t, "before\n"+begin+"\nnew\n"+end+"\nbetween\n"+other, string(out))

	_, err = replaceSection([]byte("no markers\n"), "rules", "new\n")
	require.Error(t, err)
}

func TestWalkSchemaListsConstraintsAndSkipsEmbeddedTypes(t *testing.T) {
	one, ten := int64(1), int64(10)
	maxPort := float64(65535)
	spec := apiextensionsv1.JSONSchemaProps{
		Required: []string{"versions"},
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"port": {Maximum: &maxPort},
			"versions": {MinItems: &one, MaxItems: &ten, Items: &apiextensionsv1.JSONSchemaPropsOrArray{
				Schema: &apiextensionsv1.JSONSchemaProps{Properties: map[string]apiextensionsv1.JSONSchemaProps{
					"name": {Pattern: "^[a-z]+$"},
				}},
			}},
			"scaling": {
				XValidations: apiextensionsv1.ValidationRules{{Rule: "x", FieldPath: ".minReplicas", Message: "minReplicas must be less than or equal to maxReplicas"}},
				Properties: map[string]apiextensionsv1.JSONSchemaProps{
					"metrics": {MaxItems: &ten, Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{
						Properties: map[string]apiextensionsv1.JSONSchemaProps{"name": {MinLength: &one}},
					}}},
				},
			},
		},
	}
	var got []string
	walkSchema("spec", &spec, func(path, typ, value string) {
		for _, e := range embeddedTypes {
			if strings.HasPrefix(path, e) {
				return
			}
		}
		got = append(got, path+" "+typ+" "+value)
	})
	assert.Equal(t, []string{
		"spec.versions required ",
		"spec.port maximum 65535",
		"spec.scaling.minReplicas cel minReplicas must be less than or equal to maxReplicas",
		"spec.scaling.metrics maxItems 10",
		"spec.versions minItems 1",
		"spec.versions maxItems 10",
		"spec.versions[*].name pattern ^[a-z]+$",
	}, got)
}

func TestExercisesMatchesCauseToRule(t *testing.T) {
	r := func(path, typ, value string) schemaRule {
		return schemaRule{Kind: "TrainingJob", Version: "v1", Path: path, Type: typ, Value: value}
	}
	cases := []struct {
		rule  schemaRule
		cause string
		want  bool
	}{
		{r("spec.port", "maximum", "65535"), "spec.port: Invalid value: 65536: spec.port in body should be less than or equal to 65535", true},
		{r("spec.port", "minimum", "1"), "spec.port: Invalid value: 65536: spec.port in body should be less than or equal to 65535", false},
		{r("spec.numWorkers", "minimum", "1"), "spec.numWorkers: Invalid value: -1: must be between 1 and 100", true},
		{r("spec.numWorkers", "maximum", "100"), "spec.numWorkers: Invalid value: -1: must be between 1 and 100", false},
		{r("spec.numWorkers", "maximum", "100"), "spec.numWorkers: Invalid value: 101: must be between 1 and 100", true},
		{r("spec.versions[*].name", "pattern", "^[a-z]$"), `spec.versions[3].name: Invalid value: "V": a lowercase RFC 1123 label must consist of ... regex used for validation is '...'`, true},
		{r("spec.hyperparameters", "maxProperties", "256"), "spec.hyperparameters: Too many: 300: must have at most 256 items", true},
		{r("spec.framework", "enum", `"pytorch"`), `spec.framework: Invalid value: "tensorflow": field is immutable`, false},
		{r("spec.framework", "cel", "framework is immutable"), `spec.framework: Invalid value: "tensorflow": field is immutable`, true},
		{r("spec.framework", "cel", "framework is immutable"), `spec.framework: Unsupported value: "caffe": supported values: "pytorch"`, false},
		{r("spec.versions", "cel", "version weights must sum to 100, got ..."), "spec.versions: Invalid value: 90: version weights must sum to 100, got 90", true},
		{r("spec.command", "required", ""), `spec.command: Invalid value: "null": spec.command in body must be of type array: "null"`, true},
		{r("spec.model", "maxLength", "2048"), "spec.dataset: Too long: may not be more than 2048 bytes", false},
	}
	for _, c := range cases {
		assert.Equalf(t, c.want, exercises(c.rule, c.cause), "%+v by %q", c.rule, c.cause)
	}
}
