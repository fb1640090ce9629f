package v1alpha1_test

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
	"github.com/ml-operator/ml-operator/internal/manifests"
)

// corpusDirs are the manifests that seed the conversion fuzz targets: the
// valid corpus and the seed examples, relative to this package's directory
// (where go test and make fuzz run its test binary). Read with
// internal/manifests rather than test/testutil, whose envtest helpers pull
// controller-runtime's client and client-go into this test binary.
var corpusDirs = []string{
	filepath.Join("..", "..", "test", "testdata", "valid"),
	filepath.Join("..", "..", "test", "testdata", "seed-examples"),
}

// seedJobs adds every TrainingJob manifest of the valid corpus and the seed
// examples, as JSON, to f's corpus.
func seedJobs(f *testing.F, apiVersion string) {
	var paths []string
	for _, dir := range corpusDirs {
		p, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
		if err != nil {
			f.Fatal(err)
		}
		if len(p) == 0 {
			f.Fatalf("no manifests in %s", dir)
		}
		paths = append(paths, p...)
	}
	seeded := 0
	for _, path := range paths {
		objs, err := manifests.Read(path)
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
			seeded++
		}
	}
	if seeded == 0 {
		f.Fatalf("no %s TrainingJob in %v", apiVersion, corpusDirs)
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
		if out := viaHub(t, in); !equality.Semantic.DeepEqual(in, out) {
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
		if out := viaSpoke(t, in); !equality.Semantic.DeepEqual(in, out) {
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
