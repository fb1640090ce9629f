package trainingjob

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

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

// mlflowDeleteTries bounds the calls that try to end a deleted job's run.
const mlflowDeleteTries = 3

// mlflowDeleteRetry is the wait between those calls.
const mlflowDeleteRetry = 2 * time.Second

// TagJobUID is the run tag holding the job's UID. Run creation first searches
// for it, so a run whose id never reached the status (a failed status write)
// is found again instead of created twice.
const TagJobUID = "ml.example.com/uid"

// MLflow run statuses (MLflow's RunStatus).
const (
	MLflowRunFinished = "FINISHED"
	MLflowRunFailed   = "FAILED"
	MLflowRunKilled   = "KILLED"
)

// MLflowMetric is one logged metric value.
type MLflowMetric struct {
	Key       string  `json:"key"`
	Value     float64 `json:"value"`
	Timestamp int64   `json:"timestamp"` // milliseconds since the epoch
	Step      int64   `json:"step"`
}

// MLflowTag is a run tag.
type MLflowTag struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// MLflowClient is the part of MLflow's tracking REST API the operator uses.
type MLflowClient interface {
	// CreateRun returns the id of the run tagged with key in the named
	// experiment (created if missing), creating the run, with key among its
	// tags, when there is none: calling it again after a lost reply or a lost
	// status write does not create a second run.
	CreateRun(ctx context.Context, trackingURI, experiment, runName string, key MLflowTag, start time.Time, tags []MLflowTag) (string, error)
	// LogMetrics logs metric values to a run.
	LogMetrics(ctx context.Context, trackingURI, runID string, metrics []MLflowMetric) error
	// EndRun sets a run's final status.
	EndRun(ctx context.Context, trackingURI, runID, status string, end time.Time) error
}

// HTTPMLflowClient talks to MLflow's REST API (/api/2.0/mlflow/...).
type HTTPMLflowClient struct {
	Client *http.Client
}

// NewHTTPMLflowClient returns a client with short timeouts: a call blocks a
// reconcile worker, and a slow tracking server must not stall the others.
func NewHTTPMLflowClient() *HTTPMLflowClient {
	return &HTTPMLflowClient{Client: &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{
		DialContext: (&net.Dialer{Timeout: 2 * time.Second}).DialContext,
	}}}
}

// mlflowError is MLflow's error body.
type mlflowError struct {
	ErrorCode string `json:"error_code"`
	Message   string `json:"message"`
}

