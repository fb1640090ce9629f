package localcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

// Simulated trainers: kwok runs no container, so nothing would serve the
// progress contract on rank 0. Because the whole of 127.0.0.0/8 is local and
// every simulated pod has an address in it, the local cluster serves it
// itself: for every Running rank-0 worker it listens on the pod's IP and
// metrics port and answers with gauges that advance with time, the way a
// trainer's would.

// SimMetricsAnnotation set to "off" (in a TrainingJob's
// spec.template.annotations) makes rank 0 serve nothing: the scrape is
// refused, as for a trainer that does not implement the contract.
const SimMetricsAnnotation = "sim.ml.example.com/metrics"

// SimCompleteAfterAnnotation is how long a simulated worker runs before it
// exits 0 (hack/kwok/stages.yaml); the simulated trainer spreads its epochs
// over that time.
const SimCompleteAfterAnnotation = "sim.ml.example.com/complete-after"

const (
	defaultSimDuration = 30 * time.Second
	defaultSimEpochs   = 10
	defaultMetricsPort = 8000
)

// SimulatedTrainer is what one rank 0 reports: its epochs spread evenly over
// Duration from Start, from ResumeEpoch on.
type SimulatedTrainer struct {
	Start    time.Time
	Duration time.Duration
	// Epochs is the total (HYPERPARAM_EPOCHS, 10 when unset).
	Epochs int
	// ResumeEpoch is the epoch of RESUME_FROM_CHECKPOINT (0 for a fresh start).
	ResumeEpoch int
	// CheckpointEvery is CHECKPOINT_FREQUENCY (0: the job has no checkpoints).
	CheckpointEvery int
}

// TrainerFor reads a rank-0 pod the way a trainer reads its environment.
func TrainerFor(pod *corev1.Pod) SimulatedTrainer {
	t := SimulatedTrainer{Duration: defaultSimDuration, Epochs: defaultSimEpochs}
	if pod.Status.StartTime != nil {
		t.Start = pod.Status.StartTime.Time
	}
	if d, err := time.ParseDuration(pod.Annotations[SimCompleteAfterAnnotation]); err == nil && d > 0 {
		t.Duration = d
	}
	env := map[string]string{}
	if len(pod.Spec.Containers) > 0 {
		for _, e := range pod.Spec.Containers[0].Env {
			env[e.Name] = e.Value
		}
	}
	if n, err := strconv.Atoi(env["HYPERPARAM_EPOCHS"]); err == nil && n > 0 {
		t.Epochs = n
	}
	if r := env["RESUME_FROM_CHECKPOINT"]; r != "" {
		if i := strings.LastIndex(r, "epoch-"); i >= 0 {
			if n, err := strconv.Atoi(r[i+len("epoch-"):]); err == nil && n > 0 && n < t.Epochs {
				t.ResumeEpoch = n
			}
		}
	}
	if env["CHECKPOINT_DIR"] != "" {
		if n, err := strconv.Atoi(env["CHECKPOINT_FREQUENCY"]); err == nil && n > 0 {
			t.CheckpointEvery = n
		}
	}
	return t
}

// Epoch is the last epoch finished at now.
func (t SimulatedTrainer) Epoch(now time.Time) int {
	elapsed := now.Sub(t.Start)
	if elapsed <= 0 || t.Duration <= 0 {
		return t.ResumeEpoch
	}
	if elapsed >= t.Duration {
		return t.Epochs
	}
	return t.ResumeEpoch + int(float64(t.Epochs-t.ResumeEpoch)*float64(elapsed)/float64(t.Duration))
}

// reachedAt is when epoch e finished (for the checkpoint timestamp).
func (t SimulatedTrainer) reachedAt(e int) time.Time {
	if e <= t.ResumeEpoch || t.Epochs <= t.ResumeEpoch {
		return t.Start
	}
	frac := float64(e-t.ResumeEpoch) / float64(t.Epochs-t.ResumeEpoch)
	return t.Start.Add(time.Duration(frac * float64(t.Duration)))
}

