package trainingjob

import (
	"context"
	"errors"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

// The TrainingJob metrics of API.md, registered on controller-runtime's
// registry so the manager's /metrics serves them.
var (
	jobsCreated = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "trainingjob_created_total", Help: "TrainingJobs whose resources the operator created.",
	}, []string{"namespace", mlv1.MetricLabelJobNamespace})
	jobsCompleted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "trainingjob_completed_total", Help: "TrainingJobs that completed.",
	}, []string{"namespace", mlv1.MetricLabelJobNamespace})
	jobsFailed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "trainingjob_failed_total", Help: "TrainingJobs that failed, by the reason of their Failed condition.",
	}, []string{"namespace", mlv1.MetricLabelJobNamespace, "reason"})
	jobRestarts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "trainingjob_restarts_total", Help: "Gang restarts, by reason (failures and disruptions).",
	}, []string{"namespace", mlv1.MetricLabelJobNamespace, "reason"})
	jobState = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "trainingjob_state", Help: "1 for the state each TrainingJob is in, 0 for the others.",
	}, []string{"namespace", mlv1.MetricLabelJobNamespace, "name", "state"})
	activeWorkers = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "trainingjob_active_workers", Help: "Running worker pods of the current attempt.",
	}, []string{"namespace", mlv1.MetricLabelJobNamespace, "trainingjob"})
	allocatedGPUs = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "trainingjob_allocated_gpus", Help: "GPUs held by the current attempt's pods.",
	}, []string{"namespace", mlv1.MetricLabelJobNamespace, "trainingjob"})
	allocatedWorkers = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "trainingjob_allocated_workers", Help: "Ranks of the current attempt placed on a node and not finished.",
	}, []string{"namespace", mlv1.MetricLabelJobNamespace, "trainingjob"})
	gpuUtilization = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "trainingjob_gpu_utilization_percent",
		Help: "The job's average GPU utilization (status.resources.gpuUtilization); source is DCGM or Trainer (rank 0's gauge).",
	}, []string{"namespace", mlv1.MetricLabelJobNamespace, "trainingjob", "source"})
	progressPercent = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "trainingjob_progress_percent", Help: "Share of epochs done, from rank 0's metrics.",
	}, []string{"namespace", mlv1.MetricLabelJobNamespace, "trainingjob"})
	currentEpoch = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "trainingjob_current_epoch", Help: "Epoch rank 0 reports.",
	}, []string{"namespace", mlv1.MetricLabelJobNamespace, "trainingjob"})
	trainingLoss = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "trainingjob_loss", Help: "Loss rank 0 reports.",
	}, []string{"namespace", mlv1.MetricLabelJobNamespace, "trainingjob"})
	trainingAccuracy = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "trainingjob_accuracy", Help: "Accuracy rank 0 reports.",
	}, []string{"namespace", mlv1.MetricLabelJobNamespace, "trainingjob"})
	podCreationLatency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "trainingjob_pod_creation_latency_seconds",
		Help:    "Latency of creating one worker pod (the API call, including client rate limiting).",
		Buckets: prometheus.ExponentialBuckets(0.005, 2, 14),
	})
	jobDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "trainingjob_duration_seconds",
		Help:    "Time from a job's start to its completion or failure.",
		Buckets: prometheus.ExponentialBuckets(60, 2, 14),
	}, []string{"namespace", mlv1.MetricLabelJobNamespace, "state"})
	reconcileDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "trainingjob_operator_reconcile_duration_seconds",
		Help:    "Duration of one TrainingJob reconcile pass.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
	})
	reconcileErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "trainingjob_operator_errors_total",
		Help: "TrainingJob reconcile passes that returned an error, by error_type (the API server's reason, such as Conflict or Forbidden; Canceled, DeadlineExceeded or Other).",
	}, []string{"namespace", mlv1.MetricLabelJobNamespace, "error_type"})
)

