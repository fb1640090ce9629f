package integration_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/internal/manager"
	"github.com/ml-operator/ml-operator/test/testutil"
)

// writeServingCert writes a fresh self-signed tls.crt and tls.key for
// 127.0.0.1 into dir the way a Secret volume update does (new files renamed
// into place), and returns the certificate's serial number.
func writeServingCert(t *testing.T, dir string) *big.Int {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "webhook-service.ml-operator-system.svc"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:    time.Now().Add(-time.Minute),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	for name, block := range map[string]*pem.Block{
		"tls.crt": {Type: "CERTIFICATE", Bytes: der},
		"tls.key": {Type: "EC PRIVATE KEY", Bytes: keyDER},
	} {
		tmp := filepath.Join(dir, "."+name+".new")
		require.NoError(t, os.WriteFile(tmp, pem.EncodeToMemory(block), 0o600))
		require.NoError(t, os.Rename(tmp, filepath.Join(dir, name)))
	}
	return serial
}

// servedSerial is the serial number of the certificate served at addr.
func servedSerial(addr string) (*big.Int, error) {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // reads the certificate only
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber, nil
}

// The manager's webhook server serves the certificate in --webhook-cert-path,
// answers the defaulting webhook with the operator's default image, and
// serves a rotated certificate without a restart.
//
// It lives here rather than in internal/manager because controller names are
// unique per process, and this package builds the only full manager of its
// test binary.
func TestWebhookServerReloadsRotatedCertificates(t *testing.T) {
	certDir := t.TempDir()
	first := writeServingCert(t, certDir)

	port := testutil.FreePort(t)

	opts := manager.NewOptions()
	opts.MetricsAddr, opts.ProbeAddr, opts.LeaderElect = "0", "0", false
	opts.EnableWebhooks = true
	opts.WebhookHost, opts.WebhookPort, opts.WebhookCertDir = "127.0.0.1", port, certDir
	mgr, err := manager.New(cfg, opts)
	require.NoError(t, err)

	// Only the webhook server runs: this test is about TLS, not controllers.
	ctx := t.Context()
	done := make(chan error, 1)
	go func() { done <- mgr.GetWebhookServer().Start(ctx) }()

	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	testutil.Eventually(t, func() bool {
		s, err := servedSerial(addr)
		return err == nil && s.Cmp(first) == 0
	}, "the first certificate is served")

	requireDefaultImage(t, addr, manager.DefaultFrameworkImages()["pytorch"])

	second := writeServingCert(t, certDir)
	testutil.Eventually(t, func() bool {
		s, err := servedSerial(addr)
		return err == nil && s.Cmp(second) == 0
	}, "the rotated certificate is served without a restart")

	select {
	case err := <-done:
		t.Fatalf("webhook server stopped: %v", err)
	default:
	}
}

// requireDefaultImage sends the defaulting webhook a TrainingJob without an
// image and expects a patch that sets image.
func requireDefaultImage(t *testing.T, addr, image string) {
	t.Helper()
	job, err := json.Marshal(&mlv1.TrainingJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: mlv1.GroupVersion.String(), Kind: "TrainingJob"},
		ObjectMeta: metav1.ObjectMeta{Name: "no-image", Namespace: "default"},
	})
	require.NoError(t, err)
	review, err := json.Marshal(&admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       types.UID("1"),
			Kind:      metav1.GroupVersionKind{Group: "ml.example.com", Version: "v1", Kind: "TrainingJob"},
			Resource:  metav1.GroupVersionResource{Group: "ml.example.com", Version: "v1", Resource: "trainingjobs"},
			Name:      "no-image",
			Namespace: "default",
			Operation: admissionv1.Create,
			Object:    runtime.RawExtension{Raw: job},
		},
	})
	require.NoError(t, err)
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // self-signed test certificate
	resp, err := hc.Post(fmt.Sprintf("https://%s/mutate-ml-example-com-v1-trainingjob", addr), "application/json", bytes.NewReader(review))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	out := &admissionv1.AdmissionReview{}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(out))
	require.True(t, out.Response.Allowed, "%+v", out.Response.Result)
	require.Contains(t, string(out.Response.Patch), fmt.Sprintf(`{"op":"add","path":"/spec/image","value":%q}`, image))
}
