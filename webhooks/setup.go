// Package webhooks holds the admission webhooks of ml-operator: defaulting
// and validation for TrainingJob and ModelDeployment (v1), and the
// TrainingJob conversion webhook (v1alpha1 <-> v1, v1 being the hub).
//
// Requests in any served version reach these webhooks as v1 (the webhook
// configurations use matchPolicy Equivalent), so every rule is written once,
// against v1, and its field paths are v1 paths.
package webhooks

import (
	"context"
	"encoding/json"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
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
	if err := ctrl.NewWebhookManagedBy(mgr, &mlv1.TrainingJob{}).
		WithDefaulter(tj).
		WithValidator(tj).
		Complete(); err != nil {
		return fmt.Errorf("registering the TrainingJob webhooks: %w", err)
	}
	md := &ModelDeploymentWebhook{}
	if err := ctrl.NewWebhookManagedBy(mgr, &mlv1.ModelDeployment{}).
		WithDefaulter(md).
		WithValidator(md).
		Complete(); err != nil {
		return fmt.Errorf("registering the ModelDeployment webhooks: %w", err)
	}
	return nil
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