func init() {
	ctrlmetrics.Registry.MustRegister(jobsCreated, jobsCompleted, jobsFailed, jobRestarts, jobState,
		activeWorkers, allocatedGPUs, allocatedWorkers, gpuUtilization, progressPercent, currentEpoch, trainingLoss, trainingAccuracy,
		podCreationLatency, jobDuration, reconcileDuration, reconcileErrors)
}

// allStates are the values of the state label.
var allStates = []mlv1.TrainingJobState{mlv1.StatePending, mlv1.StateInitializing, mlv1.StateRunning,
	mlv1.StateRestarting, mlv1.StateSuspended, mlv1.StateCompleted, mlv1.StateFailed}

// recordJobGauges sets a job's per-job series from its status.
func recordJobGauges(job *mlv1.TrainingJob) {
	ns, name := job.Namespace, job.Name
	for _, s := range allStates {
		v := 0.0
		if job.Status.State == s {
			v = 1
		}
		jobState.WithLabelValues(ns, ns, name, string(s)).Set(v)
	}
	st := &job.Status
	activeWorkers.WithLabelValues(ns, ns, name).Set(float64(st.Workers.Active))
	allocatedGPUs.WithLabelValues(ns, ns, name).Set(float64(st.AllocatedGPUs))
	placed := 0
	for _, w := range st.WorkerStatuses {
		if w.Node != "" && w.Phase != corev1.PodSucceeded && w.Phase != corev1.PodFailed {
			placed++
		}
	}
	allocatedWorkers.WithLabelValues(ns, ns, name).Set(float64(placed))
	if r := st.Resources; r != nil && r.GPUUtilization != nil {
		// One series per job: a change of source replaces it.
		gpuUtilization.DeletePartialMatch(prometheus.Labels{"namespace": ns, "trainingjob": name})
		gpuUtilization.WithLabelValues(ns, ns, name, string(r.GPUUtilizationSource)).Set(float64(*r.GPUUtilization))
	}
	if st.TotalEpochs > 0 {
		progressPercent.WithLabelValues(ns, ns, name).Set(float64(st.CurrentEpoch) * 100 / float64(st.TotalEpochs))
		currentEpoch.WithLabelValues(ns, ns, name).Set(float64(st.CurrentEpoch))
	} else if st.CurrentEpoch > 0 {
		currentEpoch.WithLabelValues(ns, ns, name).Set(float64(st.CurrentEpoch))
	}
	if m := st.Metrics; m != nil {
		if m.Loss != nil {
			trainingLoss.WithLabelValues(ns, ns, name).Set(*m.Loss)
		}
		if m.Accuracy != nil {
			trainingAccuracy.WithLabelValues(ns, ns, name).Set(*m.Accuracy)
		}
	}
}

// forgetJobMetrics removes every series of a deleted job.
func forgetJobMetrics(key types.NamespacedName) {
	jobState.DeletePartialMatch(prometheus.Labels{"namespace": key.Namespace, "name": key.Name})
	gpuUtilization.DeletePartialMatch(prometheus.Labels{"namespace": key.Namespace, "trainingjob": key.Name})
	for _, g := range []*prometheus.GaugeVec{activeWorkers, allocatedGPUs, allocatedWorkers, progressPercent, currentEpoch, trainingLoss, trainingAccuracy} {
		g.DeleteLabelValues(key.Namespace, key.Namespace, key.Name)
	}
}

// errorType is the error_type label of trainingjob_operator_errors_total:
// the API server's reason for an API error (Conflict, Forbidden, Invalid,
// Timeout, ...), Canceled or DeadlineExceeded for a context that ended, and
// Other for anything else (a network error, a webhook's answer).
func errorType(err error) string {
	switch {
	case errors.Is(err, context.Canceled):
		return "Canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "DeadlineExceeded"
	}
	if reason := apierrors.ReasonForError(err); reason != metav1.StatusReasonUnknown {
		return string(reason)
	}
	return "Other"
}
