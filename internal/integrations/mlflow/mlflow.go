// Package mlflow is the part of MLflow's tracking REST API
// (https://mlflow.org/docs/latest/rest-api.html) the TrainingJob controller
// uses: find or create a job's run, log its progress, end it. Client is what
// the controller calls; HTTPClient talks to a tracking server. The package
// knows nothing of TrainingJobs: what to log, and when, is the controller's.
package mlflow

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Run statuses (MLflow's RunStatus) a run is ended with.
const (
	RunFinished = "FINISHED"
	RunFailed   = "FAILED"
	RunKilled   = "KILLED"
)

// Metric is one logged metric value.
type Metric struct {
	Key       string  `json:"key"`
	Value     float64 `json:"value"`
	Timestamp int64   `json:"timestamp"` // milliseconds since the epoch
	Step      int64   `json:"step"`
}

// Tag is a run tag.
type Tag struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// Client is the part of MLflow's tracking REST API the operator uses.
type Client interface {
	// CreateRun returns the id of the run tagged with key in the named
	// experiment (created if missing), creating the run, with key among its
	// tags, when there is none: calling it again after a lost reply or a lost
	// status write does not create a second run.
	CreateRun(ctx context.Context, trackingURI, experiment, runName string, key Tag, start time.Time, tags []Tag) (string, error)
	// LogMetrics logs metric values to a run.
	LogMetrics(ctx context.Context, trackingURI, runID string, metrics []Metric) error
	// EndRun sets a run's final status.
	EndRun(ctx context.Context, trackingURI, runID, status string, end time.Time) error
}

// HTTPClient talks to MLflow's REST API (/api/2.0/mlflow/...).
type HTTPClient struct {
	Client *http.Client
}

var _ Client = &HTTPClient{}

// NewHTTPClient returns a client with short timeouts: a call blocks a
// reconcile worker, and a slow tracking server must not stall the others.
func NewHTTPClient() *HTTPClient {
	return &HTTPClient{Client: &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{
		DialContext: (&net.Dialer{Timeout: 2 * time.Second}).DialContext,
	}}}
}

// apiError is MLflow's error body.
type apiError struct {
	ErrorCode string `json:"error_code"`
	Message   string `json:"message"`
}

// call sends one request; in (if not nil) is the JSON body, out (if not nil)
// receives the JSON response. It returns the HTTP status and MLflow's
// error_code on failure.
func (c *HTTPClient) call(ctx context.Context, method, base, endpoint string, query url.Values, in, out any) (string, error) {
	u := strings.TrimRight(base, "/") + "/api/2.0/mlflow/" + endpoint
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return "", err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return "", err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.Client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		var e apiError
		_ = json.Unmarshal(data, &e)
		return e.ErrorCode, fmt.Errorf("%s %s: HTTP %d %s %s", method, endpoint, resp.StatusCode, e.ErrorCode, e.Message)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return "", fmt.Errorf("%s %s: reading the response: %w", method, endpoint, err)
		}
	}
	return "", nil
}

// experimentID finds the experiment by name, creating it when missing.
func (c *HTTPClient) experimentID(ctx context.Context, base, name string) (string, error) {
	var got struct {
		Experiment struct {
			ExperimentID string `json:"experiment_id"`
		} `json:"experiment"`
	}
	code, err := c.call(ctx, http.MethodGet, base, "experiments/get-by-name", url.Values{"experiment_name": {name}}, nil, &got)
	if err == nil {
		return got.Experiment.ExperimentID, nil
	}
	if code != "RESOURCE_DOES_NOT_EXIST" {
		return "", err
	}
	var created struct {
		ExperimentID string `json:"experiment_id"`
	}
	code, err = c.call(ctx, http.MethodPost, base, "experiments/create", nil, map[string]string{"name": name}, &created)
	if code == "RESOURCE_ALREADY_EXISTS" {
		// Created concurrently by someone else.
		return c.experimentID(ctx, base, name)
	}
	return created.ExperimentID, err
}

// runInfo is the part of MLflow's Run the operator reads.
type runInfo struct {
	Info struct {
		RunID string `json:"run_id"`
	} `json:"info"`
}

// findRun is the id of the experiment's run tagged key.Key = key.Value, ""
// when there is none (runs/search; deleted runs are not searched).
func (c *HTTPClient) findRun(ctx context.Context, base, expID string, key Tag) (string, error) {
	var got struct {
		Runs []runInfo `json:"runs"`
	}
	// Backticks quote a tag key with dots or slashes in MLflow's filter
	// syntax and the value is single-quoted, so neither may contain its own
	// quote (a Kubernetes UID never does).
	if strings.ContainsAny(key.Key, "`") || strings.ContainsAny(key.Value, "'") {
		return "", fmt.Errorf("runs/search: tag %q=%q cannot be quoted in a filter", key.Key, key.Value)
	}
	in := map[string]any{
		"experiment_ids": []string{expID},
		"filter":         fmt.Sprintf("tags.`%s` = '%s'", key.Key, key.Value),
		"run_view_type":  "ACTIVE_ONLY",
		"max_results":    1,
	}
	if _, err := c.call(ctx, http.MethodPost, base, "runs/search", nil, in, &got); err != nil {
		return "", err
	}
	if len(got.Runs) == 0 {
		return "", nil
	}
	return got.Runs[0].Info.RunID, nil
}

// CreateRun implements Client.
func (c *HTTPClient) CreateRun(ctx context.Context, base, experiment, runName string, key Tag, start time.Time, tags []Tag) (string, error) {
	if experiment == "" {
		experiment = "Default"
	}
	expID, err := c.experimentID(ctx, base, experiment)
	if err != nil {
		return "", err
	}
	if id, err := c.findRun(ctx, base, expID, key); err != nil || id != "" {
		return id, err
	}
	var got struct {
		Run runInfo `json:"run"`
	}
	tags = append(append([]Tag(nil), tags...), key)
	in := map[string]any{"experiment_id": expID, "run_name": runName, "start_time": start.UnixMilli(), "tags": tags}
	if _, err := c.call(ctx, http.MethodPost, base, "runs/create", nil, in, &got); err != nil {
		return "", err
	}
	if got.Run.Info.RunID == "" {
		return "", errors.New("runs/create: the response has no run.info.run_id")
	}
	return got.Run.Info.RunID, nil
}

// LogMetrics implements Client.
func (c *HTTPClient) LogMetrics(ctx context.Context, base, runID string, metrics []Metric) error {
	_, err := c.call(ctx, http.MethodPost, base, "runs/log-batch", nil, map[string]any{"run_id": runID, "metrics": metrics}, nil)
	return err
}

// EndRun implements Client.
func (c *HTTPClient) EndRun(ctx context.Context, base, runID, status string, end time.Time) error {
	_, err := c.call(ctx, http.MethodPost, base, "runs/update", nil,
		map[string]any{"run_id": runID, "status": status, "end_time": end.UnixMilli()}, nil)
	return err
}
