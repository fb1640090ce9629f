package packaging

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestWebhookCertificateIsSignedByAStableCA: the serving certificate comes
// from a CA Issuer whose CA is a Certificate of its own (self-signed), so a
// renewed serving certificate does not change the CA bundle the CA injector
// puts into the webhook configurations and the CRD conversion: admission
// keeps working through a renewal.
func TestWebhookCertificateIsSignedByAStableCA(t *testing.T) {
	objs := buildAndDecode(t, "config/default")
	issuers := map[string]*unstructured.Unstructured{}
	for _, i := range unstructuredOf(objs, "Issuer") {
		issuers[i.GetName()] = i
	}
	certs := map[string]*unstructured.Unstructured{}
	bySecret := map[string]*unstructured.Unstructured{}
	for _, c := range unstructuredOf(objs, "Certificate") {
		certs[c.GetName()] = c
		secret, _, _ := unstructured.NestedString(c.Object, "spec", "secretName")
		bySecret[secret] = c
	}
	serving := certs["ml-operator-serving-cert"]
	if serving == nil {
		t.Fatalf("no Certificate ml-operator-serving-cert; have %v", keys(certs))
	}
	issuerName, _, _ := unstructured.NestedString(serving.Object, "spec", "issuerRef", "name")
	issuer := issuers[issuerName]
	if issuer == nil {
		t.Fatalf("the serving certificate's issuer %q is not in config/default", issuerName)
	}
	caSecret, found, _ := unstructured.NestedString(issuer.Object, "spec", "ca", "secretName")
	if !found {
		t.Fatalf("the serving certificate's issuer %s is not a CA issuer: %v", issuerName, issuer.Object["spec"])
	}
	ca := bySecret[caSecret]
	if ca == nil {
		t.Fatalf("no Certificate writes the CA secret %q", caSecret)
	}
	if isCA, _, _ := unstructured.NestedBool(ca.Object, "spec", "isCA"); !isCA {
		t.Errorf("Certificate %s (secret %s) is not isCA", ca.GetName(), caSecret)
	}
	if rot, _, _ := unstructured.NestedString(ca.Object, "spec", "privateKey", "rotationPolicy"); rot != "Never" {
		t.Errorf("the CA's key rotationPolicy is %q, want Never: a renewed CA must keep the key that signed the serving certificate", rot)
	}
	root, _, _ := unstructured.NestedString(ca.Object, "spec", "issuerRef", "name")
	if _, ok, _ := unstructured.NestedMap(issuers[root].Object, "spec", "selfSigned"); issuers[root] == nil || !ok {
		t.Errorf("the CA %s is issued by %q, want a selfSigned Issuer", ca.GetName(), root)
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
