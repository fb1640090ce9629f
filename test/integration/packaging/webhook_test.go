package packaging

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	certmanagerv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/labels"

	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
)

const webhookCertDir = "/tmp/k8s-webhook-server/serving-certs"

// webhookWiring is what the webhook checks need from one build.
type webhookWiring struct {
	services     map[string]*corev1.Service // namespace/name
	certificates map[string]*certmanagerv1.Certificate
	podLabels    labels.Set
	manager      corev1.Container
	pod          corev1.PodSpec
}

func wiringOf(t *testing.T, objs []builtObject) webhookWiring {
	t.Helper()
	d, c := managerDeployment(t, objs)
	w := webhookWiring{services: map[string]*corev1.Service{}, certificates: map[string]*certmanagerv1.Certificate{},
		podLabels: labels.Set(d.Spec.Template.Labels), manager: c, pod: d.Spec.Template.Spec}
	for _, s := range typedOf[*corev1.Service](objs) {
		w.services[s.Namespace+"/"+s.Name] = s
	}
	for _, cert := range typedOf[*certmanagerv1.Certificate](objs) {
		w.certificates[cert.Namespace+"/"+cert.Name] = cert
	}
	return w
}

// checkService: the webhook's Service exists, selects the manager pods and
// forwards to the webhook port the manager listens on; the serving
// certificate names it; returns the certificate.
func (w webhookWiring) checkService(t *testing.T, where string, ref *admissionregistrationv1.ServiceReference, caFrom string) {
	t.Helper()
	if ref == nil {
		t.Errorf("%s has no service reference", where)
		return
	}
	svc, ok := w.services[ref.Namespace+"/"+ref.Name]
	if !ok {
		t.Errorf("%s calls Service %s/%s, which the install does not create", where, ref.Namespace, ref.Name)
		return
	}
	if len(svc.Spec.Selector) == 0 || !labels.SelectorFromSet(svc.Spec.Selector).Matches(w.podLabels) {
		t.Errorf("%s: Service %s does not select the manager pods", where, svc.Name)
	}
	port := int32(443)
	if ref.Port != nil {
		port = *ref.Port
	}
	var target int
	for _, p := range svc.Spec.Ports {
		if p.Port == port {
			target = p.TargetPort.IntValue()
		}
	}
	if target != webhookPort || !hasContainerPort(w.manager, webhookPort) {
		t.Errorf("%s: Service %s port %d goes to %d; the manager serves webhooks on %d", where, svc.Name, port, target, webhookPort)
	}
	cert, ok := w.certificates[caFrom]
	if !ok {
		t.Errorf("%s: cert-manager.io/inject-ca-from %q names no Certificate of the install", where, caFrom)
		return
	}
	dns := fmt.Sprintf("%s.%s.svc", svc.Name, svc.Namespace)
	if !slices.Contains(cert.Spec.DNSNames, dns) {
		t.Errorf("%s: Certificate %s has DNS names %v, not %s", where, cert.Name, cert.Spec.DNSNames, dns)
	}
}

// TestWebhooksAreWiredToCertManager checks config/default end to end: every
// webhook (admission and conversion) calls a Service of the install that
// reaches the manager's webhook port, its CA comes from a Certificate that
// names that Service, and the manager mounts that Certificate's Secret where
// --webhook-cert-path points.
func TestWebhooksAreWiredToCertManager(t *testing.T) {
	objs := buildAndDecode(t, "config/default")
	w := wiringOf(t, objs)

	validating := typedOf[*admissionregistrationv1.ValidatingWebhookConfiguration](objs)
	mutating := typedOf[*admissionregistrationv1.MutatingWebhookConfiguration](objs)
	if len(validating) != 1 || len(mutating) != 1 {
		t.Fatalf("want one validating and one mutating webhook configuration, got %d and %d", len(validating), len(mutating))
	}
	for _, vwc := range validating {
		for _, wh := range vwc.Webhooks {
			w.checkService(t, "validating webhook "+wh.Name, wh.ClientConfig.Service, vwc.Annotations["cert-manager.io/inject-ca-from"])
		}
	}
	for _, mwc := range mutating {
		for _, wh := range mwc.Webhooks {
			w.checkService(t, "mutating webhook "+wh.Name, wh.ClientConfig.Service, mwc.Annotations["cert-manager.io/inject-ca-from"])
		}
	}

	var tj *apiextensionsv1.CustomResourceDefinition
	for _, crd := range typedOf[*apiextensionsv1.CustomResourceDefinition](objs) {
		if crd.Name == "trainingjobs.ml.example.com" {
			tj = crd
		}
	}
	if tj == nil {
		t.Fatal("no TrainingJob CRD")
	}
	conv := tj.Spec.Conversion
	if conv == nil || conv.Strategy != apiextensionsv1.WebhookConverter || conv.Webhook == nil || conv.Webhook.ClientConfig == nil || conv.Webhook.ClientConfig.Service == nil {
		t.Fatalf("TrainingJob CRD has no conversion webhook: %+v", conv)
	}
	if !slices.Contains(conv.Webhook.ConversionReviewVersions, "v1") {
		t.Errorf("conversion webhook review versions %v lack v1", conv.Webhook.ConversionReviewVersions)
	}
	s := conv.Webhook.ClientConfig.Service
	w.checkService(t, "TrainingJob conversion webhook",
		&admissionregistrationv1.ServiceReference{Namespace: s.Namespace, Name: s.Name, Path: s.Path, Port: s.Port},
		tj.Annotations["cert-manager.io/inject-ca-from"])
	if s.Path == nil || *s.Path != "/convert" {
		t.Errorf("conversion webhook path = %v, want /convert", s.Path)
	}

	if !slices.Contains(w.manager.Args, "--webhook-cert-path="+webhookCertDir) {
		t.Errorf("manager args %v do not point --webhook-cert-path at %s", w.manager.Args, webhookCertDir)
	}
	secrets := map[string]string{} // volume name -> secret
	for _, v := range w.pod.Volumes {
		if v.Secret != nil {
			secrets[v.Name] = v.Secret.SecretName
		}
	}
	var mounted string
	for _, m := range w.manager.VolumeMounts {
		if m.MountPath == webhookCertDir {
			mounted = secrets[m.Name]
			if !m.ReadOnly {
				t.Errorf("webhook certificate mount %s is writable", m.Name)
			}
		}
	}
	var certSecrets []string
	for _, cert := range w.certificates {
		certSecrets = append(certSecrets, cert.Spec.SecretName)
	}
	if mounted == "" || !slices.Contains(certSecrets, mounted) {
		t.Errorf("manager mounts Secret %q at %s; the Certificates write %v", mounted, webhookCertDir, certSecrets)
	}
}

