package trainingjob

import (
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

// The gauges of the progress contract (API.md), served by rank 0.
const (
	MetricEpoch               = "training_epoch"
	MetricTotalEpochs         = "training_total_epochs"
	MetricLoss                = "training_loss"
	MetricAccuracy            = "training_accuracy"
	MetricThroughput          = "training_throughput_samples_per_second"
	MetricCheckpointEpoch     = "training_checkpoint_epoch"
	MetricCheckpointTimestamp = "training_checkpoint_timestamp_seconds"
)

// Progress is what rank 0 reported; nil fields were not served.
type Progress struct {
	Epoch               *float64
	TotalEpochs         *float64
	Loss                *float64
	Accuracy            *float64
	Throughput          *float64
	CheckpointEpoch     *float64
	CheckpointTimestamp *float64
}

// ProgressScraper reads rank 0's progress. Tests serve it from httptest.
type ProgressScraper interface {
	Scrape(ctx context.Context, url string) (Progress, error)
}

// HTTPScraper reads the Prometheus text format over HTTP.
type HTTPScraper struct {
	// Client is the HTTP client; its timeout bounds a scrape.
	Client *http.Client
}

// NewHTTPScraper returns a scraper with a short timeout: a scrape blocks a
// reconcile worker, and a slow trainer must not stall the others.
func NewHTTPScraper() *HTTPScraper {
	return &HTTPScraper{Client: &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{
		DialContext:       (&net.Dialer{Timeout: 2 * time.Second}).DialContext,
		DisableKeepAlives: true,
	}}}
}

