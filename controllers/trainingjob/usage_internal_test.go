package trainingjob

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/internal/integrations/prometheus"
	"github.com/ml-operator/ml-operator/internal/integrations/prometheus/prometheustest"
)

// serveTrainer serves body as rank 0's /metrics on loopback and returns
// its port.
func serveTrainer(t *testing.T, body string) int32 {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	_, p, err := net.SplitHostPort(srv.Listener.Addr().String())
	require.NoError(t, err)
	n, err := strconv.Atoi(p)
	require.NoError(t, err)
	return int32(n)
}

// A scrape asks DCGM (a loopback Prometheus) for the job's GPUs; its answer
// wins over rank 0's gauge and names DCGM as the source. When DCGM has
// nothing for the job, rank 0's gauge is used again.
func TestScrapeTakesGPUUtilizationFromDCGMWhenPresent(t *testing.T) {
	job := testJob(mlv1.FrameworkPyTorch)
	job.Spec.Metrics.Port = serveTrainer(t, "training_gpu_utilization_percent 40\ntraining_step_time_seconds 0.25\n")
	var dcgmHas atomic.Bool
	dcgmHas.Store(true)
	prom := prometheustest.NewServer(t, func(q string) (float64, bool) {
		assert.Equal(t, prometheus.DCGMGPUUtilizationQuery("team-a", "bert-worker-[0-9]+"), q)
		return 91.6, dcgmHas.Load()
	})
	src, err := prometheus.NewHTTPSource(prom.URL, nil)
	require.NoError(t, err)
	r := NewReconciler(nil, nil, nil, Config{DCGM: src})
	rank0 := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "bert-worker-0", Labels: map[string]string{mlv1.LabelRank: "0"}},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "127.0.0.1"},
	}

	r.scrapeProgress(context.Background(), &pass{job: job, now: t0}, []*corev1.Pod{rank0})
	assert.Equal(t, &mlv1.ResourceUsage{GPUUtilization: ptr.To(int32(92)), GPUUtilizationSource: mlv1.GPUUtilizationSourceDCGM}, job.Status.Resources)
	require.NotNil(t, job.Status.Metrics)
	assert.Equal(t, 250*time.Millisecond, job.Status.Metrics.StepTime.Duration)

	dcgmHas.Store(false)
	r.scrapeProgress(context.Background(), &pass{job: job, now: t0.Add(DefaultScrapeInterval)}, []*corev1.Pod{rank0})
	assert.Equal(t, &mlv1.ResourceUsage{GPUUtilization: ptr.To(int32(40)), GPUUtilizationSource: mlv1.GPUUtilizationSourceTrainer}, job.Status.Resources)
}

// status.duration is completionTime - startTime, whole seconds, once both
// are known.
func TestRunDuration(t *testing.T) {
	start, end := metav1.NewTime(t0), metav1.NewTime(t0.Add(90*time.Minute+1500*time.Millisecond))
	assert.Nil(t, runDuration(&mlv1.TrainingJobStatus{CompletionTime: &end}), "never started")
	assert.Nil(t, runDuration(&mlv1.TrainingJobStatus{StartTime: &start}), "not finished")
	assert.Equal(t, &metav1.Duration{Duration: 90*time.Minute + time.Second}, runDuration(&mlv1.TrainingJobStatus{StartTime: &start, CompletionTime: &end}))
}

// error_type is the API server's reason, or what ended the context, or Other.
func TestErrorType(t *testing.T) {
	gr := schema.GroupResource{Resource: "pods"}
	for err, want := range map[error]string{
		apierrors.NewConflict(gr, "p", errors.New("x")):            "Conflict",
		apierrors.NewForbidden(gr, "p", errors.New("x")):           "Forbidden",
		fmt.Errorf("creating: %w", apierrors.NewNotFound(gr, "p")): "NotFound",
		apierrors.NewTimeoutError("slow", 1):                       "Timeout",
		fmt.Errorf("wait: %w", context.DeadlineExceeded):           "DeadlineExceeded",
		context.Canceled: "Canceled",
		errors.New("dial tcp: connection refused"): "Other",
	} {
		assert.Equal(t, want, errorType(err), "%v", err)
	}
}

// trainingjob_allocated_workers counts the ranks placed on a node and not
// finished; trainingjob_gpu_utilization_percent has one series per job,
// labelled with its source, replaced when the source changes, and removed
// with the job.
func TestUsageGauges(t *testing.T) {
	job := testJob(mlv1.FrameworkPyTorch)
	job.Namespace, job.Name = "usage-gauges", "u"
	job.Status.WorkerStatuses = []mlv1.WorkerStatus{
		{Rank: 0, Phase: corev1.PodRunning, Node: "n1"},
		{Rank: 1, Phase: corev1.PodPending, Node: "n2"},
		{Rank: 2, Phase: corev1.PodPending},
		{Rank: 3, Phase: corev1.PodSucceeded, Node: "n1"},
	}
	job.Status.Resources = &mlv1.ResourceUsage{GPUUtilization: ptr.To(int32(40)), GPUUtilizationSource: mlv1.GPUUtilizationSourceTrainer}
	recordJobGauges(job)
	assert.Equal(t, 2.0, testutil.ToFloat64(allocatedWorkers.WithLabelValues("usage-gauges", "usage-gauges", "u")))
	assert.Equal(t, 40.0, testutil.ToFloat64(gpuUtilization.WithLabelValues("usage-gauges", "usage-gauges", "u", "Trainer")))

	job.Status.Resources = &mlv1.ResourceUsage{GPUUtilization: ptr.To(int32(92)), GPUUtilizationSource: mlv1.GPUUtilizationSourceDCGM}
	recordJobGauges(job)
	assert.Equal(t, 92.0, testutil.ToFloat64(gpuUtilization.WithLabelValues("usage-gauges", "usage-gauges", "u", "DCGM")))
	// DeleteLabelValues reports whether the series existed.
	assert.False(t, gpuUtilization.DeleteLabelValues("usage-gauges", "usage-gauges", "u", "Trainer"), "the Trainer series was replaced")

	forgetJobMetrics(types.NamespacedName{Namespace: "usage-gauges", Name: "u"})
	assert.False(t, gpuUtilization.DeleteLabelValues("usage-gauges", "usage-gauges", "u", "DCGM"), "removed with the job")
	assert.False(t, allocatedWorkers.DeleteLabelValues("usage-gauges", "usage-gauges", "u"), "removed with the job")
}
