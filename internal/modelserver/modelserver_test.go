package modelserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestConfigFromEnv(t *testing.T) {
	c, err := ConfigFromEnv(env(map[string]string{
		"MODEL_NAME": "fraud", "MODEL_VERSION": "v2", "MODEL_PATH": "/etc/model-config/model.json", "FRAMEWORK": "sklearn",
	}))
	require.NoError(t, err)
	require.Equal(t, Config{ModelName: "fraud", ModelVersion: "v2", ModelPath: "/etc/model-config/model.json", Framework: "sklearn", Addr: DefaultAddr, DrainDelay: DefaultDrainDelay}, c)

	c, err = ConfigFromEnv(env(map[string]string{
		"MODEL_NAME": "fraud", "PORT": "9000", "FAIL_RATE": "0.25", "CRASH_AFTER": "30s", "MODEL_SERVER_ADMIN": "true", "DRAIN_DELAY": "0s", "READY": "false",
	}))
	require.NoError(t, err)
	require.True(t, c.NotReady)
	require.Equal(t, ":9000", c.Addr)
	require.Equal(t, 0.25, c.FailRate)
	require.Equal(t, 30*time.Second, c.CrashAfter)
	require.True(t, c.Admin)
	require.Zero(t, c.DrainDelay)

	_, err = ConfigFromEnv(env(map[string]string{
		"PORT": "http", "FAIL_RATE": "2", "CRASH_AFTER": "-1s", "MODEL_SERVER_ADMIN": "sometimes", "DRAIN_DELAY": "-5s", "READY": "soon",
	}))
	require.Error(t, err)
	for _, want := range []string{"MODEL_NAME", "PORT", "FAIL_RATE", "CRASH_AFTER", "MODEL_SERVER_ADMIN", "DRAIN_DELAY", "READY"} {
		require.Contains(t, err.Error(), want)
	}
}

func writeModel(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "model.json")
	require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	return p
}

func TestLoadModel(t *testing.T) {
	ctx := context.Background()
	m, err := LoadModel(ctx, "")
	require.NoError(t, err)
	require.Equal(t, DefaultModel, m)

	p := writeModel(t, `{"weights":[2,3],"bias":1}`)
	store := httptest.NewServer(http.FileServer(http.Dir(filepath.Dir(p))))
	defer store.Close()
	for _, path := range []string{p, "file://" + p, store.URL + "/model.json"} {
		m, err = LoadModel(ctx, path)
		require.NoError(t, err, path)
		require.Equal(t, Model{Weights: []float64{2, 3}, Bias: 1}, m)
	}

	for path, want := range map[string]string{
		"s3://models/fraud/v1":                  "not s3:// stores",
		"pvc://claim/model.json":                "not pvc:// stores",
		filepath.Join(t.TempDir(), "none.json"): "no such file",
		store.URL + "/absent.json":              "404 Not Found",
		writeModel(t, `{"bias":1}`):             "has no weights",
		writeModel(t, `weights`):                "invalid character",
	} {
		_, err := LoadModel(ctx, path)
		require.ErrorContains(t, err, want, path)
	}
}

func TestModelPredict(t *testing.T) {
	m := Model{Weights: []float64{2, 3}, Bias: 1}
	y, err := m.Predict([]float64{1, 2})
	require.NoError(t, err)
	require.Equal(t, 9.0, y)
	_, err = m.Predict([]float64{1})
	require.ErrorContains(t, err, "1 features, the model takes 2")
}

// testServer serves New(cfg, model) on an httptest server; exits records
// every exit code the server asked for.
func testServer(t *testing.T, cfg Config, model Model) (srv *httptest.Server, exits chan int) {
	t.Helper()
	exits = make(chan int, 10)
	s := New(cfg, model, func(code int) { exits <- code })
	srv = httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return srv, exits
}

func post(t *testing.T, url, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

func TestPredictAnswersWithItsVersion(t *testing.T) {
	srv, _ := testServer(t, Config{ModelName: "fraud", ModelVersion: "v2"}, Model{Weights: []float64{2}, Bias: 1})
	code, body := post(t, srv.URL+PredictPath("fraud"), `{"instances":[[1],[2.5]]}`)
	require.Equal(t, http.StatusOK, code, body)
	var resp PredictResponse
	require.NoError(t, json.Unmarshal([]byte(body), &resp))
	require.Equal(t, "fraud", resp.Model)
	require.Equal(t, "v2", resp.Version)
	require.Equal(t, []float64{3, 6}, resp.Predictions)
}

func TestPredictRefusesWhatItCannotAnswer(t *testing.T) {
	srv, _ := testServer(t, Config{ModelName: "fraud", ModelVersion: "v1"}, Model{Weights: []float64{2}})
	for _, tc := range []struct {
		name, method, path, body string
		code                     int
		want                     string
	}{
		{"another model", http.MethodPost, PredictPath("other"), `{"instances":[[1]]}`, http.StatusNotFound, "this server serves /v1/models/fraud:predict"},
		{"not a predict path", http.MethodPost, "/v1/models/fraud", `{}`, http.StatusNotFound, "no model at"},
		{"GET", http.MethodGet, PredictPath("fraud"), "", http.StatusMethodNotAllowed, "POST"},
		{"not JSON", http.MethodPost, PredictPath("fraud"), `instances`, http.StatusBadRequest, "request body"},
		{"wrong feature count", http.MethodPost, PredictPath("fraud"), `{"instances":[[1,2]]}`, http.StatusBadRequest, "2 features, the model takes 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, srv.URL+tc.path, strings.NewReader(tc.body))
			require.NoError(t, err)
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			var e ErrorResponse
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&e))
			require.Equal(t, tc.code, resp.StatusCode)
			require.Contains(t, e.Error, tc.want)
			require.Equal(t, "v1", e.Version)
		})
	}
}

