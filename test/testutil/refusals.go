package testutil

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// DenyingWebhook installs a validating admission webhook, served over TLS
// on 127.0.0.1 by the test process, that refuses every create of the given
// resources ("pods", "services", ...) in namespace with message, as a
// policy engine would. It is removed when the test ends.
func DenyingWebhook(t testing.TB, c client.Client, namespace string, resources []string, message string) {
	t.Helper()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		review := &admissionv1.AdmissionReview{}
		if err := json.NewDecoder(r.Body).Decode(review); err != nil || review.Request == nil {
			http.Error(w, "not an AdmissionReview", http.StatusBadRequest)
			return
		}
		review.Response = &admissionv1.AdmissionResponse{
			UID:     review.Request.UID,
			Allowed: false,
			Result:  &metav1.Status{Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden, Message: message},
		}
		review.Request = nil
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(review)
	}))
	t.Cleanup(srv.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	none := admissionregistrationv1.SideEffectClassNone
	fail := admissionregistrationv1.Fail
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "deny-" + namespace},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    "deny.policy.example.com",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: ptr.To(srv.URL + "/deny"), CABundle: ca},
			AdmissionReviewVersions: []string{"v1"},
			SideEffects:             &none,
			FailurePolicy:           &fail,
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{
				corev1.LabelMetadataName: namespace,
			}},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{
					APIGroups: []string{"", "apps"}, APIVersions: []string{"v1"}, Resources: resources,
					Scope: ptr.To(admissionregistrationv1.NamespacedScope),
				},
			}},
		}},
	}
	if err := c.Create(context.Background(), cfg); err != nil {
		t.Fatalf("installing the denying webhook: %v", err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), cfg) })
}

// ExhaustedQuota creates a ResourceQuota in namespace whose hard limit of
// name is zero and whose status says so, as the quota controller would
// write it (envtest runs none): every create that counts against name is
// refused with "exceeded quota".
func ExhaustedQuota(t testing.TB, c client.Client, namespace string, name corev1.ResourceName) {
	t.Helper()
	ctx := context.Background()
	zero := corev1.ResourceList{name: resource.MustParse("0")}
	q := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "exhausted", Namespace: namespace},
		Spec:       corev1.ResourceQuotaSpec{Hard: zero},
	}
	if err := c.Create(ctx, q); err != nil {
		t.Fatalf("creating the quota: %v", err)
	}
	q.Status = corev1.ResourceQuotaStatus{Hard: zero, Used: zero}
	if err := c.Status().Update(ctx, q); err != nil {
		t.Fatalf("writing the quota's status: %v", err)
	}
}
