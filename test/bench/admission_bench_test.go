package bench

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/internal/manager"
	"github.com/ml-operator/ml-operator/webhooks"
)

// BenchmarkTrainingJobAdmission is the admission webhooks' own cost per call,
// in process: an AdmissionReview for the benchmark's job, served by the
// defaulting and the validating handler, with no network, TLS or API server.
// Run it with `go test -run '^$' -bench Admission ./test/bench/`
// (docs/benchmarks.md compares it with the API server's view of the calls).
func BenchmarkTrainingJobAdmission(b *testing.B) {
	scheme := manager.NewScheme()
	tj := &webhooks.TrainingJobWebhook{DefaultImages: manager.DefaultFrameworkImages()}
	r := &run{cfg: Config{Ranks: 8}}
	job := r.job("bench", "job-0", 8, nil)
	job.APIVersion, job.Kind = mlv1.GroupVersion.String(), "TrainingJob"
	raw, err := json.Marshal(job)
	if err != nil {
		b.Fatal(err)
	}
	review, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       "u",
			Kind:      metav1.GroupVersionKind{Group: mlv1.GroupVersion.Group, Version: "v1", Kind: "TrainingJob"},
			Resource:  metav1.GroupVersionResource{Group: mlv1.GroupVersion.Group, Version: "v1", Resource: "trainingjobs"},
			Namespace: "bench", Name: "job-0", Operation: admissionv1.Create,
			Object: runtime.RawExtension{Raw: raw},
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	for _, h := range []struct {
		name    string
		handler http.Handler
	}{
		{"mutate", admission.WithDefaulter[*mlv1.TrainingJob](scheme, tj)},
		{"validate", admission.WithValidator[*mlv1.TrainingJob](scheme, tj)},
	} {
		b.Run(h.name, func(b *testing.B) {
			for b.Loop() {
				req := httptest.NewRequest(http.MethodPost, "/"+h.name, bytes.NewReader(review))
				req.Header.Set("Content-Type", "application/json")
				rec := httptest.NewRecorder()
				h.handler.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK || !bytes.Contains(rec.Body.Bytes(), []byte(`"allowed":true`)) {
					b.Fatalf("%s: %d %s", h.name, rec.Code, rec.Body.String())
				}
			}
		})
	}
}