// TestCSVWebhookDefinitions: the bundle declares the mutating, validating and
// conversion webhooks, so OLM creates them, issues their certificate and
// points them at the manager.
func TestCSVWebhookDefinitions(t *testing.T) {
	csv := loadBundle(t).CSV
	byType := map[operatorsv1alpha1.WebhookAdmissionType][]operatorsv1alpha1.WebhookDescription{}
	deployment := csv.Spec.InstallStrategy.StrategySpec.DeploymentSpecs[0].Name
	for _, wd := range csv.Spec.WebhookDefinitions {
		byType[wd.Type] = append(byType[wd.Type], wd)
		if wd.DeploymentName != deployment {
			t.Errorf("webhook %s targets deployment %q, want %q", wd.GenerateName, wd.DeploymentName, deployment)
		}
		// OLM's Service listens on containerPort and forwards to targetPort,
		// where the manager serves.
		if wd.TargetPort == nil || wd.TargetPort.IntValue() != webhookPort {
			t.Errorf("webhook %s target port %v, want %d", wd.GenerateName, wd.TargetPort, webhookPort)
		}
	}
	for _, typ := range []operatorsv1alpha1.WebhookAdmissionType{operatorsv1alpha1.ValidatingAdmissionWebhook, operatorsv1alpha1.MutatingAdmissionWebhook, operatorsv1alpha1.ConversionWebhook} {
		if len(byType[typ]) == 0 {
			t.Errorf("CSV has no %s definition", typ)
		}
	}
	for _, conv := range byType[operatorsv1alpha1.ConversionWebhook] {
		if !slices.Contains(conv.ConversionCRDs, "trainingjobs.ml.example.com") {
			t.Errorf("conversion webhook %s converts %v, not trainingjobs", conv.GenerateName, conv.ConversionCRDs)
		}
		if conv.WebhookPath == nil || *conv.WebhookPath != "/convert" {
			t.Errorf("conversion webhook path %v, want /convert", conv.WebhookPath)
		}
	}
	for _, kind := range []string{"trainingjob", "modeldeployment"} {
		found := false
		for _, wd := range append(byType[operatorsv1alpha1.ValidatingAdmissionWebhook], byType[operatorsv1alpha1.MutatingAdmissionWebhook]...) {
			if wd.WebhookPath != nil && strings.Contains(*wd.WebhookPath, kind) {
				found = true
			}
		}
		if !found {
			t.Errorf("no admission webhook for %s in the CSV", kind)
		}
	}
}

// TestEveryWebhookFailsClosed: every admission webhook, in the kustomize
// install and in the bundle, has failurePolicy Fail, so a manager that is
// down blocks writes instead of letting unchecked objects in (the
// MLOperatorManagerDown and webhook alerts say so). Conversion webhooks
// have no failure policy: without the manager, v1alpha1 is not served.
func TestEveryWebhookFailsClosed(t *testing.T) {
	objs := buildAndDecode(t, "config/default")
	n := 0
	for _, c := range typedOf[*admissionregistrationv1.MutatingWebhookConfiguration](objs) {
		for _, w := range c.Webhooks {
			n++
			if w.FailurePolicy == nil || *w.FailurePolicy != admissionregistrationv1.Fail {
				t.Errorf("config/default: mutating webhook %s failurePolicy %v, want Fail", w.Name, w.FailurePolicy)
			}
		}
	}
	for _, c := range typedOf[*admissionregistrationv1.ValidatingWebhookConfiguration](objs) {
		for _, w := range c.Webhooks {
			n++
			if w.FailurePolicy == nil || *w.FailurePolicy != admissionregistrationv1.Fail {
				t.Errorf("config/default: validating webhook %s failurePolicy %v, want Fail", w.Name, w.FailurePolicy)
			}
		}
	}
	if n != 4 {
		t.Errorf("config/default has %d admission webhooks, want 4 (mutating and validating, both kinds)", n)
	}
	n = 0
	for _, wd := range loadBundle(t).CSV.Spec.WebhookDefinitions {
		if wd.Type == operatorsv1alpha1.ConversionWebhook {
			continue
		}
		n++
		if wd.FailurePolicy == nil || *wd.FailurePolicy != admissionregistrationv1.Fail {
			t.Errorf("bundle: webhook %s failurePolicy %v, want Fail", wd.GenerateName, wd.FailurePolicy)
		}
	}
	if n != 4 {
		t.Errorf("the CSV has %d admission webhook definitions, want 4", n)
	}
}
