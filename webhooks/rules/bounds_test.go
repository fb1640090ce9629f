package rules

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

const quantityRule = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"

// A value that its own type refuses to decode is found by field path:
// nested struct fields, map keys, list indexes, embedded metadata. Each want
// is the start of one error (the whole error where the rule is ours to know).
func TestUndecodableValuesNamesTheFieldPath(t *testing.T) {
	cases := map[string]struct {
		raw  string
		want []string
	}{
		"checkpoint size": {`{"spec":{"checkpoint":{"storage":{"size":"lots"}}}}`,
			[]string{`spec.checkpoint.storage.size: Invalid value: "lots": ` + quantityRule}},
		"resource limit by key": {`{"spec":{"resources":{"limits":{"cpu":"two","memory":"1Gi"}}}}`,
			[]string{`spec.resources.limits[cpu]: Invalid value: "two": ` + quantityRule}},
		"volume in a list": {`{"spec":{"template":{"volumes":[{"name":"a"},{"name":"b","emptyDir":{"sizeLimit":"x"}}]}}}`,
			[]string{`spec.template.volumes[1].emptyDir.sizeLimit: Invalid value: "x": ` + quantityRule}},
		"a boolean size": {`{"spec":{"checkpoint":{"storage":{"size":true}}}}`,
			[]string{`spec.checkpoint.storage.size: Invalid value: true: `}},
		"two at once": {`{"spec":{"resources":{"limits":{"cpu":"a"},"requests":{"cpu":"b"}}}}`,
			[]string{`spec.resources.limits[cpu]: Invalid value: "a": ` + quantityRule,
				`spec.resources.requests[cpu]: Invalid value: "b": ` + quantityRule}},
		"metadata timestamp": {`{"metadata":{"name":"j","creationTimestamp":"yesterday"}}`,
			[]string{`metadata.creationTimestamp: Invalid value: "yesterday": `}},
		"a string for an integer": {`{"spec":{"numWorkers":"two"}}`,
			[]string{`spec.numWorkers: Invalid value: "string": spec.numWorkers in body must be of type integer`}},
		"a fraction for an integer": {`{"spec":{"numWorkers":1.5}}`,
			[]string{`spec.numWorkers: Invalid value: 1.5: must be a 32-bit integer`}},
		"past int32": {`{"spec":{"numWorkers":99999999999}}`,
			[]string{`spec.numWorkers: Invalid value: 99999999999: must be a 32-bit integer`}},
		"past int64": {`{"spec":{"runPolicy":{"activeDeadlineSeconds":100000000000000000000}}}`,
			[]string{`spec.runPolicy.activeDeadlineSeconds: Invalid value: 100000000000000000000: must be a 64-bit integer`}},
		"an object for a list": {`{"spec":{"command":{"python":"train.py"}}}`,
			[]string{`spec.command: Invalid value: "object": spec.command in body must be of type array`}},
		"a number in a list of strings": {`{"spec":{"args":["--epochs",10]}}`,
			[]string{`spec.args[1]: Invalid value: "integer": spec.args[1] in body must be of type string`}},
		"a string for a boolean": {`{"spec":{"suspend":"yes"}}`,
			[]string{`spec.suspend: Invalid value: "string": spec.suspend in body must be of type boolean`}},
		"a list for a map": {`{"spec":{"hyperparameters":[1]}}`,
			[]string{`spec.hyperparameters: Invalid value: "array": spec.hyperparameters in body must be of type object`}},
		"a number for a struct in a list": {`{"spec":{"env":[{"name":"A","value":"1"},7]}}`,
			[]string{`spec.env[1]: Invalid value: "integer": spec.env[1] in body must be of type object`}},
		"everything decodes": {`{"metadata":{"name":"j"},"spec":{"checkpoint":{"storage":{"size":"10Gi"}},"hyperparameters":{"a":[1]}}}`, nil},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			errs := UndecodableValues([]byte(tc.raw), reflect.TypeFor[mlv1.TrainingJob](), nil)
			require.Len(t, errs, len(tc.want), "%v", errs)
			for i, e := range errs {
				assert.Truef(t, strings.HasPrefix(e.Error(), tc.want[i]), "got %q, want it to start with %q", e.Error(), tc.want[i])
			}
		})
	}
}

