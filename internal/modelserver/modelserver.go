// Package modelserver is the project's own model server: the smallest
// server that keeps the contract a ModelDeployment's pods must keep
// (docs/modeldeployment.md), so the real node can serve with an image built
// here (ghcr.io/ml-operator/model-server, internal/images).
//
// It serves a linear model read from MODEL_PATH (an http(s) URL or a local
// file) at
// POST /v1/models/<MODEL_NAME>:predict and answers with its MODEL_VERSION;
// GET /health (the operator's default probe path), /livez and /readyz;
// and GET /metrics in the Prometheus text format with the series the
// operator's rollback queries read: http_requests_total{code,method} and
// the histogram http_request_duration_seconds, both for predictions only,
// so the error rate is the share of failed predictions, not diluted by
// probes and scrapes.
//
// For tests it fails on request: FAIL_RATE answers that share of
// predictions with 500, CRASH_AFTER exits with code 1 that long after the
// start, READY=false starts it not ready (its health endpoints answer 503
// while it serves /metrics and predictions sent to it directly), and with
// MODEL_SERVER_ADMIN=true the endpoints POST /admin/crash,
// /admin/fail-rate?value=R and /admin/ready?value=false change that at run
// time.
package modelserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// DefaultAddr is where the server listens: the port a ModelDeployment's
// spec.port defaults to. The operator passes the port to the container
// only as containerPort, so the server listens there unless PORT says
// otherwise.
const DefaultAddr = ":8080"

// Config is what the server serves and how it misbehaves on request.
type Config struct {
	// ModelName, ModelVersion, ModelPath and Framework are the operator's
	// env (MODEL_NAME, MODEL_VERSION, MODEL_PATH, FRAMEWORK).
	ModelName    string
	ModelVersion string
	ModelPath    string
	Framework    string
	// Addr is the listen address (PORT, else DefaultAddr).
	Addr string
	// FailRate is the share (0..1) of predictions answered with 500.
	FailRate float64
	// CrashAfter, when positive, makes the server exit with code 1 that
	// long after it started.
	CrashAfter time.Duration
	// Admin enables the /admin endpoints.
	Admin bool
	// NotReady starts the server not ready (READY=false): /health and
	// /readyz answer 503 until POST /admin/ready?value=true.
	NotReady bool
	// DrainDelay is how long the server keeps answering after SIGTERM
	// before it stops listening (DRAIN_DELAY, else DefaultDrainDelay):
	// the time the pod's Services need to drop it from their endpoints.
	DrainDelay time.Duration
}

// DefaultDrainDelay is the drain delay when DRAIN_DELAY is not set: a pod
// told to stop is still sent new connections until every node's
// kube-proxy has seen it leave the endpoints (a second or two); the
// default termination grace period (30 s) covers it and the 10 s of
// graceful shutdown.
const DefaultDrainDelay = 5 * time.Second

// ConfigFromEnv reads a Config from the environment getenv looks up.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	c := Config{
		ModelName:    getenv("MODEL_NAME"),
		ModelVersion: getenv("MODEL_VERSION"),
		ModelPath:    getenv("MODEL_PATH"),
		Framework:    getenv("FRAMEWORK"),
		Addr:         DefaultAddr,
		DrainDelay:   DefaultDrainDelay,
	}
	var errs []error
	if c.ModelName == "" {
		errs = append(errs, errors.New("MODEL_NAME is not set"))
	}
	if p := getenv("PORT"); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			errs = append(errs, fmt.Errorf("PORT %q is not a port number", p))
		}
		c.Addr = ":" + p
	}
	if v := getenv("FAIL_RATE"); v != "" {
		r, err := parseRate(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("FAIL_RATE: %w", err))
		}
		c.FailRate = r
	}
	if v := getenv("CRASH_AFTER"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			errs = append(errs, fmt.Errorf("CRASH_AFTER %q is not a positive duration (e.g. 30s)", v))
		}
		c.CrashAfter = d
	}
	if v := getenv("DRAIN_DELAY"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			errs = append(errs, fmt.Errorf("DRAIN_DELAY %q is not a duration of zero or more (e.g. 5s)", v))
		}
		c.DrainDelay = d
	}
	if v := getenv("READY"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("READY %q is not a boolean", v))
		}
		c.NotReady = !b
	}
	if v := getenv("MODEL_SERVER_ADMIN"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("MODEL_SERVER_ADMIN %q is not a boolean", v))
		}
		c.Admin = b
	}
	return c, errors.Join(errs...)
}

func parseRate(v string) (float64, error) {
	r, err := strconv.ParseFloat(v, 64)
	if err != nil || r < 0 || r > 1 {
		return 0, fmt.Errorf("%q is not a number between 0 and 1", v)
	}
	return r, nil
}

// Model is a linear model: a prediction is the dot product of the weights
// and an instance, plus the bias.
type Model struct {
	Weights []float64 `json:"weights"`
	Bias    float64   `json:"bias"`
}

