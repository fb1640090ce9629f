// Package progress reads the progress contract rank 0 of a TrainingJob
// serves: Prometheus text gauges over HTTP (docs/user-guide.md, "The
// progress contract for trainer authors"), and computes what a report
// means for a job's status (Apply). The TrainingJob controller decides when
// to scrape and writes the status. The package imports neither
// controller-runtime's client nor client-go, so its fuzz targets' test
// binary is cheap to build with fuzzing's instrumentation
// (docs/decisions.md, "Fuzz targets live in packages without
// controller-runtime").
package progress

import (
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// The gauges of the progress contract, served by rank 0.
const (
	MetricEpoch               = "training_epoch"
	MetricTotalEpochs         = "training_total_epochs"
	MetricLoss                = "training_loss"
	MetricAccuracy            = "training_accuracy"
	MetricThroughput          = "training_throughput_samples_per_second"
	MetricCheckpointEpoch     = "training_checkpoint_epoch"
	MetricCheckpointTimestamp = "training_checkpoint_timestamp_seconds"
	MetricStepTime            = "training_step_time_seconds"
	MetricGPUUtilization      = "training_gpu_utilization_percent"
	// MetricStep is the number of training steps rank 0 has completed
	// (a counter or gauge that only grows while training moves): the
	// progress spec.failurePolicy.stallTimeout watches.
	MetricStep = "training_step"
	// MetricCheckpointStep and MetricCheckpointAttempt describe the
	// checkpoint training_checkpoint_epoch names: the step it was taken at
	// and the attempt (CHECKPOINT_ATTEMPT) whose trainer wrote it.
	MetricCheckpointStep    = "training_checkpoint_step"
	MetricCheckpointAttempt = "training_checkpoint_attempt"
)

// Report is what rank 0 reported; nil fields were not served (or were NaN
// or infinite).
type Report struct {
	Epoch               *float64
	TotalEpochs         *float64
	Loss                *float64
	Accuracy            *float64
	Throughput          *float64
	CheckpointEpoch     *float64
	CheckpointTimestamp *float64
	StepTime            *float64
	GPUUtilization      *float64
	Step                *float64
	CheckpointStep      *float64
	CheckpointAttempt   *float64
}

// Scraper reads rank 0's progress from its metrics URL. HTTPScraper is the
// implementation; tests serve canned reports.
type Scraper interface {
	Scrape(ctx context.Context, url string) (Report, error)
}

// HTTPScraper reads the Prometheus text format over HTTP.
type HTTPScraper struct {
	// Client is the HTTP client; its timeout bounds a scrape.
	Client *http.Client
}

var _ Scraper = &HTTPScraper{}

// NewHTTPScraper returns a scraper with a short timeout: a scrape blocks a
// reconcile worker, and a slow trainer must not stall the others.
func NewHTTPScraper() *HTTPScraper {
	return &HTTPScraper{Client: &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{
		DialContext:       (&net.Dialer{Timeout: 2 * time.Second}).DialContext,
		DisableKeepAlives: true,
	}}}
}

// Scrape fetches url and parses the gauges of the progress contract.
func (s *HTTPScraper) Scrape(ctx context.Context, url string) (Report, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return Report{}, err
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := s.Client.Do(req)
	if err != nil {
		return Report{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Report{}, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return Parse(io.LimitReader(resp.Body, 4<<20))
}

// Parse reads the progress gauges from Prometheus text. The text comes from
// the user's code; the Prometheus parser has panicked on some inputs, so a
// panic is turned into an error: a trainer's output must never take the
// operator down.
func Parse(r io.Reader) (p Report, err error) {
	defer func() {
		if rec := recover(); rec != nil {
			p, err = Report{}, fmt.Errorf("parsing Prometheus text: the parser failed on this input: %v", rec)
		}
	}()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return Report{}, fmt.Errorf("parsing Prometheus text: %w", err)
	}
	value := func(name string) *float64 {
		mf, ok := families[name]
		if !ok || len(mf.GetMetric()) == 0 {
			return nil
		}
		v := metricValue(mf.GetMetric()[0])
		if v == nil || math.IsNaN(*v) || math.IsInf(*v, 0) {
			return nil
		}
		return v
	}
	return Report{
		Epoch:               value(MetricEpoch),
		TotalEpochs:         value(MetricTotalEpochs),
		Loss:                value(MetricLoss),
		Accuracy:            value(MetricAccuracy),
		Throughput:          value(MetricThroughput),
		CheckpointEpoch:     value(MetricCheckpointEpoch),
		CheckpointTimestamp: value(MetricCheckpointTimestamp),
		StepTime:            value(MetricStepTime),
		GPUUtilization:      value(MetricGPUUtilization),
		Step:                value(MetricStep),
		CheckpointStep:      value(MetricCheckpointStep),
		CheckpointAttempt:   value(MetricCheckpointAttempt),
	}, nil
}

// metricValue is a gauge's (or untyped or counter) value.
func metricValue(m *dto.Metric) *float64 {
	var v float64
	switch {
	case m.GetGauge() != nil:
		v = m.GetGauge().GetValue()
	case m.GetUntyped() != nil:
		v = m.GetUntyped().GetValue()
	case m.GetCounter() != nil:
		v = m.GetCounter().GetValue()
	default:
		return nil
	}
	return &v
}
