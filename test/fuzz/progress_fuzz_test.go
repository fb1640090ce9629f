package fuzz_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/internal/integrations/progress"
	"github.com/ml-operator/ml-operator/test/testutil"
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

var percent = regexp.MustCompile(`^(100|[1-9]?[0-9])%$`)

// FuzzProgressScrape feeds arbitrary text, as a trainer's metrics endpoint
// could serve it (rank 0 runs the user's code: its output is untrusted), to
// the operator's scrape and ApplyProgress. Whatever it serves, the operator
// must not panic, and the status it computes must stay writable and sane:
// it encodes to JSON and decodes back (as the API server decodes the status
// write), progress is 0..100 %, epochs are not negative. The last two seeds
// crashed prometheus/common's text parser before progress.go guarded it.
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
	scraper := progress.NewHTTPScraper()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := start.Add(time.Hour)

	f.Fuzz(func(t *testing.T, body []byte) {
		srv.serve(body)
		p, err := scraper.Scrape(context.Background(), ts.URL)
		if err != nil {
			return // refused text: the job just gets no progress this time
		}
		job := testutil.TrainingJob("job", "ns").Obj()
		job.Status.StartTime = &metav1.Time{Time: start}
		progress.Apply(job, p, now)
		st := job.Status
		// The status write is JSON the API server decodes again.
		data, err := json.Marshal(st)
		if err != nil {
			t.Fatalf("status after this scrape cannot be encoded: %v (%+v)", err, p)
		}
		var back mlv1.TrainingJobStatus
		if err := json.Unmarshal(data, &back); err != nil {
			t.Fatalf("status after this scrape cannot be decoded by the API server: %v", err)
		}
		if st.CurrentEpoch < 0 || st.TotalEpochs < 0 {
			t.Fatalf("negative epochs: current %d, total %d", st.CurrentEpoch, st.TotalEpochs)
		}
		if st.Progress != "" && !percent.MatchString(st.Progress) {
			t.Fatalf("progress %q", st.Progress)
		}
		if cp := st.LastCheckpoint; cp != nil && cp.Epoch < 0 {
			t.Fatalf("negative checkpoint epoch %d", cp.Epoch)
		}
	})
}
