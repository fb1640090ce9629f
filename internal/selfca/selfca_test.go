package selfca_test

import (
	"crypto/x509"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ml-operator/ml-operator/internal/selfca"
)

func TestNewIsASelfSignedCA(t *testing.T) {
	now := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
	ca, err := selfca.New("test CA", now)
	require.NoError(t, err)
	assert.True(t, ca.Cert.IsCA)
	assert.Equal(t, "test CA", ca.Cert.Subject.CommonName)
	assert.Equal(t, now.Add(-time.Hour), ca.Cert.NotBefore)
	assert.Equal(t, now.Add(selfca.Validity), ca.Cert.NotAfter)
	assert.NotZero(t, ca.Cert.KeyUsage&x509.KeyUsageCertSign)
	require.NoError(t, ca.Cert.CheckSignatureFrom(ca.Cert), "self-signed")
	parsed, err := x509.ParseCertificate(ca.DER)
	require.NoError(t, err)
	assert.True(t, parsed.Equal(ca.Cert))
	assert.True(t, ca.Key.PublicKey.Equal(ca.Cert.PublicKey))
}