// metricValue returns the value of the series line that starts with
// series in the /metrics text (-1 when there is none).
func metricValue(t *testing.T, metrics, series string) float64 {
	t.Helper()
	for _, line := range strings.Split(metrics, "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			var v float64
			_, err := fmt.Sscan(rest, &v)
			require.NoError(t, err, line)
			return v
		}
	}
	return -1
}

func TestFailRateFailsThatShareAndMetricsCountByCode(t *testing.T) {
	srv, _ := testServer(t, Config{ModelName: "m", ModelVersion: "v1", FailRate: 0.25}, DefaultModel)
	codes := map[int]int{}
	for range 100 {
		code, _ := post(t, srv.URL+PredictPath("m"), `{"instances":[[1]]}`)
		codes[code]++
	}
	require.Equal(t, map[int]int{200: 75, 500: 25}, codes)

	// Probes and scrapes are not predictions: they do not dilute the error
	// rate the operator's rollback query computes.
	for _, p := range []string{"/health", "/livez", "/readyz", "/metrics"} {
		code, _ := get(t, srv.URL+p)
		require.Equal(t, http.StatusOK, code, p)
	}
	code, metrics := get(t, srv.URL+"/metrics")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, 75.0, metricValue(t, metrics, `http_requests_total{code="200",method="post"}`), metrics)
	require.Equal(t, 25.0, metricValue(t, metrics, `http_requests_total{code="500",method="post"}`), metrics)
	require.Equal(t, 75.0, metricValue(t, metrics, `http_request_duration_seconds_count{code="200",method="post"}`), metrics)
	require.Equal(t, 75.0, metricValue(t, metrics, `http_request_duration_seconds_bucket{code="200",method="post",le="+Inf"}`), metrics)
	require.GreaterOrEqual(t, metricValue(t, metrics, `http_request_duration_seconds_sum{code="200",method="post"}`), 0.0, metrics)
	require.Equal(t, 1.0, metricValue(t, metrics, `model_server_info{framework="",model="m",version="v1"}`), metrics)
	require.NotContains(t, metrics, `code="404"`)
}

func TestAdminEndpoints(t *testing.T) {
	t.Run("off unless enabled", func(t *testing.T) {
		srv, exits := testServer(t, Config{ModelName: "m"}, DefaultModel)
		for _, p := range []string{"/admin/crash", "/admin/fail-rate?value=1", "/admin/ready?value=false"} {
			code, _ := post(t, srv.URL+p, "")
			require.Equal(t, http.StatusNotFound, code, p)
		}
		require.Empty(t, exits)
	})
	srv, exits := testServer(t, Config{ModelName: "m", Admin: true}, DefaultModel)
	t.Run("fail-rate", func(t *testing.T) {
		code, _ := post(t, srv.URL+"/admin/fail-rate?value=1", "")
		require.Equal(t, http.StatusOK, code)
		code, _ = post(t, srv.URL+PredictPath("m"), `{"instances":[[1]]}`)
		require.Equal(t, http.StatusInternalServerError, code)
		code, _ = post(t, srv.URL+"/admin/fail-rate?value=0", "")
		require.Equal(t, http.StatusOK, code)
		code, _ = post(t, srv.URL+PredictPath("m"), `{"instances":[[1]]}`)
		require.Equal(t, http.StatusOK, code)
		code, _ = post(t, srv.URL+"/admin/fail-rate?value=1.5", "")
		require.Equal(t, http.StatusBadRequest, code)
	})
	t.Run("ready", func(t *testing.T) {
		code, _ := post(t, srv.URL+"/admin/ready?value=false", "")
		require.Equal(t, http.StatusOK, code)
		for _, p := range []string{"/health", "/readyz"} {
			code, _ = get(t, srv.URL+p)
			require.Equal(t, http.StatusServiceUnavailable, code, p)
		}
		code, _ = get(t, srv.URL+"/livez")
		require.Equal(t, http.StatusOK, code, "liveness stays")
		code, _ = post(t, srv.URL+"/admin/ready?value=true", "")
		require.Equal(t, http.StatusOK, code)
		code, _ = get(t, srv.URL+"/health")
		require.Equal(t, http.StatusOK, code)
	})
	t.Run("crash", func(t *testing.T) {
		code, body := post(t, srv.URL+"/admin/crash", "")
		require.Equal(t, http.StatusOK, code)
		require.Equal(t, "crashing\n", body)
		require.Equal(t, 1, <-exits)
	})
}

