package webhooks

import (
	"context"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/ml-operator/ml-operator/webhooks/rules"
)

// explicitZeros refuses each field of fields that the admission request in
// ctx sets to the number 0 (rules.ZerosIn). Outside a request (unit tests)
// it finds nothing.
func explicitZeros(ctx context.Context, fields []rules.ZeroDefaulted) field.ErrorList {
	req, err := admission.RequestFromContext(ctx)
	if err != nil || len(req.Object.Raw) == 0 {
		return nil
	}
	return rules.ZerosIn(req.Object.Raw, fields)
}
