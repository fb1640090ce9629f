package webhooks

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/yaml"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/webhooks/rules"
)

// BenchmarkTrainingJobAdmission measures one defaulting and one validating
// review of the seed v1 TrainingJob as the webhook server handles them
// (decode, default, validate, patch), without the network. PERFORMANCE.md
// asks for a p99 under 5 ms per request.
func BenchmarkTrainingJobAdmission(b *testing.B) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		b.Fatal(err)
	}
	if err := mlv1.AddToScheme(scheme); err != nil {
		b.Fatal(err)
	}
	w := &TrainingJobWebhook{DefaultImages: testImages}
	mutate := admission.WithDefaulter(scheme, admission.Defaulter[*mlv1.TrainingJob](w))
	validate := admission.WithValidator(scheme, admission.Validator[*mlv1.TrainingJob](w))

	raw, err := os.ReadFile(filepath.Join("..", "test", "testdata", "seed-examples", "trainingjob-v1-test-job.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	if raw, err = yaml.YAMLToJSON(raw); err != nil {
		b.Fatal(err)
	}
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID:       "1",
		Kind:      metav1.GroupVersionKind{Group: "ml.example.com", Version: "v1", Kind: "TrainingJob"},
		Operation: admissionv1.Create,
		Object:    runtime.RawExtension{Raw: raw},
	}}
	job := &mlv1.TrainingJob{}
	if err := json.Unmarshal(raw, job); err != nil {
		b.Fatal(err)
	}
	rules.DefaultTrainingJob(job, nil, testImages)
	defaulted, err := json.Marshal(job)
	if err != nil {
		b.Fatal(err)
	}
	vreq := req
	vreq.Object = runtime.RawExtension{Raw: defaulted}

	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if resp := mutate.Handle(ctx, req); !resp.Allowed {
			b.Fatalf("mutating webhook refused the seed job: %v", resp.Result)
		}
		if resp := validate.Handle(ctx, vreq); !resp.Allowed {
			b.Fatalf("validating webhook refused the seed job: %v", resp.Result)
		}
	}
}
