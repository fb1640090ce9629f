package progress

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

// FuzzParseAndApplyProgress: whatever rank 0 serves, parsing never panics
// and the status stays in range and writable. The seeds run with go test;
// go test -fuzz FuzzParseAndApplyProgress explores further.
func FuzzParseAndApplyProgress(f *testing.F) {
	for _, seed := range []string{
		"training_epoch 3\ntraining_total_epochs 10\ntraining_loss 0.25\n",
		"training_epoch -5\ntraining_total_epochs 10\n",
		"training_epoch 1e20\ntraining_total_epochs 3e9\n",
		"training_epoch NaN\ntraining_loss +Inf\ntraining_accuracy -Inf\n",
		"training_checkpoint_epoch 2\ntraining_checkpoint_timestamp_seconds 1e15\n",
		"training_checkpoint_epoch -1e300\ntraining_checkpoint_timestamp_seconds -1e15\n",
		"training_epoch 1\ntraining_total_epochs 2147483647\n",
	} {
		f.Add(seed, false)
		f.Add(seed, true)
	}
	now := t0.Add(time.Hour)
	f.Fuzz(func(t *testing.T, body string, specTotal bool) {
		p, err := Parse(strings.NewReader(body))
		if err != nil {
			return
		}
		job := startedJob(specTotal)
		Apply(job, p, now)
		if specTotal && job.Status.TotalEpochs != 10 {
			t.Fatalf("total %d, the spec says 10", job.Status.TotalEpochs)
		}
		checkFuzzedStatus(t, job.Status, now)
	})
}

// startedJob is testJob started at t0, with hyperparameters.epochs = 10 when
// specTotal and no epochs hyperparameter otherwise (the reported total
// counts).
func startedJob(specTotal bool) *mlv1.TrainingJob {
	job := testJob()
	if !specTotal {
		delete(job.Spec.Hyperparameters, "epochs")
	}
	start := metav1.NewTime(t0)
	job.Status.StartTime = &start
	return job
}

var percent = regexp.MustCompile(`^(100|[1-9]?[0-9])%$`)

// checkFuzzedStatus fails t unless st, computed at now by Apply from a
// fuzzed report for startedJob, is in range and writable: epochs are 0..total,
// progress is 0..100 %, the checkpoint and the estimated completion are
// within their bounds, and it encodes to JSON and decodes back (as the API
// server decodes the status write).
func checkFuzzedStatus(t *testing.T, st mlv1.TrainingJobStatus, now time.Time) {
	t.Helper()
	if st.CurrentEpoch < 0 || st.TotalEpochs < 0 || (st.TotalEpochs > 0 && st.CurrentEpoch > st.TotalEpochs) {
		t.Fatalf("epoch %d/%d", st.CurrentEpoch, st.TotalEpochs)
	}
	if st.Progress != "" && !percent.MatchString(st.Progress) {
		t.Fatalf("progress %q", st.Progress)
	}
	if cp := st.LastCheckpoint; cp != nil {
		if cp.Epoch < 0 || (st.TotalEpochs > 0 && cp.Epoch > st.TotalEpochs) {
			t.Fatalf("checkpoint epoch %d", cp.Epoch)
		}
		if cp.Time != nil && (cp.Time.Time.Before(minCheckpointTime) || cp.Time.Time.After(now.Add(maxClockSkew))) {
			t.Fatalf("checkpoint time %v", cp.Time)
		}
	}
	if eta := st.EstimatedCompletionTime; eta != nil && (eta.Time.Before(now.Add(-time.Minute)) || eta.Time.After(now.Add(maxETA))) {
		t.Fatalf("estimatedCompletionTime %v", eta)
	}
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatalf("status cannot be serialized: %v", err)
	}
	var back mlv1.TrainingJobStatus
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("status does not round-trip: %v", err)
	}
}
