package localcluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/ml-operator/ml-operator/internal/selfca"
)

// ServingCert is the webhook server's certificate, made for 127.0.0.1
// because the manager runs on this machine, not in the cluster.
type ServingCert struct {
	// Dir holds tls.crt, tls.key and ca.crt (the manager's --webhook-cert-path).
	Dir string
	// CABundle is the PEM CA the API server trusts for the webhooks.
	CABundle []byte
}

// WriteServingCert makes a fresh CA and a serving certificate for 127.0.0.1
// and localhost, signed by it, and writes them into dir.
func WriteServingCert(dir string) (*ServingCert, error) {
	now := time.Now()
	ca, err := selfca.New("ml-operator local webhook CA", now)
	if err != nil {
		return nil, err
	}
	caKey, caDER := ca.Key, ca.DER

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(7 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:     []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("creating serving certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}

	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	files := map[string][]byte{
		"ca.crt":  caPEM,
		"tls.crt": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		"tls.key": pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return nil, fmt.Errorf("writing %s: %w", name, err)
		}
	}
	return &ServingCert{Dir: dir, CABundle: caPEM}, nil
}

func encodeBase64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
