// Package webhooks holds the admission webhooks of ml-operator: defaulting
// and validation for TrainingJob and ModelDeployment (v1), and the
// TrainingJob conversion webhook (v1alpha1 <-> v1, v1 being the hub).
//
// Requests in any served version reach these webhooks as v1 (the webhook
// configurations use matchPolicy Equivalent), so every rule is written once,
// against v1; a refusal of a v1alpha1 request names the v1alpha1 fields.
// The rules themselves are in package rules (webhooks/rules), free of
// admission plumbing; this package adapts them to controller-runtime.
package webhooks

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

// Options configure the webhooks.
type Options struct {
	// DefaultImages maps a framework name (pytorch, tensorflow, xgboost, jax)
	// to the worker image a TrainingJob gets when it names none.
	DefaultImages map[string]string
}

// SetupWithManager registers the TrainingJob and ModelDeployment defaulting
// and validating webhooks, and the TrainingJob conversion webhook at /convert,
// on mgr's webhook server.
func SetupWithManager(mgr ctrl.Manager, opts Options) error {
	tj := &TrainingJobWebhook{DefaultImages: opts.DefaultImages}
	registerDefaulter(mgr, TrainingJobMutatePath, tj)
	if err := ctrl.NewWebhookManagedBy(mgr, &mlv1.TrainingJob{}).
		WithValidator(tj).
		Complete(); err != nil {
		return fmt.Errorf("registering the TrainingJob webhooks: %w", err)
	}
	md := &ModelDeploymentWebhook{}
	registerDefaulter(mgr, ModelDeploymentMutatePath, md)
	if err := ctrl.NewWebhookManagedBy(mgr, &mlv1.ModelDeployment{}).
		WithValidator(md).
		Complete(); err != nil {
		return fmt.Errorf("registering the ModelDeployment webhooks: %w", err)
	}
	return nil
}

// The paths of the defaulting webhooks (the kubebuilder:webhook markers).
const (
	TrainingJobMutatePath     = "/mutate-ml-example-com-v1-trainingjob"
	ModelDeploymentMutatePath = "/mutate-ml-example-com-v1-modeldeployment"
)

// registerDefaulter serves d at path, as the webhook builder would, except
// that a value its type cannot decode is refused naming its field path
// (undecodableNamed).
func registerDefaulter[T runtime.Object](mgr ctrl.Manager, path string, d admission.Defaulter[T]) {
	wh := admission.WithDefaulter(mgr.GetScheme(), d)
	typ := reflect.TypeFor[T]().Elem()
	wh.Handler = &undecodableNamed{next: wh.Handler, gk: mlv1.GroupVersion.WithKind(typ.Name()).GroupKind(), typ: typ}
	mgr.GetWebhookServer().Register(path, wh)
}

// oldObject is the stored object of an UPDATE request the defaulter is
// handling, or nil on CREATE (and outside a request, as in unit tests).
func oldObject[T any](ctx context.Context) (*T, error) {
	req, err := admission.RequestFromContext(ctx)
	if err != nil || req.Operation != admissionv1.Update || len(req.OldObject.Raw) == 0 {
		return nil, nil //nolint:nilerr // no request in the context: a create
	}
	old := new(T)
	if err := json.Unmarshal(req.OldObject.Raw, old); err != nil {
		return nil, fmt.Errorf("decoding the stored object: %w", err)
	}
	return old, nil
}

// v1alpha1 is the deprecated TrainingJob version.
const v1alpha1 = "v1alpha1"

// requestVersion is the API version the admission request in ctx was made
// in: with matchPolicy Equivalent a v1alpha1 request reaches the webhooks
// converted to v1, and RequestKind keeps what the user sent. It is "" outside
// a request (unit tests).
func requestVersion(ctx context.Context) string {
	req, err := admission.RequestFromContext(ctx)
	if err != nil || req.RequestKind == nil {
		return ""
	}
	return req.RequestKind.Version
}
