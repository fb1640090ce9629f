package trainingjob

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

const trainerMetrics = `# HELP training_epoch Current epoch.
# TYPE training_epoch gauge
training_epoch 4
# TYPE training_total_epochs gauge
training_total_epochs 10
# TYPE training_loss gauge
training_loss 0.25
# TYPE training_accuracy gauge
training_accuracy{split="val"} 0.91
# TYPE training_throughput_samples_per_second gauge
training_throughput_samples_per_second 1234.5
# TYPE training_checkpoint_epoch gauge
training_checkpoint_epoch 3
# TYPE training_checkpoint_timestamp_seconds gauge
training_checkpoint_timestamp_seconds 1.7670000005e+09
# TYPE python_gc_objects_collected_total counter
python_gc_objects_collected_total{generation="0"} 12.0
`

func TestHTTPScraperReadsTheProgressContract(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(trainerMetrics))
	}))
	defer srv.Close()

	p, err := NewHTTPScraper().Scrape(context.Background(), srv.URL+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	for name, got := range map[string]*float64{"epoch": p.Epoch, "total": p.TotalEpochs, "loss": p.Loss,
		"accuracy": p.Accuracy, "throughput": p.Throughput, "checkpoint": p.CheckpointEpoch, "ts": p.CheckpointTimestamp} {
		if got == nil {
			t.Errorf("%s not parsed", name)
		}
	}
	if *p.Epoch != 4 || *p.Loss != 0.25 || *p.Accuracy != 0.91 || *p.CheckpointEpoch != 3 {
		t.Errorf("values: epoch %v loss %v accuracy %v checkpoint %v", *p.Epoch, *p.Loss, *p.Accuracy, *p.CheckpointEpoch)
	}

	if _, err := NewHTTPScraper().Scrape(context.Background(), srv.URL+"/nope"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("a 404 must be an error, got %v", err)
	}
}

func TestParseProgressRejectsGarbageAndToleratesMissing(t *testing.T) {
	if _, err := parseProgress(strings.NewReader("this is { not prometheus")); err == nil {
		t.Errorf("garbage parsed")
	}
	p, err := parseProgress(strings.NewReader("other_metric 1\n"))
	if err != nil || p.Epoch != nil || p.Loss != nil {
		t.Errorf("missing gauges: %+v %v", p, err)
	}
}

func TestApplyProgress(t *testing.T) {
	job := testJob(mlv1.FrameworkPyTorch) // hyperparameters.epochs = 10
	start := metav1.NewTime(t0)
	job.Status.StartTime = &start
	p, err := parseProgress(strings.NewReader(trainerMetrics))
	if err != nil {
		t.Fatal(err)
	}
	now := t0.Add(40 * time.Minute)
	if !ApplyProgress(job, p, now) {
		t.Fatal("first scrape changed nothing")
	}
	st := job.Status
	if st.CurrentEpoch != 4 || st.TotalEpochs != 10 || st.Progress != "40%" {
		t.Errorf("epoch %d/%d progress %q", st.CurrentEpoch, st.TotalEpochs, st.Progress)
	}
	if st.Metrics == nil || *st.Metrics.Loss != 0.25 || *st.Metrics.Throughput != 1234.5 || !st.Metrics.LastScrapeTime.Time.Equal(now) {
		t.Errorf("metrics %+v", st.Metrics)
	}
	if st.LastCheckpoint == nil || st.LastCheckpoint.Epoch != 3 || st.LastCheckpoint.Path != "/checkpoints/epoch-3" ||
		st.LastCheckpoint.Time == nil || st.LastCheckpoint.Time.Unix() != 1767000000 {
		t.Errorf("lastCheckpoint %+v", st.LastCheckpoint)
	}
	// 4 epochs in 40 minutes: 6 more take 60 minutes.
	if st.EstimatedCompletionTime == nil || !st.EstimatedCompletionTime.Time.Equal(t0.Add(100*time.Minute)) {
		t.Errorf("estimatedCompletionTime %v", st.EstimatedCompletionTime)
	}
	if ApplyProgress(job, p, now.Add(15*time.Second)) {
		t.Errorf("the same values must not count as a change (no status write)")
	}
	if !job.Status.Metrics.LastScrapeTime.Time.Equal(now) {
		t.Errorf("scrape time moved without a change")
	}
}

func TestApplyProgressUsesReportedTotalWithoutEpochsHyperparameter(t *testing.T) {
	job := testJob(mlv1.FrameworkPyTorch)
	delete(job.Spec.Hyperparameters, "epochs")
	p, _ := parseProgress(strings.NewReader("training_epoch 1\ntraining_total_epochs 4\n"))
	ApplyProgress(job, p, t0)
	if job.Status.TotalEpochs != 4 || job.Status.Progress != "25%" {
		t.Errorf("total %d progress %q", job.Status.TotalEpochs, job.Status.Progress)
	}
}

func TestScrapeTrackerRateLimitsAndBacksOff(t *testing.T) {
	tr := newScrapeTracker()
	key := types.NamespacedName{Namespace: "a", Name: "b"}
	if ok, _ := tr.due(key, t0); !ok {
		t.Fatal("first scrape not due")
	}
	next := tr.record(key, t0, true, 15*time.Second, 5*time.Minute)
	if !next.Equal(t0.Add(15 * time.Second)) {
		t.Errorf("next after success %s", next)
	}
	if ok, at := tr.due(key, t0.Add(10*time.Second)); ok || !at.Equal(next) {
		t.Errorf("scraped again within 15s")
	}
	now := t0.Add(15 * time.Second)
	for i, want := range []time.Duration{15 * time.Second, 30 * time.Second, 60 * time.Second} {
		if got := tr.record(key, now, false, 15*time.Second, 5*time.Minute).Sub(now); got != want {
			t.Errorf("failure %d: next in %s, want %s", i+1, got, want)
		}
	}
	tr.forget(key)
	if ok, _ := tr.due(key, now); !ok {
		t.Errorf("forgotten job not due")
	}
}

// A scrape stays pending until a status write carries it.
func TestScrapeTrackerPendingUntilWritten(t *testing.T) {
	tr := newScrapeTracker()
	key := types.NamespacedName{Namespace: "a", Name: "b"}
	if tr.unwritten(key) != nil {
		t.Fatal("pending before any scrape")
	}
	tr.written(key) // no entry: nothing to do
	tr.record(key, t0, true, 15*time.Second, 5*time.Minute)
	tr.pend(key, scrapeResult{url: "http://x/metrics", at: t0, attempt: 2})
	if res := tr.unwritten(key); res == nil || res.attempt != 2 || !res.at.Equal(t0) {
		t.Fatalf("pending scrape %+v", res)
	}
	if ok, _ := tr.due(key, t0.Add(time.Second)); ok {
		t.Error("pending a write does not make a scrape due")
	}
	tr.written(key)
	if tr.unwritten(key) != nil {
		t.Error("still pending after the write")
	}
	if ok, at := tr.due(key, t0.Add(time.Second)); ok || !at.Equal(t0.Add(15*time.Second)) {
		t.Error("the write moved the next scrape")
	}
}
