package prometheus

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"strings"
)

// Auth is how the manager authenticates to Prometheus and verifies its
// certificate: what a Thanos querier behind an authenticating proxy (as on
// OpenShift) needs. Both come from files, so a Secret mounted into the
// manager pod supplies them and a rotated token is read on the next query.
type Auth struct {
	// BearerTokenFile holds the token sent as "Authorization: Bearer"
	// with every query; read again for each request.
	BearerTokenFile string
	// CAFile holds PEM certificates that verify Prometheus' serving
	// certificate, instead of the system roots.
	CAFile string
}

// Transport returns base (cloned) with the CA of auth, wrapped so every
// request carries the bearer token of auth. Errors name the flag and file.
func Transport(base *http.Transport, auth Auth) (http.RoundTripper, error) {
	t := base.Clone()
	if auth.CAFile != "" {
		pem, err := os.ReadFile(auth.CAFile)
		if err != nil {
			return nil, fmt.Errorf("--prometheus-ca-file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--prometheus-ca-file %s: no PEM certificate in the file", auth.CAFile)
		}
		if t.TLSClientConfig == nil {
			t.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		t.TLSClientConfig.RootCAs = pool
	}
	if auth.BearerTokenFile == "" {
		return t, nil
	}
	if _, err := readToken(auth.BearerTokenFile); err != nil {
		return nil, err
	}
	return &bearerTokenFile{path: auth.BearerTokenFile, next: t}, nil
}

// bearerTokenFile adds the token in path to every request.
type bearerTokenFile struct {
	path string
	next http.RoundTripper
}

func (b *bearerTokenFile) RoundTrip(req *http.Request) (*http.Response, error) {
	token, err := readToken(b.path)
	if err != nil {
		return nil, err
	}
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+token)
	return b.next.RoundTrip(req)
}

func readToken(path string) (string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("--prometheus-bearer-token-file: %w", err)
	}
	token := strings.TrimSpace(string(raw))
	if token == "" {
		return "", fmt.Errorf("--prometheus-bearer-token-file %s: the file is empty", path)
	}
	return token, nil
}
