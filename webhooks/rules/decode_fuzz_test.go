package rules

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

// FuzzUndecodableValues: on any request body the defaulting webhook's
// decode-error wrapper finds paths for, it never panics, never blames a
// value of an object that decodes, and every path it names is a path into
// the object. The seeds run with go test; make fuzz-smoke fuzzes it.
func FuzzUndecodableValues(f *testing.F) {
	for _, seed := range append(seedObjects(f, "TrainingJob"), seedObjects(f, "ModelDeployment")...) {
		f.Add(seed)
	}
	for _, seed := range []string{
		`{"spec":{"checkpoint":{"storage":{"size":"lots"}}}}`,
		`{"spec":{"resources":{"limits":{"cpu":"two"},"requests":{"memory":[]}}}}`,
		`{"spec":{"template":{"volumes":[{"name":"a","emptyDir":{"sizeLimit":"x"}}]}}}`,
		`{"metadata":{"creationTimestamp":"never"},"spec":{"Checkpoint":{"storage":{"size":"1Gi"}}}}`,
		`{"spec":{"checkpoint":{"storage":{"size":"lots","size":"1"}}}}`,
		`{"spec":{"hyperparameters":{"a":{"b":[1,2]}}}}`,
		`[1,2]`, `"spec"`, `null`, `{`, ``,
	} {
		f.Add([]byte(seed))
	}
	types := []reflect.Type{reflect.TypeFor[mlv1.TrainingJob](), reflect.TypeFor[mlv1.ModelDeployment]()}
	f.Fuzz(func(t *testing.T, raw []byte) {
		for _, typ := range types {
			errs := UndecodableValues(raw, typ, nil)
			obj := reflect.New(typ).Interface()
			if json.Unmarshal(raw, obj) == nil && len(errs) > 0 {
				t.Fatalf("%s decodes, yet %v", typ.Name(), errs)
			}
			for _, e := range errs {
				top, _, _ := strings.Cut(e.Field, ".")
				top, _, _ = strings.Cut(top, "[")
				if top != "apiVersion" && top != "kind" && top != "metadata" && top != "spec" && top != "status" {
					t.Fatalf("%s: path %q is not a path into the object", typ.Name(), e.Field)
				}
			}
		}
	})
}