// READY=false: the server starts not ready (what a pod that never passes
// its probes serves) and still answers scrapes and predictions sent to it
// directly.
func TestNotReadyServerFailsItsHealthChecks(t *testing.T) {
	srv, _ := testServer(t, Config{ModelName: "m", NotReady: true, Admin: true}, DefaultModel)
	for _, p := range []string{"/health", "/readyz"} {
		code, _ := get(t, srv.URL+p)
		require.Equal(t, http.StatusServiceUnavailable, code, p)
	}
	code, _ := get(t, srv.URL+"/livez")
	require.Equal(t, http.StatusOK, code)
	code, _ = get(t, srv.URL+"/metrics")
	require.Equal(t, http.StatusOK, code)
	code, _ = post(t, srv.URL+PredictPath("m"), `{"instances":[[1]]}`)
	require.Equal(t, http.StatusOK, code)
	code, _ = post(t, srv.URL+"/admin/ready?value=true", "")
	require.Equal(t, http.StatusOK, code)
	code, _ = get(t, srv.URL+"/health")
	require.Equal(t, http.StatusOK, code)
}

func TestCrashAfterExitsWithCodeOne(t *testing.T) {
	exits := make(chan int, 1)
	s := New(Config{ModelName: "m", CrashAfter: time.Millisecond}, DefaultModel, func(code int) { exits <- code })
	s.StartCrashTimer()
	select {
	case code := <-exits:
		require.Equal(t, 1, code)
	case <-time.After(30 * time.Second):
		t.Fatal("CRASH_AFTER=1ms: the server never exited")
	}

	never := New(Config{ModelName: "m"}, DefaultModel, func(int) { t.Error("exited without CRASH_AFTER") })
	never.StartCrashTimer()
}

func TestRunServesUntilCancelled(t *testing.T) {
	p := writeModel(t, `{"weights":[2],"bias":1}`)
	ctx, cancel := context.WithCancel(context.Background())
	listening := make(chan string, 1)
	logf := func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		if i := strings.LastIndex(msg, " on "); i >= 0 && strings.HasPrefix(msg, "serving") {
			listening <- msg[i+len(" on "):]
		}
	}
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{ModelName: "m", ModelVersion: "v3", ModelPath: p, Addr: "127.0.0.1:0"}, logf)
	}()
	var addr string
	select {
	case addr = <-listening:
	case err := <-done:
		t.Fatalf("Run returned before serving: %v", err)
	}
	code, body := post(t, "http://"+addr+PredictPath("m"), `{"instances":[[2]]}`)
	require.Equal(t, http.StatusOK, code, body)
	require.JSONEq(t, `{"model":"m","version":"v3","host":`+hostJSON(t)+`,"predictions":[5]}`, body)
	cancel()
	require.NoError(t, <-done)
}

func hostJSON(t *testing.T) string {
	h, err := os.Hostname()
	require.NoError(t, err)
	b, _ := json.Marshal(h)
	return string(bytes.TrimSpace(b))
}

// TestRunKeepsServingWhileDraining: told to stop, the server still answers
// new connections during its drain delay, then stops listening.
func TestRunKeepsServingWhileDraining(t *testing.T) {
	p := writeModel(t, `{"weights":[2],"bias":1}`)
	ctx, cancel := context.WithCancel(context.Background())
	listening, draining := make(chan string, 1), make(chan struct{})
	logf := func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		if i := strings.LastIndex(msg, " on "); i >= 0 && strings.HasPrefix(msg, "serving") {
			listening <- msg[i+len(" on "):]
		}
		if strings.HasPrefix(msg, "draining") {
			close(draining)
		}
	}
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{ModelName: "m", ModelVersion: "v3", ModelPath: p, Addr: "127.0.0.1:0", DrainDelay: 3 * time.Second}, logf)
	}()
	addr := <-listening
	cancel()
	select {
	case <-draining:
	case err := <-done:
		t.Fatalf("Run returned without draining: %v", err)
	}
	code, body := post(t, "http://"+addr+PredictPath("m"), `{"instances":[[2]]}`)
	require.Equal(t, http.StatusOK, code, "a prediction while draining: %s", body)
	require.NoError(t, <-done)
	_, err := net.Dial("tcp", addr)
	require.Error(t, err, "still listening after the drain")
}

func TestRunRefusesAModelItCannotLoad(t *testing.T) {
	err := Run(context.Background(), Config{ModelName: "m", ModelPath: "/nonexistent/model.json", Addr: "127.0.0.1:0"}, t.Logf)
	require.ErrorContains(t, err, "loading the model")
}
