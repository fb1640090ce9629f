package manager

import (
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/ml-operator/ml-operator/webhooks"
)

// setupWebhooks registers the defaulting, validating and conversion webhooks
// when opts.EnableWebhooks is set. The webhook server serves the certificate
// in opts.WebhookCertDir and reloads it when it changes on disk
// (controller-runtime's certwatcher), so rotated certificates need no restart.
func setupWebhooks(mgr ctrl.Manager, opts *Options) error {
	if !opts.EnableWebhooks {
		return nil
	}
	return webhooks.SetupWithManager(mgr, webhooks.Options{DefaultImages: opts.DefaultImages})
}
