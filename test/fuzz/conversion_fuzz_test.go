package fuzz_test

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	mlv1alpha1 "github.com/ml-operator/ml-operator/api/v1alpha1"
	"github.com/ml-operator/ml-operator/test/testutil"
)

// seedJobs adds every TrainingJob manifest of the valid corpus and the seed
// examples, as JSON, to f's corpus.
func seedJobs(f *testing.F, apiVersion string) {
	var paths []string
	for _, dir := range []string{filepath.Join("test", "testdata", "valid"), filepath.Join("test", "testdata", "seed-examples")} {
		p, err := filepath.Glob(filepath.Join(testutil.RepoRoot(), dir, "*.yaml"))
		if err != nil {
			f.Fatal(err)
		}
		paths = append(paths, p...)
	}
	for _, path := range paths {
		objs, err := testutil.ReadManifests(path)
		if err != nil {
			f.Fatal(err)
		}
		for _, o := range objs {
			if o.GetKind() != "TrainingJob" || o.GetAPIVersion() != apiVersion {
				continue
			}
			data, err := o.MarshalJSON()
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
		}
	}
	f.Add([]byte(`{}`))
}

// normalized decodes data into a fresh T and back through JSON, so that it
// compares to what comes out of a conversion (which also goes through JSON
// on the wire). ok is false for data that is not such an object.
func normalized[T any](data []byte) (obj *T, ok bool) {
	obj = new(T)
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(obj); err != nil {
		return nil, false
	}
	again, err := json.Marshal(obj)
	if err != nil {
		return nil, false
	}
	obj = new(T)
	if err := json.Unmarshal(again, obj); err != nil {
		return nil, false
	}
	return obj, true
}

// FuzzSpokeRoundTrip: any v1alpha1 TrainingJob survives v1alpha1 -> v1 ->
// (JSON) -> v1alpha1 unchanged, as the conversion webhook promises.
func FuzzSpokeRoundTrip(f *testing.F) {
	seedJobs(f, mlv1alpha1.GroupVersion.String())
	f.Fuzz(func(t *testing.T, data []byte) {
		in, ok := normalized[mlv1alpha1.TrainingJob](data)
		if !ok {
			return
		}
		in.TypeMeta = metav1.TypeMeta{} // set by the webhook's scheme, not by conversion
		if ownAnnotations(in.Annotations) {
			return // the conversion's own annotations; a user forging them is not a round trip
		}
		hub := &mlv1.TrainingJob{}
		if err := in.DeepCopy().ConvertTo(hub); err != nil {
			t.Fatalf("v1alpha1 -> v1: %v", err)
		}
		wire, err := json.Marshal(hub)
		if err != nil {
			t.Fatalf("encoding the v1 object: %v", err)
		}
		hub = &mlv1.TrainingJob{}
		if err := json.Unmarshal(wire, hub); err != nil {
			t.Fatalf("decoding the v1 object: %v", err)
		}
		out := &mlv1alpha1.TrainingJob{}
		if err := out.ConvertFrom(hub); err != nil {
			t.Fatalf("v1 -> v1alpha1: %v", err)
		}
		if !equality.Semantic.DeepEqual(in, out) {
			t.Fatalf("changed in a v1alpha1 -> v1 -> v1alpha1 round trip (-in +out):\n%s", cmp.Diff(in, out))
		}
	})
}

// FuzzHubRoundTrip: any v1 TrainingJob survives v1 -> v1alpha1 -> (JSON)
// -> v1 unchanged: the v1-only fields ride in the v1alpha1 object's
// annotations.
func FuzzHubRoundTrip(f *testing.F) {
	seedJobs(f, mlv1.GroupVersion.String())
	f.Fuzz(func(t *testing.T, data []byte) {
		in, ok := normalized[mlv1.TrainingJob](data)
		if !ok {
			return
		}
		in.TypeMeta = metav1.TypeMeta{}
		if ownAnnotations(in.Annotations) {
			return
		}
		spoke := &mlv1alpha1.TrainingJob{}
		if err := spoke.ConvertFrom(in.DeepCopy()); err != nil {
			t.Fatalf("v1 -> v1alpha1: %v", err)
		}
		wire, err := json.Marshal(spoke)
		if err != nil {
			t.Fatalf("encoding the v1alpha1 object: %v", err)
		}
		spoke = &mlv1alpha1.TrainingJob{}
		if err := json.Unmarshal(wire, spoke); err != nil {
			t.Fatalf("decoding the v1alpha1 object: %v", err)
		}
		out := &mlv1.TrainingJob{}
		if err := spoke.ConvertTo(out); err != nil {
			t.Fatalf("v1alpha1 -> v1: %v", err)
		}
		if !equality.Semantic.DeepEqual(in, out) {
			t.Fatalf("changed in a v1 -> v1alpha1 -> v1 round trip (-in +out):\n%s", cmp.Diff(in, out))
		}
	})
}

// ownAnnotations reports whether a carries the annotations the conversion
// keeps the other version's fields in.
func ownAnnotations(a map[string]string) bool {
	_, spec := a[mlv1.AnnotationV1Spec]
	_, status := a[mlv1.AnnotationV1Status]
	return spec || status
}
