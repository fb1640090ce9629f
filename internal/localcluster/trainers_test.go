package localcluster

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

func rank0(env map[string]string, annotations map[string]string) *corev1.Pod {
	start := metav1.NewTime(time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC))
	c := corev1.Container{Name: "trainer", Ports: []corev1.ContainerPort{{Name: "rendezvous", ContainerPort: 29500}, {Name: "metrics", ContainerPort: 9100}}}
	for k, v := range env {
		c.Env = append(c.Env, corev1.EnvVar{Name: k, Value: v})
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "j-worker-0", Labels: map[string]string{mlv1.LabelRank: "0", mlv1.LabelReplicaType: mlv1.ReplicaTypeWorker}, Annotations: annotations},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{c}},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "127.120.0.7", StartTime: &start},
	}
}

func gauges(t *testing.T, text string) map[string]float64 {
	t.Helper()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(text))
	require.NoError(t, err, "the simulated trainer serves valid Prometheus text")
	out := map[string]float64{}
	for name, mf := range families {
		out[name] = mf.GetMetric()[0].GetGauge().GetValue()
	}
	return out
}

func TestSimulatedTrainerAdvancesOverCompleteAfter(t *testing.T) {
	pod := rank0(map[string]string{"HYPERPARAM_EPOCHS": "20", "CHECKPOINT_DIR": "/checkpoints", "CHECKPOINT_FREQUENCY": "4"},
		map[string]string{SimCompleteAfterAnnotation: "40s"})
	tr := TrainerFor(pod)
	start := pod.Status.StartTime.Time
	assert.Equal(t, SimulatedTrainer{Start: start, Duration: 40 * time.Second, Epochs: 20, CheckpointEvery: 4}, tr)

	assert.Equal(t, 0, tr.Epoch(start))
	assert.Equal(t, 5, tr.Epoch(start.Add(10*time.Second)))
	assert.Equal(t, 20, tr.Epoch(start.Add(40*time.Second)))
	assert.Equal(t, 20, tr.Epoch(start.Add(time.Hour)), "never past the total")

	g := gauges(t, tr.Metrics(start.Add(19*time.Second))) // epoch 9
	assert.Equal(t, 9.0, g["training_epoch"])
	assert.Equal(t, 20.0, g["training_total_epochs"])
	assert.Equal(t, 8.0, g["training_checkpoint_epoch"], "the last multiple of CHECKPOINT_FREQUENCY")
	assert.Equal(t, float64(start.Add(16*time.Second).Unix()), g["training_checkpoint_timestamp_seconds"])
	assert.InDelta(t, 0.2, g["training_loss"], 1e-9)
	assert.Greater(t, g["training_accuracy"], 0.5)
	assert.Less(t, g["training_accuracy"], 1.0)
}

func TestSimulatedTrainerResumesFromCheckpoint(t *testing.T) {
	pod := rank0(map[string]string{"RESUME_FROM_CHECKPOINT": "/checkpoints/epoch-6"}, nil)
	tr := TrainerFor(pod)
	start := pod.Status.StartTime.Time
	assert.Equal(t, 6, tr.ResumeEpoch)
	assert.Equal(t, 10, tr.Epochs, "10 epochs without HYPERPARAM_EPOCHS")
	assert.Equal(t, 6, tr.Epoch(start), "starts where the checkpoint left off")
	assert.Equal(t, 8, tr.Epoch(start.Add(15*time.Second)))
	g := gauges(t, tr.Metrics(start))
	assert.NotContains(t, g, "training_checkpoint_epoch", "a job without CHECKPOINT_DIR reports no checkpoint")
}

func TestSimulatedTrainerServesOnlyRunningLoopbackRank0(t *testing.T) {
	assert.True(t, servesProgress(rank0(nil, nil)))
	assert.Equal(t, int32(9100), metricsPortOf(rank0(nil, nil)))

	off := rank0(nil, map[string]string{SimMetricsAnnotation: "off"})
	assert.False(t, servesProgress(off), "switched off by annotation")

	pending := rank0(nil, nil)
	pending.Status.Phase = corev1.PodPending
	assert.False(t, servesProgress(pending))

	private := rank0(nil, nil)
	private.Status.PodIP = "10.0.0.8"
	assert.False(t, servesProgress(private), "never listens on (or for) an address outside 127.0.0.0/8")

	ps := rank0(nil, nil)
	ps.Labels[mlv1.LabelReplicaType] = mlv1.ReplicaTypePS
	assert.False(t, servesProgress(ps))
}

func TestAddressesAreLoopbackAndDisjoint(t *testing.T) {
	a := AddressesFor("/work/main/.kwok", "ml-operator")
	for _, p := range []string{a.PodCIDR.Addr().String(), a.ServiceCIDR.Addr().String(), NodeIP} {
		assert.True(t, IsLoopback(p), p)
	}
	assert.False(t, a.PodCIDR.Overlaps(a.ServiceCIDR), "pods and Services never share an address")
	assert.Equal(t, a, AddressesFor("/work/main/.kwok", "ml-operator"), "stable for a workdir")
	assert.NotEqual(t, a, AddressesFor("/tmp/e2e-123", "ml-operator-e2e"), "another cluster, other ranges")
	assert.False(t, IsLoopback("10.0.0.8"))
	assert.False(t, IsLoopback("not-an-ip"))

	cfg := a.kwokConfig(false)
	assert.Contains(t, cfg, "kind: KwokConfiguration")
	assert.Contains(t, cfg, "nodeIP: 127.0.0.1")
	assert.Contains(t, cfg, "cidr: "+a.PodCIDR.Addr().Next().String()+"/17")
	assert.Contains(t, cfg, "bindAddress: 127.0.0.1")
}
