package progress_test

import (
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ml-operator/ml-operator/internal/integrations/progress"
)

// trainerMetrics is what a trainer following the contract serves, with a
// label set, a counter and other families around the gauges.
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
# TYPE training_step_time_seconds gauge
training_step_time_seconds 0.35
# TYPE training_gpu_utilization_percent gauge
training_gpu_utilization_percent 87.5
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

	p, err := progress.NewHTTPScraper().Scrape(context.Background(), srv.URL+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	for name, got := range map[string]*float64{"epoch": p.Epoch, "total": p.TotalEpochs, "loss": p.Loss,
		"accuracy": p.Accuracy, "throughput": p.Throughput, "checkpoint": p.CheckpointEpoch, "ts": p.CheckpointTimestamp,
		"step time": p.StepTime, "gpu utilization": p.GPUUtilization} {
		if got == nil {
			t.Errorf("%s not parsed", name)
		}
	}
	if *p.Epoch != 4 || *p.Loss != 0.25 || *p.Accuracy != 0.91 || *p.CheckpointEpoch != 3 {
		t.Errorf("values: epoch %v loss %v accuracy %v checkpoint %v", *p.Epoch, *p.Loss, *p.Accuracy, *p.CheckpointEpoch)
	}
	if p.StepTime != nil && p.GPUUtilization != nil && (*p.StepTime != 0.35 || *p.GPUUtilization != 87.5) {
		t.Errorf("step time %v, GPU utilization %v", *p.StepTime, *p.GPUUtilization)
	}

	if _, err := progress.NewHTTPScraper().Scrape(context.Background(), srv.URL+"/nope"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("a 404 must be an error, got %v", err)
	}
}

func TestParseRejectsGarbageAndToleratesMissing(t *testing.T) {
	if _, err := progress.Parse(strings.NewReader("this is { not prometheus")); err == nil {
		t.Errorf("garbage parsed")
	}
	p, err := progress.Parse(strings.NewReader("other_metric 1\n"))
	if err != nil || p.Epoch != nil || p.Loss != nil {
		t.Errorf("missing gauges: %+v %v", p, err)
	}
}

// Parse drops NaN and infinite values: JSON cannot carry them.
func TestParseDropsNonFiniteValues(t *testing.T) {
	p, err := progress.Parse(strings.NewReader("training_epoch NaN\ntraining_loss +Inf\ntraining_accuracy -Inf\ntraining_total_epochs 3\n"))
	if err != nil {
		t.Fatal(err)
	}
	if p.Epoch != nil || p.Loss != nil || p.Accuracy != nil || p.TotalEpochs == nil || *p.TotalEpochs != 3 {
		t.Errorf("report %+v", p)
	}
}

// parserPanicInputs make prometheus/common v0.67.5's text parser panic (nil
// pointer in startLabelName): a metric with a label set but no name.
var parserPanicInputs = []string{"{}0", "{}0\n", "{} 1\ntraining_epoch 2\n"}

// TestParseSurvivesParserPanic: the Prometheus text parser panics on some
// inputs (found by FuzzProgressScrape); the scrape returns an error.
func TestParseSurvivesParserPanic(t *testing.T) {
	for _, body := range parserPanicInputs {
		p, err := progress.Parse(strings.NewReader(body))
		if err == nil {
			t.Errorf("%q: no error (report %+v)", body, p)
		}
	}
}

// FuzzParse: whatever rank 0 serves, Parse returns (never panics), and a
// report it returns holds only finite values.
func FuzzParse(f *testing.F) {
	for _, seed := range append([]string{trainerMetrics, "training_epoch 1e400\n", "training_epoch -0\n"}, parserPanicInputs...) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body string) {
		p, err := progress.Parse(strings.NewReader(body))
		if err != nil {
			return
		}
		for _, v := range []*float64{p.Epoch, p.TotalEpochs, p.Loss, p.Accuracy, p.Throughput, p.CheckpointEpoch, p.CheckpointTimestamp, p.StepTime, p.GPUUtilization} {
			if v != nil && (math.IsNaN(*v) || math.IsInf(*v, 0)) {
				t.Fatalf("non-finite value in %+v", p)
			}
		}
	})
}