// hyperparameters is n keys p000, p001, ... of valueBytes each.
func hyperparameters(n, valueBytes int) map[string]mlv1.HyperparameterValue {
	hp := map[string]mlv1.HyperparameterValue{}
	for i := range n {
		// valueBytes of JSON: the string and its two quotes.
		hp[fmt.Sprintf("p%03d", i)] = mlv1.NewHyperparameter(strings.Repeat("x", valueBytes-2))
	}
	return hp
}

func specPath() *field.Path { return field.NewPath("spec") }

// Hyperparameters are bounded in number (256), per value (4 KiB of JSON)
// and in all (64 KiB), each refusal naming its path.
func TestHyperparameterBounds(t *testing.T) {
	cases := map[string]struct {
		hp   map[string]mlv1.HyperparameterValue
		want []string
	}{
		"256 small values":        {hyperparameters(256, 10), nil},
		"one value of 4096 bytes": {hyperparameters(1, mlv1.MaxHyperparameterValueBytes), nil},
		"257 keys":                {hyperparameters(257, 10), []string{"spec.hyperparameters: Too many: 257: must have at most 256 items"}},
		"one value of 4097 bytes": {hyperparameters(1, mlv1.MaxHyperparameterValueBytes+1),
			[]string{"spec.hyperparameters[p000]: Too long: may not be more than 4096 bytes"}},
		"20 values of 4000 bytes": {hyperparameters(20, 4000), []string{"spec.hyperparameters: Too long: may not be more than 65536 bytes"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got []string
			for _, e := range validateHyperparameters(tc.hp, specPath().Child("hyperparameters")) {
				got = append(got, e.Error())
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

// A storage size must be positive, for checkpoints and for the model cache.
func TestStorageSizeMustBePositive(t *testing.T) {
	for size, want := range map[string]string{
		"10Gi":  "",
		"1":     "",
		"0":     `spec.checkpoint.storage.size: Invalid value: "0": must be greater than zero`,
		"-10Gi": `spec.checkpoint.storage.size: Invalid value: "-10Gi": must be greater than zero`,
	} {
		st := &mlv1.CheckpointStorage{Type: mlv1.StorageTypePVC, Size: ptr.To(resource.MustParse(size))}
		var got string
		if errs := validateCheckpointStorage(st, specPath().Child("checkpoint", "storage")); len(errs) > 0 {
			got = errs.ToAggregate().Error()
		}
		assert.Equal(t, want, got, size)
	}
	md := &mlv1.ModelDeploymentSpec{Storage: &mlv1.ModelStorageSpec{Size: ptr.To(resource.MustParse("-1Gi"))}}
	assert.Contains(t, validateModelDeploymentSpec("m", md, specPath()).ToAggregate().Error(),
		`spec.storage.size: Invalid value: "-1Gi": must be greater than zero`)
}

// A ModelDeployment's config is refused when its ConfigMap would be: a key
// that is no ConfigMap key, or over 1 MiB of values; 1 MiB exactly is fine.
func TestServerConfigIsAValidConfigMap(t *testing.T) {
	p := specPath().Child("config")
	assert.Empty(t, validateServerConfig(map[string]string{"threshold": "0.5", "vocab.txt": strings.Repeat("v", MaxConfigBytes-3)}, p))
	errs := validateServerConfig(map[string]string{"a/b": "1", "ok": strings.Repeat("v", MaxConfigBytes)}, p)
	require.Len(t, errs, 2)
	assert.True(t, strings.HasPrefix(errs[0].Error(), `spec.config[a/b]: Invalid value: "a/b": a valid config key`), errs[0].Error())
	assert.Equal(t, "spec.config: Too long: may not be more than 1048576 bytes", errs[1].Error())
}

// InV1alpha1Terms renames the paths of the v1alpha1 rename table, a path's
// prefix only at a field boundary, and leaves the rest as they are.
func TestInV1alpha1TermsRenamesPaths(t *testing.T) {
	got := InV1alpha1Terms(field.ErrorList{
		field.Invalid(field.NewPath("spec", "checkpoint", "path"), "x", "must be absolute"),
		field.Invalid(field.NewPath("spec", "checkpoint", "frequency"), 0, "must be at least 1"),
		field.Forbidden(field.NewPath("spec", "checkpoint", "storage"), "field is immutable"),
		field.Invalid(field.NewPath("spec", "numWorkersExtra"), 1, "not a v1alpha1 field"),
	})
	var paths []string
	for _, e := range got {
		paths = append(paths, e.Field)
	}
	assert.Equal(t, []string{"spec.checkpointDir", "spec.checkpointInterval", "spec.checkpoint.storage", "spec.numWorkersExtra"}, paths)
}
