package trainingjob_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/test/testutil"
)

// gauge reads one series of the manager's registry: the value of the
// series of name whose labels include want; ok is false when none has.
func gauge(t *testing.T, name string, want map[string]string) (float64, bool) {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if got[k] != v {
					continue series
				}
			}
			return m.GetGauge().GetValue(), true
		}
	}
	return 0, false
}

// Seed 000's status and metrics: rank 0's step time and GPU utilization
// gauges become status.metrics.stepTime and status.resources (source
// Trainer) and trainingjob_gpu_utilization_percent{source="Trainer"};
// trainingjob_allocated_workers counts the ranks bound to a node; a
// finished job has status.duration.
func TestSeed000UsageStatusAndMetrics(t *testing.T) {
	ns := testutil.Namespace(t, env.Client)
	ts := newTrainerServer(t, "training_epoch 2\ntraining_step_time_seconds 0.42\ntraining_gpu_utilization_percent 73.4\n")
	w := testutil.TrainingJob("usage", ns).Workers(2).GPUs(0).Hyperparameter("epochs", 4)
	w.Spec.Metrics.Port = ts.port(t)
	job := create(t, w)
	waitPods(t, job, 2, 0)
	labels := map[string]string{"namespace": ns, "trainingjob": "usage"}
	v, _ := gauge(t, "trainingjob_allocated_workers", labels)
	assert.Zero(t, v, "no rank is bound yet")

	_, err := testutil.ReadyNode(ctx, env.Client, ns+"-node", nil)
	require.NoError(t, err)
	require.NoError(t, testutil.BindPod(ctx, env.Client, ns, mlv1.WorkerPodName("usage", 0), ns+"-node"))
	require.NoError(t, testutil.BindPod(ctx, env.Client, ns, mlv1.WorkerPodName("usage", 1), ns+"-node"))
	setAll(t, job, 2, corev1.PodRunning, testutil.WithPodIP("127.0.0.1"))
	j := waitJob(t, job, "GPU utilization", func(j *mlv1.TrainingJob) bool { return j.Status.Resources != nil })
	assert.Equal(t, mlv1.ResourceUsage{GPUUtilization: ptrTo(int32(73)), GPUUtilizationSource: mlv1.GPUUtilizationSourceTrainer}, *j.Status.Resources)
	require.NotNil(t, j.Status.Metrics)
	require.NotNil(t, j.Status.Metrics.StepTime)
	assert.Equal(t, 420*time.Millisecond, j.Status.Metrics.StepTime.Duration)
	assert.Nil(t, j.Status.Duration, "no duration while it runs")

	testutil.Eventually(t, func() bool {
		v, ok := gauge(t, "trainingjob_gpu_utilization_percent", map[string]string{"namespace": ns, "trainingjob": "usage", "source": "Trainer"})
		return ok && v == 73
	}, "trainingjob_gpu_utilization_percent{source=Trainer} 73")
	testutil.Eventually(t, func() bool {
		v, ok := gauge(t, "trainingjob_allocated_workers", labels)
		return ok && v == 2
	}, "trainingjob_allocated_workers 2")

	step(t, job, 90*time.Second)
	setAll(t, job, 2, corev1.PodSucceeded, testutil.WithExitCode("trainer", 0, "Completed"))
	j = waitState(t, job, mlv1.StateCompleted)
	require.NotNil(t, j.Status.Duration)
	require.NotNil(t, j.Status.StartTime)
	assert.Equal(t, j.Status.CompletionTime.Sub(j.Status.StartTime.Time), j.Status.Duration.Duration,
		fmt.Sprintf("duration from %s to %s", j.Status.StartTime, j.Status.CompletionTime))
	assert.GreaterOrEqual(t, j.Status.Duration.Duration, 90*time.Second)
	testutil.Eventually(t, func() bool {
		v, ok := gauge(t, "trainingjob_allocated_workers", labels)
		return ok && v == 0
	}, "finished ranks are not allocated")
}