// DefaultModel is served when MODEL_PATH is empty: the identity on one
// feature.
var DefaultModel = Model{Weights: []float64{1}}

// LoadModel reads a model from path: an http:// or https:// URL (a model
// store; the answer must be 200 within 30 s), or a local file (or file://
// URL), such as a key of the ModelDeployment's spec.config mounted at
// /etc/model-config. Either holds the Model as JSON. The other schemes a
// ModelDeployment accepts (s3://, gs://, pvc://, hf://) are errors: this
// server has no client for them.
func LoadModel(ctx context.Context, path string) (Model, error) {
	if path == "" {
		return DefaultModel, nil
	}
	data, err := readModel(ctx, path)
	if err != nil {
		return Model{}, fmt.Errorf("loading the model: %w", err)
	}
	var m Model
	if err := json.Unmarshal(data, &m); err != nil {
		return Model{}, fmt.Errorf("model %s: %w", path, err)
	}
	if len(m.Weights) == 0 {
		return Model{}, fmt.Errorf("model %s has no weights", path)
	}
	return m, nil
}

// maxModelBytes bounds what a model may weigh.
const maxModelBytes = 1 << 20

func readModel(ctx context.Context, path string) ([]byte, error) {
	if strings.HasPrefix(path, "http://") || strings.HasPrefix(path, "https://") {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, path, nil)
		if err != nil {
			return nil, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("GET %s: %s", path, resp.Status)
		}
		data, err := io.ReadAll(io.LimitReader(resp.Body, maxModelBytes+1))
		if err != nil {
			return nil, fmt.Errorf("GET %s: %w", path, err)
		}
		if len(data) > maxModelBytes {
			return nil, fmt.Errorf("GET %s: the model is larger than %d bytes", path, maxModelBytes)
		}
		return data, nil
	}
	local := strings.TrimPrefix(path, "file://")
	if i := strings.Index(local, "://"); i >= 0 {
		return nil, fmt.Errorf("model path %q: this server reads http(s) URLs and local files, not %s:// stores", path, local[:i])
	}
	return os.ReadFile(local)
}

// Predict applies the model to one instance.
func (m Model) Predict(instance []float64) (float64, error) {
	if len(instance) != len(m.Weights) {
		return 0, fmt.Errorf("an instance has %d features, the model takes %d", len(instance), len(m.Weights))
	}
	y := m.Bias
	for i, w := range m.Weights {
		y += w * instance[i]
	}
	return y, nil
}

// PredictRequest is the body of a prediction request.
type PredictRequest struct {
	Instances [][]float64 `json:"instances"`
}

// PredictResponse is the answer to one: the model, the version that
// answered, the pod that answered and one prediction per instance.
type PredictResponse struct {
	Model       string    `json:"model"`
	Version     string    `json:"version"`
	Host        string    `json:"host,omitempty"`
	Predictions []float64 `json:"predictions"`
}

// ErrorResponse is the body of every error answer.
type ErrorResponse struct {
	Error   string `json:"error"`
	Version string `json:"version"`
}

// Server answers predictions, probes and scrapes.
type Server struct {
	cfg   Config
	model Model
	host  string
	// exit ends the process (os.Exit; tests replace it).
	exit func(code int)

	mu          sync.Mutex
	failRate    float64
	predictions uint64
	ready       bool

	registry *prometheus.Registry
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
}

// New returns a server for cfg and model. exit ends the process: os.Exit
// in the binary, a recorder in tests.
func New(cfg Config, model Model, exit func(code int)) *Server {
	host, _ := os.Hostname()
	s := &Server{cfg: cfg, model: model, host: host, exit: exit, failRate: cfg.FailRate, ready: !cfg.NotReady}
	s.registry = prometheus.NewRegistry()
	s.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "http_requests_total",
		Help: "Prediction requests by HTTP status code and method.",
	}, []string{"code", "method"})
	s.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "http_request_duration_seconds",
		Help:    "Time to answer a prediction request.",
		Buckets: prometheus.DefBuckets,
	}, []string{"code", "method"})
	info := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "model_server_info",
		Help: "The model and version this server serves (always 1).",
	}, []string{"model", "version", "framework"})
	info.WithLabelValues(cfg.ModelName, cfg.ModelVersion, cfg.Framework).Set(1)
	s.registry.MustRegister(s.requests, s.latency, info)
	return s
}

// PredictPath is the path of predictions for model name.
func PredictPath(name string) string { return "/v1/models/" + name + ":predict" }

// Handler routes every endpoint.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/v1/models/", s.instrument(http.HandlerFunc(s.predict)))
	mux.HandleFunc("/health", s.readiness)
	mux.HandleFunc("/readyz", s.readiness)
	mux.HandleFunc("/livez", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.Handle("/metrics", promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{}))
	if s.cfg.Admin {
		mux.HandleFunc("POST /admin/crash", s.crash)
		mux.HandleFunc("POST /admin/fail-rate", s.setFailRate)
		mux.HandleFunc("POST /admin/ready", s.setReady)
	}
	return mux
}

