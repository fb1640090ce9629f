package trainingjob

// Tracking a job in MLflow (spec.tracking.mlflow): the run is created when
// the job starts, progress is logged to it, and it is ended when the job
// finishes or is deleted. The calls go through Config.MLflow
// (internal/integrations/mlflow); a failure is a condition and a retry,
// never an error of the pass.

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/internal/integrations/mlflow"
)

// mlflowDeleteTries bounds the calls that try to end a deleted job's run.
const mlflowDeleteTries = 3

// mlflowDeleteRetry is the wait between those calls.
const mlflowDeleteRetry = 2 * time.Second

// TagJobUID is the run tag holding the job's UID. Run creation first searches
// for it, so a run whose id never reached the status (a failed status write)
// is found again instead of created twice.
const TagJobUID = "ml.example.com/uid"

// progressMetrics are the metrics to log for a job's current progress, at
// step = the current epoch.
func progressMetrics(st *mlv1.TrainingJobStatus, now time.Time) []mlflow.Metric {
	ms := now.UnixMilli()
	step := int64(st.CurrentEpoch)
	out := []mlflow.Metric{{Key: "epoch", Value: float64(st.CurrentEpoch), Timestamp: ms, Step: step}}
	if m := st.Metrics; m != nil {
		for key, v := range map[string]*float64{"loss": m.Loss, "accuracy": m.Accuracy, "throughput_samples_per_second": m.Throughput} {
			if v != nil {
				out = append(out, mlflow.Metric{Key: key, Value: *v, Timestamp: ms, Step: step})
			}
		}
	}
	return out
}

// finalRunStatus is the MLflow status of a finished job: FINISHED when it
// completed, KILLED when the operator stopped it (deadline exceeded), else FAILED.
func finalRunStatus(job *mlv1.TrainingJob) string {
	if job.Status.State == mlv1.StateCompleted {
		return mlflow.RunFinished
	}
	if c := meta.FindStatusCondition(job.Status.Conditions, mlv1.TrainingJobFailed); c != nil && c.Reason == mlv1.ReasonDeadlineExceeded {
		return mlflow.RunKilled
	}
	return mlflow.RunFailed
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
	tags := []mlflow.Tag{{Key: "ml.example.com/trainingjob", Value: job.Name}, {Key: "ml.example.com/namespace", Value: job.Namespace},
		{Key: "ml.example.com/attempt", Value: fmt.Sprint(st.Attempt())}, {Key: "mlflow.runName", Value: job.Namespace + "/" + job.Name}}
	cctx, cancel := mlflowCtx(ctx)
	defer cancel()
	uid := mlflow.Tag{Key: TagJobUID, Value: string(job.UID)}
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
		status, end := mlflow.RunKilled, p.now
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
