package prometheus_test

import (
	"context"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/internal/integrations/prometheus"
	"github.com/ml-operator/ml-operator/internal/integrations/prometheus/prometheustest"
)

// thanosLike is a Prometheus API over TLS behind a bearer-token check, as
// a Thanos querier behind OpenShift's oauth proxy: it answers 401 to a
// request without the current token and records the tokens it saw.
type thanosLike struct {
	srv    *httptest.Server
	caFile string

	mu    sync.Mutex
	token string
	seen  []string
}

func newThanosLike(t *testing.T, token string) *thanosLike {
	th := &thanosLike{token: token}
	api := prometheustest.Handler(func(string) (float64, bool) { return 3, true })
	th.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		th.mu.Lock()
		got, want := r.Header.Get("Authorization"), "Bearer "+th.token
		th.seen = append(th.seen, got)
		th.mu.Unlock()
		if got != want {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		api.ServeHTTP(w, r)
	}))
	t.Cleanup(th.srv.Close)
	th.caFile = filepath.Join(t.TempDir(), "service-ca.crt")
	require.NoError(t, os.WriteFile(th.caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: th.srv.Certificate().Raw}), 0o600))
	return th
}

func (th *thanosLike) rotate(token string) {
	th.mu.Lock()
	defer th.mu.Unlock()
	th.token = token
}

func writeToken(t *testing.T, path, token string) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, []byte(token+"\n"), 0o600))
}

// versionQueries are the generic preset's queries for version v1 of
// ModelDeployment llm in team-a.
func versionQueries(t *testing.T) prometheus.Queries {
	q, err := prometheus.PresetQueries(string(mlv1.AnalysisGeneric))
	require.NoError(t, err)
	return q.Render("team-a", prometheus.PodRegex("llm", "v1"), "1m")
}

func base() *http.Transport { return http.DefaultTransport.(*http.Transport) }

// With the token file and the CA file, the queries reach a TLS Prometheus
// that demands a bearer token; a token rotated in the file (a Secret
// mounted into the pod) is used from the next query on.
func TestTransportSendsTheTokenAndTrustsTheCA(t *testing.T) {
	th := newThanosLike(t, "first")
	tokenFile := filepath.Join(t.TempDir(), "token")
	writeToken(t, tokenFile, "first")

	rt, err := prometheus.Transport(base(), prometheus.Auth{BearerTokenFile: tokenFile, CAFile: th.caFile})
	require.NoError(t, err)
	src, err := prometheus.NewHTTPSource(th.srv.URL, rt)
	require.NoError(t, err)
	m, err := src.VersionMetrics(context.Background(), versionQueries(t))
	require.NoError(t, err)
	assert.InDelta(t, 3, m.RequestsPerSecond, 0)

	th.rotate("second")
	writeToken(t, tokenFile, "second")
	_, err = src.VersionMetrics(context.Background(), versionQueries(t))
	require.NoError(t, err)
	th.mu.Lock()
	defer th.mu.Unlock()
	assert.Contains(t, th.seen, "Bearer first")
	assert.Equal(t, "Bearer second", th.seen[len(th.seen)-1])
}

// Without the CA the server's certificate is refused; without the token
// the server refuses the query: both reach the caller as errors.
func TestTransportWithoutCAOrTokenFails(t *testing.T) {
	th := newThanosLike(t, "secret")
	tokenFile := filepath.Join(t.TempDir(), "token")
	writeToken(t, tokenFile, "secret")

	noCA, err := prometheus.Transport(base(), prometheus.Auth{BearerTokenFile: tokenFile})
	require.NoError(t, err)
	src, err := prometheus.NewHTTPSource(th.srv.URL, noCA)
	require.NoError(t, err)
	_, err = src.VersionMetrics(context.Background(), versionQueries(t))
	require.ErrorContains(t, err, "certificate")

	noToken, err := prometheus.Transport(base(), prometheus.Auth{CAFile: th.caFile})
	require.NoError(t, err)
	src, err = prometheus.NewHTTPSource(th.srv.URL, noToken)
	require.NoError(t, err)
	_, err = src.VersionMetrics(context.Background(), versionQueries(t))
	require.Error(t, err)
}

// Missing, empty or non-PEM files are refused at start, naming the flag.
func TestTransportRefusesBadFiles(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	require.NoError(t, os.WriteFile(empty, nil, 0o600))
	for _, c := range []struct {
		auth prometheus.Auth
		want string
	}{
		{prometheus.Auth{BearerTokenFile: filepath.Join(dir, "missing")}, "--prometheus-bearer-token-file"},
		{prometheus.Auth{BearerTokenFile: empty}, "--prometheus-bearer-token-file " + empty + ": the file is empty"},
		{prometheus.Auth{CAFile: filepath.Join(dir, "missing")}, "--prometheus-ca-file"},
		{prometheus.Auth{CAFile: empty}, "--prometheus-ca-file " + empty + ": no PEM certificate"},
	} {
		_, err := prometheus.Transport(base(), c.auth)
		assert.ErrorContains(t, err, c.want)
	}
}
