package webhooks

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/ml-operator/ml-operator/webhooks/rules"
)

// undecodableNamed wraps an admission handler so that an object it cannot
// decode is refused naming the field path of each value that does not
// decode, in the API server's words, as Invalid (422):
//
//	spec.checkpoint.storage.size: Invalid value: "lots": quantities must match the regular expression ...
//	spec.numWorkers: Invalid value: "string": spec.numWorkers in body must be of type integer
//	spec.versions[0].weight: Invalid value: 4294967396: must be a 32-bit integer
//
// controller-runtime's handlers answer such an object with the decoder's bare
// message (400): encoding/json names no field for an UnmarshalJSON method's
// error, names Go types, and leaves list indexes out. The mutating webhooks
// run before the API server's schema check, so theirs is the answer a user
// sees. Requests the handler decodes are passed through untouched; the
// paths (rules.UndecodableValues) are looked for only after a 400.
type undecodableNamed struct {
	next admission.Handler
	gk   schema.GroupKind
	typ  reflect.Type // the object's struct type
}

// Handle passes req to the wrapped handler, and replaces a decoding refusal
// with the field paths of the values that cannot be decoded, if it finds any.
func (h *undecodableNamed) Handle(ctx context.Context, req admission.Request) admission.Response {
	resp := h.next.Handle(ctx, req)
	if resp.Allowed || resp.Result == nil || resp.Result.Code != http.StatusBadRequest ||
		req.Operation == admissionv1.Delete || len(req.Object.Raw) == 0 {
		return resp
	}
	errs := rules.UndecodableValues(req.Object.Raw, h.typ, nil)
	if len(errs) == 0 {
		return resp
	}
	var meta struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	_ = json.Unmarshal(req.Object.Raw, &meta) // the name only labels the message
	status := apierrors.NewInvalid(h.gk, meta.Metadata.Name, errs).Status()
	return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Allowed: false, Result: &status}}
}