// StartCrashTimer exits the process CrashAfter after now, when set.
func (s *Server) StartCrashTimer() {
	if s.cfg.CrashAfter <= 0 {
		return
	}
	time.AfterFunc(s.cfg.CrashAfter, func() {
		fmt.Fprintf(os.Stderr, "model-server: CRASH_AFTER=%s has passed: exiting with code 1\n", s.cfg.CrashAfter)
		s.exit(1)
	})
}

func (s *Server) predict(w http.ResponseWriter, r *http.Request) {
	name, ok := strings.CutSuffix(strings.TrimPrefix(r.URL.Path, "/v1/models/"), ":predict")
	switch {
	case !ok || name != s.cfg.ModelName:
		s.writeError(w, http.StatusNotFound, fmt.Sprintf("no model at %s: this server serves %s", r.URL.Path, PredictPath(s.cfg.ModelName)))
		return
	case r.Method != http.MethodPost:
		s.writeError(w, http.StatusMethodNotAllowed, "predictions are POST requests")
		return
	}
	var req PredictRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&req); err != nil {
		s.writeError(w, http.StatusBadRequest, "request body: "+err.Error())
		return
	}
	if s.shouldFail() {
		s.writeError(w, http.StatusInternalServerError, "injected failure (FAIL_RATE)")
		return
	}
	resp := PredictResponse{Model: s.cfg.ModelName, Version: s.cfg.ModelVersion, Host: s.host, Predictions: make([]float64, 0, len(req.Instances))}
	for _, in := range req.Instances {
		y, err := s.model.Predict(in)
		if err != nil {
			s.writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		resp.Predictions = append(resp.Predictions, y)
	}
	writeJSON(w, http.StatusOK, resp)
}

// shouldFail spreads failures evenly: the n-th prediction fails when
// floor(n*rate) grows, so exactly that share of any run of predictions
// fails, and tests need no luck.
func (s *Server) shouldFail() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.predictions++
	n := float64(s.predictions)
	return uint64(n*s.failRate) > uint64((n-1)*s.failRate)
}

func (s *Server) readiness(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	ready := s.ready
	s.mu.Unlock()
	if !ready {
		http.Error(w, "not ready", http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintln(w, "ok")
}

func (s *Server) crash(w http.ResponseWriter, _ *http.Request) {
	fmt.Fprintln(w, "crashing")
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	fmt.Fprintln(os.Stderr, "model-server: /admin/crash: exiting with code 1")
	s.exit(1)
}

func (s *Server) setFailRate(w http.ResponseWriter, r *http.Request) {
	rate, err := parseRate(r.URL.Query().Get("value"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.failRate = rate
	s.mu.Unlock()
	fmt.Fprintf(w, "fail rate %g\n", rate)
}

func (s *Server) setReady(w http.ResponseWriter, r *http.Request) {
	ready, err := strconv.ParseBool(r.URL.Query().Get("value"))
	if err != nil {
		http.Error(w, "value must be true or false", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.ready = ready
	s.mu.Unlock()
	fmt.Fprintf(w, "ready %t\n", ready)
}

func (s *Server) writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, ErrorResponse{Error: msg, Version: s.cfg.ModelVersion})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// instrument counts and times the requests next answers.
func (s *Server) instrument(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		began := time.Now()
		rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
		next.ServeHTTP(rec, r)
		code := strconv.Itoa(rec.code)
		method := strings.ToLower(r.Method)
		s.requests.WithLabelValues(code, method).Inc()
		s.latency.WithLabelValues(code, method).Observe(time.Since(began).Seconds())
	})
}

type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.code = code
	r.ResponseWriter.WriteHeader(code)
}

// Run loads the model, serves until ctx ends, keeps serving for
// cfg.DrainDelay (new connections still arrive until the endpoints drop the
// pod: a rollout of the model servers loses no request), then shuts down
// gracefully (in-flight requests finish, within 10 s). A model that cannot be loaded
// is an error before anything listens: the pod then crash-loops, which is
// what the operator's health checks must see.
func Run(ctx context.Context, cfg Config, logf func(format string, args ...any)) error {
	model, err := LoadModel(ctx, cfg.ModelPath)
	if err != nil {
		return err
	}
	s := New(cfg, model, os.Exit)
	srv := &http.Server{Addr: cfg.Addr, Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return err
	}
	logf("serving model %s version %s (%d features) at %s on %s", cfg.ModelName, cfg.ModelVersion, len(model.Weights), PredictPath(cfg.ModelName), ln.Addr())
	s.StartCrashTimer()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	if cfg.DrainDelay > 0 {
		logf("draining: still serving for %s while the pod leaves its Services' endpoints", cfg.DrainDelay)
		select {
		case err := <-served:
			return err
		case <-time.After(cfg.DrainDelay):
		}
	}
	logf("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return srv.Shutdown(shutdownCtx)
}