// Scrape fetches url and parses the gauges of the progress contract.
func (s *HTTPScraper) Scrape(ctx context.Context, url string) (Progress, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return Progress{}, err
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := s.Client.Do(req)
	if err != nil {
		return Progress{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Progress{}, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return parseProgress(io.LimitReader(resp.Body, 4<<20))
}

// parseProgress reads the progress gauges from Prometheus text.
func parseProgress(r io.Reader) (Progress, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return Progress{}, fmt.Errorf("parsing Prometheus text: %w", err)
	}
	value := func(name string) *float64 {
		mf, ok := families[name]
		if !ok || len(mf.GetMetric()) == 0 {
			return nil
		}
		v := metricValue(mf.GetType(), mf.GetMetric()[0])
		if v == nil || math.IsNaN(*v) || math.IsInf(*v, 0) {
			return nil
		}
		return v
	}
	return Progress{
		Epoch:               value(MetricEpoch),
		TotalEpochs:         value(MetricTotalEpochs),
		Loss:                value(MetricLoss),
		Accuracy:            value(MetricAccuracy),
		Throughput:          value(MetricThroughput),
		CheckpointEpoch:     value(MetricCheckpointEpoch),
		CheckpointTimestamp: value(MetricCheckpointTimestamp),
	}, nil
}

// metricValue is a gauge's (or untyped or counter) value.
func metricValue(t dto.MetricType, m *dto.Metric) *float64 {
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

// ApplyProgress writes what rank 0 reported into the job status. It reports
// whether anything the user can see changed. The scrape time moves only with
// the values, so an idle trainer causes no status writes.
func ApplyProgress(job *mlv1.TrainingJob, p Progress, now time.Time) bool {
	st := &job.Status
	before := st.DeepCopy()
	if p.Epoch != nil {
		st.CurrentEpoch = int32(*p.Epoch)
	}
	if total := job.Spec.TotalEpochs(); total > 0 {
		st.TotalEpochs = total
	} else if p.TotalEpochs != nil {
		st.TotalEpochs = int32(*p.TotalEpochs)
	}
	if st.TotalEpochs > 0 {
		pct := int64(st.CurrentEpoch) * 100 / int64(st.TotalEpochs)
		pct = max(0, min(100, pct))
		st.Progress = strconv.FormatInt(pct, 10) + "%"
	}
	if p.Loss != nil || p.Accuracy != nil || p.Throughput != nil {
		m := &mlv1.TrainingMetrics{}
		if st.Metrics != nil {
			m = st.Metrics.DeepCopy()
		}
		m.Loss, m.Accuracy, m.Throughput = p.Loss, p.Accuracy, p.Throughput
		st.Metrics = m
	}
	if p.CheckpointEpoch != nil && *p.CheckpointEpoch >= 0 {
		epoch := int32(*p.CheckpointEpoch)
		if st.LastCheckpoint == nil || st.LastCheckpoint.Epoch != epoch {
			cp := &mlv1.CheckpointStatus{Epoch: epoch, Path: job.Spec.CheckpointLocation(epoch)}
			if p.CheckpointTimestamp != nil && *p.CheckpointTimestamp > 0 {
				sec, frac := math.Modf(*p.CheckpointTimestamp)
				cp.Time = &metav1.Time{Time: time.Unix(int64(sec), int64(frac*1e9)).UTC()}
			}
			st.LastCheckpoint = cp
		}
	}
	if st.StartTime != nil && st.CurrentEpoch > 0 && st.TotalEpochs > st.CurrentEpoch {
		// Extrapolate the epoch rate since the job started; restarts make this
		// pessimistic, which is the safer side.
		elapsed := now.Sub(st.StartTime.Time)
		perEpoch := elapsed / time.Duration(st.CurrentEpoch)
		eta := metav1.NewTime(now.Add(perEpoch * time.Duration(st.TotalEpochs-st.CurrentEpoch)).Truncate(time.Minute))
		st.EstimatedCompletionTime = &eta
	}
	changed := !progressEqual(before, st)
	if changed && st.Metrics != nil {
		st.Metrics.LastScrapeTime = &metav1.Time{Time: now}
	}
	return changed
}

// progressEqual compares the progress fields of two statuses.
func progressEqual(a, b *mlv1.TrainingJobStatus) bool {
	f := func(x *float64) string {
		if x == nil {
			return "-"
		}
		return strconv.FormatFloat(*x, 'g', -1, 64)
	}
	m := func(s *mlv1.TrainingJobStatus) string {
		if s.Metrics == nil {
			return ""
		}
		return f(s.Metrics.Loss) + f(s.Metrics.Accuracy) + f(s.Metrics.Throughput)
	}
	cp := func(s *mlv1.TrainingJobStatus) string {
		if s.LastCheckpoint == nil {
			return ""
		}
		return fmt.Sprint(s.LastCheckpoint.Epoch, s.LastCheckpoint.Path, s.LastCheckpoint.Time)
	}
	eta := func(s *mlv1.TrainingJobStatus) string {
		if s.EstimatedCompletionTime == nil {
			return ""
		}
		return s.EstimatedCompletionTime.UTC().String()
	}
	return a.CurrentEpoch == b.CurrentEpoch && a.TotalEpochs == b.TotalEpochs && a.Progress == b.Progress &&
		m(a) == m(b) && cp(a) == cp(b) && eta(a) == eta(b)
}

// scrapeTracker rate-limits scrapes per job: at most one per interval, and
// backing off (doubling, capped) while scrapes fail.
type scrapeTracker struct {
	mu      sync.Mutex
	entries map[types.NamespacedName]scrapeEntry
}

type scrapeEntry struct {
	next     time.Time
	failures int
}

func newScrapeTracker() *scrapeTracker {
	return &scrapeTracker{entries: map[types.NamespacedName]scrapeEntry{}}
}

// due reports whether a job may be scraped at now, and otherwise when.
func (t *scrapeTracker) due(key types.NamespacedName, now time.Time) (bool, time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.entries[key]
	if !ok || !now.Before(e.next) {
		return true, time.Time{}
	}
	return false, e.next
}

// record notes a scrape's outcome and returns when the next one is due.
func (t *scrapeTracker) record(key types.NamespacedName, now time.Time, ok bool, interval, maxBackoff time.Duration) time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.entries[key]
	if ok {
		e.failures = 0
		e.next = now.Add(interval)
	} else {
		e.failures++
		e.next = now.Add(min(backoffFor(int32(e.failures), interval, maxBackoff), maxBackoff))
	}
	t.entries[key] = e
	return e.next
}

// forget drops a job's entry.
func (t *scrapeTracker) forget(key types.NamespacedName) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.entries, key)
}
