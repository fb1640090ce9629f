package webhooks

import (
	"context"
	"net/http"
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

var testImages = map[string]string{"pytorch": "torch:1", "tensorflow": "tf:1"}

const quantityRule = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"

// The defaulting webhook as registered: a quantity it cannot decode is
// refused as Invalid (422) naming the path, not with the decoder's bare 400;
// a request it decodes is answered by the defaulter as before.
func TestDefaultingWebhookNamesUndecodableValues(t *testing.T) {
	scheme := runtime.NewScheme()
	require.NoError(t, mlv1.AddToScheme(scheme))
	wh := admission.WithDefaulter(scheme, admission.Defaulter[*mlv1.TrainingJob](&TrainingJobWebhook{DefaultImages: testImages}))
	h := &undecodableNamed{next: wh.Handler, gk: trainingJobKind, typ: reflect.TypeFor[mlv1.TrainingJob]()}
	request := func(raw string) admission.Request {
		return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: []byte(raw)},
		}}
	}

	resp := h.Handle(context.Background(), request(
		`{"apiVersion":"ml.example.com/v1","kind":"TrainingJob","metadata":{"name":"j"},"spec":{"checkpoint":{"storage":{"size":"lots"}}}}`))
	assert.False(t, resp.Allowed)
	require.NotNil(t, resp.Result)
	assert.Equal(t, int32(http.StatusUnprocessableEntity), resp.Result.Code)
	assert.Equal(t, metav1.StatusReasonInvalid, resp.Result.Reason)
	assert.Equal(t, `TrainingJob.ml.example.com "j" is invalid: spec.checkpoint.storage.size: Invalid value: "lots": `+quantityRule, resp.Result.Message)

	resp = h.Handle(context.Background(), request(`{"apiVersion":"ml.example.com/v1","kind":"TrainingJob","metadata":{"name":"j"},"spec":{"numWorkers":"two"}}`))
	assert.False(t, resp.Allowed)
	assert.Equal(t, int32(http.StatusUnprocessableEntity), resp.Result.Code)
	assert.Equal(t, `TrainingJob.ml.example.com "j" is invalid: spec.numWorkers: Invalid value: "string": spec.numWorkers in body must be of type integer`, resp.Result.Message)

	resp = h.Handle(context.Background(), request(`{"apiVersion":"ml.example.com/v1","kind":"TrainingJob","metadata":{"name":"j"},"spec":{"numWorkers":2}`))
	assert.False(t, resp.Allowed, "JSON that does not parse")
	assert.Equal(t, int32(http.StatusBadRequest), resp.Result.Code, "keeps the decoder's answer: there is no field to name")

	resp = h.Handle(context.Background(), request(`{"apiVersion":"ml.example.com/v1","kind":"TrainingJob","metadata":{"name":"j"},"spec":{}}`))
	assert.True(t, resp.Allowed, "%v", resp.Result)
	assert.NotEmpty(t, resp.Patches, "the defaulter ran")
}

// createRequest is the context of a create request made in version
// (reaching the webhook as v1, as with matchPolicy Equivalent), carrying the
// object's JSON raw when given. The defaulters read only the request's
// version and JSON, so it serves both kinds.
func createRequest(version, raw string) context.Context {
	req := admissionv1.AdmissionRequest{
		Operation:   admissionv1.Create,
		Kind:        metav1.GroupVersionKind{Group: "ml.example.com", Version: "v1", Kind: "TrainingJob"},
		RequestKind: &metav1.GroupVersionKind{Group: "ml.example.com", Version: version, Kind: "TrainingJob"},
	}
	if raw != "" {
		req.Object = runtime.RawExtension{Raw: []byte(raw)}
	}
	return admission.NewContextWithRequest(context.Background(), admission.Request{AdmissionRequest: req})
}

// A v1alpha1 job without an image is refused, naming spec.image, even when
// the admin configured a default image; a v1 job gets the default.
func TestV1alpha1RequiresAnImageAndAFramework(t *testing.T) {
	w := &TrainingJobWebhook{DefaultImages: testImages}
	requestIn := func(version string) context.Context { return createRequest(version, "") }
	job := &mlv1.TrainingJob{ObjectMeta: metav1.ObjectMeta{Name: "j"}}
	err := w.Default(requestIn("v1alpha1"), job.DeepCopy())
	require.Error(t, err)
	assert.Equal(t, `TrainingJob.ml.example.com "j" is invalid: [`+
		`spec.framework: Required value: required in ml.example.com/v1alpha1 (one of pytorch, tensorflow, xgboost), `+
		`spec.image: Required value: required in ml.example.com/v1alpha1 (default images apply to v1 only)]`, err.Error())

	withImage := job.DeepCopy()
	withImage.Spec.Image = "pytorch/pytorch:2"
	err = w.Default(requestIn("v1alpha1"), withImage.DeepCopy())
	require.Error(t, err)
	assert.Equal(t, `TrainingJob.ml.example.com "j" is invalid: spec.framework: Required value: required in ml.example.com/v1alpha1 (one of pytorch, tensorflow, xgboost)`, err.Error(),
		"v1alpha1 has no default framework either")
	withImage.Spec.Framework = mlv1.FrameworkPyTorch
	require.NoError(t, w.Default(requestIn("v1alpha1"), withImage))

	v1 := job.DeepCopy()
	require.NoError(t, w.Default(requestIn("v1"), v1))
	assert.Equal(t, "torch:1", v1.Spec.Image)
}

// A v1alpha1 request's refusal names v1alpha1 fields (workers,
// gpuPerWorker), in the path and in the message; a v1 request's keeps the
// v1 names. rules.TestInV1alpha1TermsRenamesPaths covers the rest of the
// rename table.
func TestV1alpha1RequestsReadV1alpha1FieldPaths(t *testing.T) {
	w := &TrainingJobWebhook{DefaultImages: testImages}
	requestIn := func(version string) context.Context { return createRequest(version, "") }
	job := &mlv1.TrainingJob{ObjectMeta: metav1.ObjectMeta{Name: "j"}, Spec: mlv1.TrainingJobSpec{
		Image: "img", NumWorkers: 101, GPUsPerWorker: ptr.To[int32](1),
	}}
	job.Spec.Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("4")}

	_, err := w.ValidateCreate(requestIn("v1alpha1"), job)
	require.Error(t, err)
	assert.Equal(t, `TrainingJob.ml.example.com "j" is invalid: [spec.workers: Invalid value: 101: must be between 1 and 100, `+
		`spec.resources.limits[nvidia.com/gpu]: Invalid value: "4": must equal spec.gpuPerWorker (1), or be left out: the operator sets it]`, err.Error())

	_, err = w.ValidateCreate(requestIn("v1"), job)
	require.Error(t, err)
	assert.Equal(t, `TrainingJob.ml.example.com "j" is invalid: [spec.numWorkers: Invalid value: 101: must be between 1 and 100, `+
		`spec.resources.limits[nvidia.com/gpu]: Invalid value: "4": must equal spec.gpusPerWorker (1), or be left out: the operator sets it]`, err.Error())
}