// call sends one request; in (if not nil) is the JSON body, out (if not nil)
// receives the JSON response. It returns the HTTP status and MLflow's
// error_code on failure.
func (c *HTTPMLflowClient) call(ctx context.Context, method, base, endpoint string, query url.Values, in, out any) (string, error) {
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
		var e mlflowError
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
func (c *HTTPMLflowClient) experimentID(ctx context.Context, base, name string) (string, error) {
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
func (c *HTTPMLflowClient) findRun(ctx context.Context, base, expID string, key MLflowTag) (string, error) {
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

// CreateRun implements MLflowClient.
func (c *HTTPMLflowClient) CreateRun(ctx context.Context, base, experiment, runName string, key MLflowTag, start time.Time, tags []MLflowTag) (string, error) {
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
	tags = append(append([]MLflowTag(nil), tags...), key)
	in := map[string]any{"experiment_id": expID, "run_name": runName, "start_time": start.UnixMilli(), "tags": tags}
	if _, err := c.call(ctx, http.MethodPost, base, "runs/create", nil, in, &got); err != nil {
		return "", err
	}
	if got.Run.Info.RunID == "" {
		return "", errors.New("runs/create: the response has no run.info.run_id")
	}
	return got.Run.Info.RunID, nil
}

// LogMetrics implements MLflowClient.
func (c *HTTPMLflowClient) LogMetrics(ctx context.Context, base, runID string, metrics []MLflowMetric) error {
	_, err := c.call(ctx, http.MethodPost, base, "runs/log-batch", nil, map[string]any{"run_id": runID, "metrics": metrics}, nil)
	return err
}

// EndRun implements MLflowClient.
func (c *HTTPMLflowClient) EndRun(ctx context.Context, base, runID, status string, end time.Time) error {
	_, err := c.call(ctx, http.MethodPost, base, "runs/update", nil,
		map[string]any{"run_id": runID, "status": status, "end_time": end.UnixMilli()}, nil)
	return err
}

// progressMetrics are the metrics to log for a job's current progress, at
// step = the current epoch.
func progressMetrics(st *mlv1.TrainingJobStatus, now time.Time) []MLflowMetric {
	ms := now.UnixMilli()
	step := int64(st.CurrentEpoch)
	out := []MLflowMetric{{Key: "epoch", Value: float64(st.CurrentEpoch), Timestamp: ms, Step: step}}
	if m := st.Metrics; m != nil {
		for key, v := range map[string]*float64{"loss": m.Loss, "accuracy": m.Accuracy, "throughput_samples_per_second": m.Throughput} {
			if v != nil {
				out = append(out, MLflowMetric{Key: key, Value: *v, Timestamp: ms, Step: step})
			}
		}
	}
	return out
}

// finalRunStatus is the MLflow status of a finished job: FINISHED when it
// completed, KILLED when the operator stopped it (deadline exceeded), else FAILED.
func finalRunStatus(job *mlv1.TrainingJob) string {
	if job.Status.State == mlv1.StateCompleted {
		return MLflowRunFinished
	}
	if c := meta.FindStatusCondition(job.Status.Conditions, mlv1.TrainingJobFailed); c != nil && c.Reason == mlv1.ReasonDeadlineExceeded {
		return MLflowRunKilled
	}
	return MLflowRunFailed
}

// trackingCondition records the outcome of an MLflow call.
func trackingCondition(job *mlv1.TrainingJob, reason string, err error) metav1.Condition {
	c := metav1.Condition{Type: mlv1.TrainingJobMLflowTracking, Status: metav1.ConditionTrue, Reason: reason, ObservedGeneration: job.Generation}
	mf := job.Spec.Tracking.MLflow
	switch {
	case err != nil:
		c.Status, c.Reason = metav1.ConditionFalse, mlv1.ReasonTrackingFailed
		c.Message = fmt.Sprintf("MLflow at %s: %v (retried; the job is not affected)", mf.TrackingURI, err)
	case reason == mlv1.ReasonRunEnded:
		c.Message = fmt.Sprintf("run %s ended as %s", job.Status.MLflowRunID, finalRunStatus(job))
	default:
		c.Message = fmt.Sprintf("run %s in experiment %q at %s", job.Status.MLflowRunID, mf.ExperimentName, mf.TrackingURI)
	}
	return c
}

// mlflowEnabled reports whether the job is tracked in MLflow.
func mlflowEnabled(job *mlv1.TrainingJob) bool {
	return job.Spec.Tracking != nil && job.Spec.Tracking.MLflow != nil
}

// mlflowCtx bounds one MLflow call.
func mlflowCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, 5*time.Second)
}

// ensureMLflowRun creates the job's run once it has started, and holds
// mlv1.MLflowRunFinalizer while the run is open. A failure is a condition and a
// retry with backoff, never an error of the pass.
func (r *Reconciler) ensureMLflowRun(ctx context.Context, p *pass) {
	defer r.syncMLflowFinalizer(ctx, p)
	job, st := p.job, &p.job.Status
	if !mlflowEnabled(job) || st.MLflowRunID != "" || st.StartTime == nil {
		return
	}
	key := client.ObjectKeyFromObject(job)
	if ok, next := r.tracking.due(key, p.now); !ok {
		p.requeue(next)
		return
	}
	mf := job.Spec.Tracking.MLflow
	tags := []MLflowTag{{Key: "ml.example.com/trainingjob", Value: job.Name}, {Key: "ml.example.com/namespace", Value: job.Namespace},
		{Key: "ml.example.com/attempt", Value: fmt.Sprint(st.Attempt())}, {Key: "mlflow.runName", Value: job.Namespace + "/" + job.Name}}
	cctx, cancel := mlflowCtx(ctx)
	defer cancel()
	uid := MLflowTag{Key: TagJobUID, Value: string(job.UID)}
	id, err := r.cfg.MLflow.CreateRun(cctx, mf.TrackingURI, mf.ExperimentName, job.Namespace+"/"+job.Name, uid, st.StartTime.Time, tags)
	r.retryTracking(p, key, err)
	if err == nil {
		st.MLflowRunID = id
		p.event(corev1.EventTypeNormal, mlv1.EventMLflowRunCreated, "MLflow run %s created at %s", id, mf.TrackingURI)
	}
	setCondition(st, trackingCondition(job, mlv1.ReasonRunTracked, err), metav1.NewTime(p.now))
}

// mlflowRunOpen reports a run the operator still has to end: created, not
// ended, and not given up on (an hour after the job finished).
func mlflowRunOpen(job *mlv1.TrainingJob, now time.Time) bool {
	st := &job.Status
	if !mlflowEnabled(job) || st.MLflowRunID == "" {
		return false
	}
	if c := meta.FindStatusCondition(st.Conditions, mlv1.TrainingJobMLflowTracking); c != nil && c.Reason == mlv1.ReasonRunEnded && c.Status == metav1.ConditionTrue {
		return false
	}
	return st.CompletionTime == nil || now.Sub(st.CompletionTime.Time) <= time.Hour
}

// syncMLflowFinalizer holds mlv1.MLflowRunFinalizer exactly while the job's run is
// open. A failed write is logged and retried on a pass soon after: the
// pass's status write still goes ahead.
func (r *Reconciler) syncMLflowFinalizer(ctx context.Context, p *pass) {
	job := p.job
	want := job.DeletionTimestamp == nil && mlflowRunOpen(job, p.now)
	if want == controllerutil.ContainsFinalizer(job, mlv1.MLflowRunFinalizer) {
		return
	}
	if err := r.setFinalizer(ctx, job, mlv1.MLflowRunFinalizer, want); err != nil {
		log.FromContext(ctx).Error(err, "MLflow run finalizer", "want", want)
		p.requeue(p.now.Add(time.Second))
	}
}

// setFinalizer adds or removes a finalizer with a patch of a copy (the patch
// response must not overwrite the status this pass computed), then takes
// the new resourceVersion and finalizers over, so the status write that
// follows is not refused as a conflict.
func (r *Reconciler) setFinalizer(ctx context.Context, job *mlv1.TrainingJob, finalizer string, present bool) error {
	orig := job.DeepCopy()
	cp := job.DeepCopy()
	if present {
		controllerutil.AddFinalizer(cp, finalizer)
	} else {
		controllerutil.RemoveFinalizer(cp, finalizer)
	}
	if err := r.client.Patch(ctx, cp, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		if !present && apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("patching finalizer %s: %w", finalizer, err)
	}
	job.ResourceVersion, job.Finalizers = cp.ResourceVersion, cp.Finalizers
	return nil
}

// endDeletedMLflowRun ends the run of a job being deleted before its run was
// ended: KILLED while it was still active (FINISHED or FAILED when it had
// already finished), then releases mlv1.MLflowRunFinalizer. While MLflow fails it
// retries every mlflowDeleteRetry, at most mlflowDeleteTries calls in all
// (failures of the run's last calls before the deletion count too); then a
// Warning event says the run was left open and the finalizer goes anyway.
func (r *Reconciler) endDeletedMLflowRun(ctx context.Context, p *pass) error {
	job, st := p.job, &p.job.Status
	if !controllerutil.ContainsFinalizer(job, mlv1.MLflowRunFinalizer) {
		return nil
	}
	key := client.ObjectKeyFromObject(job)
	if mlflowEnabled(job) && st.MLflowRunID != "" {
		status, end := MLflowRunKilled, p.now
		if st.CompletionTime != nil {
			status, end = finalRunStatus(job), st.CompletionTime.Time
		}
		uri := job.Spec.Tracking.MLflow.TrackingURI
		cctx, cancel := mlflowCtx(ctx)
		err := r.cfg.MLflow.EndRun(cctx, uri, st.MLflowRunID, status, end)
		cancel()
		switch {
		case err == nil:
			p.event(corev1.EventTypeNormal, mlv1.EventMLflowRunEnded, "MLflow run %s ended as %s: the job was deleted", st.MLflowRunID, status)
		case r.tracking.failed(key, p.now) < mlflowDeleteTries:
			p.requeue(p.now.Add(mlflowDeleteRetry))
			return nil
		default:
			p.event(corev1.EventTypeWarning, mlv1.EventMLflowRunNotEnded, "MLflow run %s at %s left open: %v (gave up after %d tries; the deletion goes ahead)",
				st.MLflowRunID, uri, err, mlflowDeleteTries)
		}
	}
	r.tracking.forget(key)
	return r.setFinalizer(ctx, job, mlv1.MLflowRunFinalizer, false)
}

// failed records a failed MLflow call and returns the failures in a row.
func (t *scrapeTracker) failed(key types.NamespacedName, now time.Time) int {
	t.record(key, now, false, mlflowDeleteRetry, mlflowDeleteRetry)
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.entries[key].failures
}

// retryTracking schedules the retry of a failed MLflow call (backoff like a
// failing scrape), or clears the backoff after a success.
func (r *Reconciler) retryTracking(p *pass, key client.ObjectKey, err error) {
	if err == nil {
		r.tracking.forget(key)
		return
	}
	p.requeue(r.tracking.record(key, p.now, false, r.cfg.ScrapeInterval, r.cfg.ScrapeBackoffMax))
}

// logMLflowMetrics logs the job's progress to its run.
func (r *Reconciler) logMLflowMetrics(ctx context.Context, p *pass) {
	job := p.job
	if !mlflowEnabled(job) || job.Status.MLflowRunID == "" {
		return
	}
	cctx, cancel := mlflowCtx(ctx)
	defer cancel()
	err := r.cfg.MLflow.LogMetrics(cctx, job.Spec.Tracking.MLflow.TrackingURI, job.Status.MLflowRunID, progressMetrics(&job.Status, p.now))
	setCondition(&job.Status, trackingCondition(job, mlv1.ReasonRunTracked, err), metav1.NewTime(p.now))
}

// endMLflowRun sets the run's final status once the job finished; retried
// with backoff for an hour after completion while MLflow fails.
func (r *Reconciler) endMLflowRun(ctx context.Context, p *pass) {
	defer r.syncMLflowFinalizer(ctx, p)
	job, st := p.job, &p.job.Status
	if !mlflowEnabled(job) || st.MLflowRunID == "" {
		return
	}
	if c := meta.FindStatusCondition(st.Conditions, mlv1.TrainingJobMLflowTracking); c != nil && c.Reason == mlv1.ReasonRunEnded {
		return
	}
	if st.CompletionTime != nil && p.now.Sub(st.CompletionTime.Time) > time.Hour {
		return
	}
	key := client.ObjectKeyFromObject(job)
	if ok, next := r.tracking.due(key, p.now); !ok {
		p.requeue(next)
		return
	}
	cctx, cancel := mlflowCtx(ctx)
	defer cancel()
	end := p.now
	if st.CompletionTime != nil {
		end = st.CompletionTime.Time
	}
	err := r.cfg.MLflow.EndRun(cctx, job.Spec.Tracking.MLflow.TrackingURI, st.MLflowRunID, finalRunStatus(job), end)
	r.retryTracking(p, key, err)
	setCondition(st, trackingCondition(job, mlv1.ReasonRunEnded, err), metav1.NewTime(p.now))
}
