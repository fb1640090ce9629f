package progress

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// progressServer serves whatever body the fuzzer sets, as rank 0 would.
type progressServer struct {
	mu   sync.Mutex
	body []byte
}

func (s *progressServer) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	_, _ = w.Write(s.body)
}

func (s *progressServer) serve(body []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.body = body
}

// FuzzProgressScrape feeds arbitrary text, as a trainer's metrics endpoint
// could serve it (rank 0 runs the user's code: its output is untrusted), to
// the operator's scrape (HTTPScraper over loopback HTTP) and Apply.
// Whatever it serves, the operator must not panic, and the status it
// computes must stay writable and sane (checkFuzzedStatus). The last two
// seeds crashed prometheus/common's text parser before Parse guarded it.
func FuzzProgressScrape(f *testing.F) {
	for _, seed := range []string{
		"",
		"training_epoch 3\ntraining_total_epochs 10\ntraining_loss 0.25\ntraining_accuracy 0.9\n",
		"# TYPE training_epoch gauge\ntraining_epoch{rank=\"0\"} 7\n# TYPE training_throughput_samples_per_second gauge\ntraining_throughput_samples_per_second 1234.5\n",
		"training_checkpoint_epoch 4\ntraining_checkpoint_timestamp_seconds 1.7e9\n",
		"training_epoch NaN\ntraining_total_epochs +Inf\n",
		"training_epoch -5\ntraining_total_epochs 10\n",
		"training_epoch 1e20\ntraining_total_epochs 3e9\n",
		"training_checkpoint_epoch 2\ntraining_checkpoint_timestamp_seconds 1e15\n",
		"# TYPE training_epoch counter\ntraining_epoch 2\n# TYPE training_loss histogram\ntraining_loss_bucket{le=\"+Inf\"} 1\n",
		"not prometheus at all {{{",
		"#0000000000000000000000000\n{}",
		"{}0",
	} {
		f.Add([]byte(seed))
	}
	srv := &progressServer{}
	ts := httptest.NewServer(srv)
	f.Cleanup(ts.Close)
	scraper := NewHTTPScraper()
	now := t0.Add(time.Hour)

	f.Fuzz(func(t *testing.T, body []byte) {
		srv.serve(body)
		p, err := scraper.Scrape(context.Background(), ts.URL)
		if err != nil {
			return // refused text: the job just gets no progress this time
		}
		job := startedJob(false)
		Apply(job, p, now)
		checkFuzzedStatus(t, job.Status, now)
	})
}
