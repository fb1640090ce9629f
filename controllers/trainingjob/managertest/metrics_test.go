package managertest

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/internal/manager"
	"github.com/ml-operator/ml-operator/test/testutil"
)

// scrape reads the manager's /metrics.
func scrape(t *testing.T, addr string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mf, err := p.TextToMetricFamilies(resp.Body)
	require.NoError(t, err)
	return mf
}

// value finds the sample of family name whose labels include want.
func value(mf map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	f, ok := mf[name]
	if !ok {
		return 0, false
	}
next:
	for _, m := range f.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if labels[k] != v {
				continue next
			}
		}
		switch {
		case m.GetGauge() != nil:
			return m.GetGauge().GetValue(), true
		case m.GetCounter() != nil:
			return m.GetCounter().GetValue(), true
		case m.GetHistogram() != nil:
			return float64(m.GetHistogram().GetSampleCount()), true
		}
	}
	return 0, false
}

// The real manager serves the TrainingJob metrics of API.md on /metrics, and
// drops a job's series when the job is deleted.
func TestManagerServesTrainingJobMetrics(t *testing.T) {
	env, err := testutil.StartEnv(testutil.EnvOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = env.Stop() })

	opts := manager.NewOptions()
	opts.MetricsAddr = testutil.FreeAddr(t)
	opts.MetricsSecure = false
	opts.ProbeAddr = testutil.FreeAddr(t)
	opts.LeaderElect = false
	opts.EnableWebhooks = false
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- manager.Run(ctx, env.Config, opts) }()
	t.Cleanup(func() { cancel(); <-done })

	c := env.Client
	ns := testutil.Namespace(t, c)
	job := testutil.TrainingJob("metered", ns).Workers(2).GPUs(1).RetainCheckpoints(false).Obj()
	require.NoError(t, c.Create(ctx, job))
	failing := testutil.TrainingJob("doomed", ns).GPUs(0).RestartPolicy(mlv1.RestartPolicyNever).RetainCheckpoints(false).Obj()
	require.NoError(t, c.Create(ctx, failing))

	retried := testutil.TrainingJob("retried", ns).GPUs(0).RetainCheckpoints(false).Obj()
	require.NoError(t, c.Create(ctx, retried))
	trainer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("training_epoch 3\ntraining_loss 0.4\ntraining_accuracy 0.75\n"))
	}))
	t.Cleanup(trainer.Close)
	_, portStr, _ := net.SplitHostPort(trainer.Listener.Addr().String())
	port, _ := strconv.Atoi(portStr)
	progressing := testutil.TrainingJob("progressing", ns).GPUs(0).RetainCheckpoints(false).Hyperparameter("epochs", 10).Obj()
	progressing.Spec.Metrics.Port = int32(port)
	require.NoError(t, c.Create(ctx, progressing))

	var pods corev1.PodList
	testutil.Eventually(t, func() bool {
		require.NoError(t, c.List(ctx, &pods, client.InNamespace(ns)))
		return len(pods.Items) == 5
	}, "pods created")
	require.NoError(t, testutil.SetPodPhase(ctx, c, ns, "retried-worker-0", corev1.PodFailed,
		testutil.WithExitCode("trainer", 1, "Error")))
	require.NoError(t, testutil.SetPodPhase(ctx, c, ns, "progressing-worker-0", corev1.PodRunning,
		testutil.WithPodIP("127.0.0.1")))
	for _, p := range []string{"metered-worker-0", "metered-worker-1"} {
		require.NoError(t, testutil.SetPodPhase(ctx, c, ns, p, corev1.PodRunning))
	}
	require.NoError(t, testutil.SetPodPhase(ctx, c, ns, "doomed-worker-0", corev1.PodFailed,
		testutil.WithExitCode("trainer", 1, "Error")))

	jobLabels := map[string]string{"namespace": ns, "trainingjob": "metered"}
	var mf map[string]*dto.MetricFamily
	testutil.Eventually(t, func() bool {
		mf = scrape(t, opts.MetricsAddr)
		running, _ := value(mf, "trainingjob_state", map[string]string{"namespace": ns, "name": "metered", "state": "Running"})
		failed, _ := value(mf, "trainingjob_failed_total", map[string]string{"namespace": ns, "reason": "RestartPolicyNever"})
		loss, _ := value(mf, "trainingjob_loss", map[string]string{"namespace": ns, "trainingjob": "progressing"})
		return running == 1 && failed == 1 && loss > 0
	}, "Running, Failed and progress visible in /metrics")

	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"trainingjob_created_total", map[string]string{"namespace": ns}, 4},
		{"trainingjob_restarts_total", map[string]string{"namespace": ns, "reason": "WorkerFailed"}, 1},
		{"trainingjob_progress_percent", map[string]string{"namespace": ns, "trainingjob": "progressing"}, 30},
		{"trainingjob_current_epoch", map[string]string{"namespace": ns, "trainingjob": "progressing"}, 3},
		{"trainingjob_loss", map[string]string{"namespace": ns, "trainingjob": "progressing"}, 0.4},
		{"trainingjob_accuracy", map[string]string{"namespace": ns, "trainingjob": "progressing"}, 0.75},
		{"trainingjob_state", map[string]string{"namespace": ns, "name": "metered", "state": "Initializing"}, 0},
		{"trainingjob_state", map[string]string{"namespace": ns, "name": "doomed", "state": "Failed"}, 1},
		{"trainingjob_active_workers", jobLabels, 2},
		{"trainingjob_allocated_gpus", jobLabels, 0}, // not bound to nodes
	} {
		got, ok := value(mf, tc.name, tc.labels)
		require.True(t, ok, "%s%v missing", tc.name, tc.labels)
		require.Equal(t, tc.want, got, "%s%v", tc.name, tc.labels)
	}
	for _, name := range []string{"trainingjob_pod_creation_latency_seconds", "trainingjob_operator_reconcile_duration_seconds"} {
		n, ok := value(mf, name, nil)
		require.True(t, ok && n > 0, "%s has no observations", name)
	}

	for _, p := range []string{"metered-worker-0", "metered-worker-1"} {
		require.NoError(t, testutil.SetPodPhase(ctx, c, ns, p, corev1.PodSucceeded))
	}
	testutil.Eventually(t, func() bool {
		mf = scrape(t, opts.MetricsAddr)
		n, _ := value(mf, "trainingjob_completed_total", map[string]string{"namespace": ns})
		d, _ := value(mf, "trainingjob_duration_seconds", map[string]string{"namespace": ns, "state": "Completed"})
		return n == 1 && d == 1
	}, "completed counter and duration")

	require.NoError(t, c.Delete(ctx, job))
	testutil.Eventually(t, func() bool {
		return apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(job), &mlv1.TrainingJob{}))
	}, "job deleted")
	testutil.Eventually(t, func() bool {
		mf = scrape(t, opts.MetricsAddr)
		_, stateLeft := value(mf, "trainingjob_state", map[string]string{"namespace": ns, "name": "metered"})
		_, workersLeft := value(mf, "trainingjob_active_workers", jobLabels)
		_, otherKept := value(mf, "trainingjob_state", map[string]string{"namespace": ns, "name": "doomed"})
		return !stateLeft && !workersLeft && otherKept
	}, "series of the deleted job removed")
}
