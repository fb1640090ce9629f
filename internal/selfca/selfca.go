// Package selfca makes the short-lived self-signed CAs the project's
// harnesses sign their certificates with: the local cluster's webhook
// serving certificate and the real node's control-plane PKI.
package selfca

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"time"
)

// Validity is how long a CA made here is valid (from an hour before now).
const Validity = 7 * 24 * time.Hour

// CA is a self-signed P-256 CA.
type CA struct {
	Cert *x509.Certificate
	// DER is Cert's encoding.
	DER []byte
	Key *ecdsa.PrivateKey
}

// New makes a CA named commonName, valid from an hour before now for
// Validity.
func New(commonName string, now time.Time) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(Validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("creating the CA certificate %q: %w", commonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, DER: der, Key: key}, nil
}