// Metrics is the Prometheus text rank 0 serves at now.
func (t SimulatedTrainer) Metrics(now time.Time) string {
	e := t.Epoch(now)
	var b strings.Builder
	gauge := func(name, help string, v float64) {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s gauge\n%s %s\n", name, help, name, name, strconv.FormatFloat(v, 'g', -1, 64))
	}
	gauge("training_epoch", "Last finished epoch (simulated).", float64(e))
	gauge("training_total_epochs", "Epochs in all (simulated).", float64(t.Epochs))
	gauge("training_loss", "Training loss (simulated).", 2/float64(1+e))
	gauge("training_accuracy", "Training accuracy (simulated).", 0.5+0.45*float64(e)/float64(t.Epochs))
	gauge("training_throughput_samples_per_second", "Samples per second (simulated).", 1000)
	if t.CheckpointEvery > 0 {
		if ck := e / t.CheckpointEvery * t.CheckpointEvery; ck > 0 {
			gauge("training_checkpoint_epoch", "Epoch of the latest checkpoint (simulated).", float64(ck))
			gauge("training_checkpoint_timestamp_seconds", "When it was written (simulated).", float64(t.reachedAt(ck).Unix()))
		}
	}
	return b.String()
}

// metricsPortOf is the container port named "metrics" (the operator names
// spec.metrics.port so), 8000 otherwise.
func metricsPortOf(pod *corev1.Pod) int32 {
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.Name == "metrics" {
				return p.ContainerPort
			}
		}
	}
	return defaultMetricsPort
}

// servesProgress says whether the simulated trainer serves this pod: a
// Running rank-0 worker with a loopback address, not switched off.
func servesProgress(pod *corev1.Pod) bool {
	return pod.DeletionTimestamp == nil &&
		pod.Status.Phase == corev1.PodRunning &&
		pod.Labels[mlv1.LabelReplicaType] != mlv1.ReplicaTypePS &&
		IsLoopback(pod.Status.PodIP) &&
		pod.Annotations[SimMetricsAnnotation] != "off"
}

// Trainers serves the progress of every Running rank 0 of the cluster.
type Trainers struct {
	c   client.Client
	log io.Writer
	now func() time.Time

	mu      sync.Mutex
	serving map[types.UID]*http.Server
	failed  map[types.UID]bool
}

// RunTrainers serves simulated progress until ctx is done, looking for
// rank-0 pods every second.
func (c *Cluster) RunTrainers(ctx context.Context, log io.Writer) *Trainers {
	t := &Trainers{c: c.Client, log: log, now: time.Now,
		serving: map[types.UID]*http.Server{}, failed: map[types.UID]bool{}}
	go func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		defer t.stopAll()
		for {
			t.sync(ctx)
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return t
}

// Serving is the number of rank-0 pods served now.
func (t *Trainers) Serving() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.serving)
}

func (t *Trainers) sync(ctx context.Context) {
	pods := &corev1.PodList{}
	if err := t.c.List(ctx, pods, client.MatchingLabels{mlv1.LabelRank: "0"}); err != nil {
		return
	}
	want := map[types.UID]*corev1.Pod{}
	for i := range pods.Items {
		if pod := &pods.Items[i]; servesProgress(pod) {
			want[pod.UID] = pod
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	// Stop first: kwok reuses a deleted pod's address for a new pod.
	for uid, srv := range t.serving {
		if want[uid] == nil {
			_ = srv.Close()
			delete(t.serving, uid)
		}
	}
	for uid := range t.failed {
		if want[uid] == nil {
			delete(t.failed, uid)
		}
	}
	for uid, pod := range want {
		if t.serving[uid] != nil || t.failed[uid] {
			continue
		}
		addr := net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(int(metricsPortOf(pod))))
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.failed[uid] = true
			fmt.Fprintf(t.log, "simulated trainer for %s/%s: %v\n", pod.Namespace, pod.Name, err)
			continue
		}
		trainer := TrainerFor(pod)
		srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/plain; version=0.0.4")
			_, _ = io.WriteString(w, trainer.Metrics(t.now()))
		})}
		go func() {
			if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				fmt.Fprintf(t.log, "simulated trainer on %s: %v\n", addr, err)
			}
		}()
		t.serving[uid] = srv
	}
}

func (t *Trainers) stopAll() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for uid, srv := range t.serving {
		_ = srv.Close()
		delete(t.serving, uid)
	}
}
