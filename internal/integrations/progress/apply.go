package progress

import (
	"fmt"
	"math"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

// Apply writes what rank 0 reported into the job status. It reports
// whether anything the user can see changed. The scrape time moves only with
// the values, so an idle trainer causes no status writes.
//
// The values come from the user's code and are untrusted: NaN and Inf are
// ignored, epochs are clamped to 0..MaxInt32 (and to the total once known),
// a non-positive total is ignored, and a checkpoint time before 2000 or more
// than a day after now is dropped, so no served value can make the status
// unwritable.
func Apply(job *mlv1.TrainingJob, r Report, now time.Time) bool {
	return ApplyWithBaseline(job, r, now, RateBaseline{})
}

// RateBaseline is where the current attempt's epoch rate is measured from:
// the epoch rank 0 reported at the attempt's first scrape, and when. The
// zero value measures from epoch 0 at status.startTime.
type RateBaseline struct {
	Epoch int32
	At    time.Time
}

// ApplyWithBaseline is Apply with the estimated completion extrapolated
// from the epoch rate since base, when base is set and the attempt has made
// progress since; otherwise from the rate since the job started.
func ApplyWithBaseline(job *mlv1.TrainingJob, r Report, now time.Time, base RateBaseline) bool {
	r = sanitize(r)
	st := &job.Status
	before := st.DeepCopy()
	if total := job.Spec.TotalEpochs(); total > 0 {
		st.TotalEpochs = total
	} else if r.TotalEpochs != nil && *r.TotalEpochs >= 1 {
		st.TotalEpochs = ClampEpoch(*r.TotalEpochs, 0)
	}
	if r.Epoch != nil {
		st.CurrentEpoch = ClampEpoch(*r.Epoch, st.TotalEpochs)
	}
	if st.TotalEpochs > 0 {
		pct := int64(st.CurrentEpoch) * 100 / int64(st.TotalEpochs)
		pct = max(0, min(100, pct))
		st.Progress = strconv.FormatInt(pct, 10) + "%"
	}
	if r.Loss != nil || r.Accuracy != nil || r.Throughput != nil || r.StepTime != nil {
		m := &mlv1.TrainingMetrics{}
		if st.Metrics != nil {
			m = st.Metrics.DeepCopy()
		}
		m.Loss, m.Accuracy, m.Throughput = r.Loss, r.Accuracy, r.Throughput
		m.StepTime = stepTime(r.StepTime)
		st.Metrics = m
	}
	SetGPUUtilization(st, r.GPUUtilization, mlv1.GPUUtilizationSourceTrainer)
	if r.CheckpointEpoch != nil && *r.CheckpointEpoch >= 0 {
		cp := reportedCheckpoint(job, r, now)
		if last := st.LastCheckpoint; last == nil || last.Epoch != cp.Epoch || !ptr.Equal(last.Step, cp.Step) || !ptr.Equal(last.Attempt, cp.Attempt) {
			st.LastCheckpoint = cp
		}
	}
	since, done := time.Time{}, int32(0)
	switch {
	case !base.At.IsZero() && st.CurrentEpoch > base.Epoch && now.After(base.At):
		// The current attempt's own rate: it resumed from a checkpoint, so
		// the time before its restart says nothing about its speed.
		since, done = base.At, st.CurrentEpoch-base.Epoch
	case st.StartTime != nil && st.CurrentEpoch > 0:
		since, done = st.StartTime.Time, st.CurrentEpoch
	}
	if done > 0 && st.TotalEpochs > st.CurrentEpoch {
		// Extrapolate the epoch rate. Computed in seconds, so a huge total
		// cannot overflow a Duration; an estimate past maxETA is dropped.
		elapsed := now.Sub(since).Seconds()
		remaining := elapsed / float64(done) * float64(st.TotalEpochs-st.CurrentEpoch)
		if remaining >= 0 && remaining <= maxETA.Seconds() {
			eta := metav1.NewTime(now.Add(time.Duration(remaining * float64(time.Second))).Truncate(time.Minute))
			st.EstimatedCompletionTime = &eta
		} else {
			st.EstimatedCompletionTime = nil
		}
	}
	changed := !statusEqual(before, st)
	if changed && st.Metrics != nil {
		st.Metrics.LastScrapeTime = &metav1.Time{Time: now}
	}
	return changed
}

// reportedCheckpoint is the checkpoint rank 0 reports: epoch-<N>, or, with
// training_checkpoint_step, the mid-epoch step-<S>; with the attempt that
// wrote it when reported. A trainer reports only checkpoints whose
// completion marker is written (the progress contract), so this is a
// checkpoint a later attempt may resume from.
func reportedCheckpoint(job *mlv1.TrainingJob, r Report, now time.Time) *mlv1.CheckpointStatus {
	epoch := ClampEpoch(*r.CheckpointEpoch, job.Status.TotalEpochs)
	cp := &mlv1.CheckpointStatus{Epoch: epoch, Path: job.Spec.CheckpointLocation(epoch)}
	if v := r.CheckpointStep; v != nil && *v >= 0 && *v <= maxStep {
		step := int64(*v)
		cp.Step, cp.Path = &step, job.Spec.StepCheckpointLocation(step)
	}
	if v := r.CheckpointAttempt; v != nil && *v >= 0 && *v <= math.MaxInt32 {
		attempt := int32(*v)
		cp.Attempt = &attempt
	}
	if t, ok := checkpointTime(r.CheckpointTimestamp, now); ok {
		cp.Time = &metav1.Time{Time: t}
	}
	return cp
}

// maxStep bounds a reported step: 2^53, beyond which a float64 no longer
// holds every integer.
const maxStep = 1 << 53

// maxStepTime bounds a reported step time: a day per step is already absurd.
const maxStepTime = 24 * time.Hour

// stepTime is a reported (finite) step time in seconds as a Duration, to the
// microsecond; negative and absurd values are dropped.
func stepTime(v *float64) *metav1.Duration {
	if v == nil || *v < 0 || *v > maxStepTime.Seconds() {
		return nil
	}
	return &metav1.Duration{Duration: time.Duration(*v * float64(time.Second)).Round(time.Microsecond)}
}

// SetGPUUtilization puts a (finite) GPU utilization into
// status.resources, rounded and clamped to 0..100, naming its source; nil
// leaves the status alone. The controller also calls it with DCGM's
// measurement of the whole job.
func SetGPUUtilization(st *mlv1.TrainingJobStatus, v *float64, source mlv1.GPUUtilizationSource) {
	if v == nil {
		return
	}
	pct := int32(max(0, min(100, math.Round(*v))))
	st.Resources = &mlv1.ResourceUsage{GPUUtilization: &pct, GPUUtilizationSource: source}
}

// Bounds on what a trainer may report.
var (
	// minCheckpointTime: a checkpoint time before this is a bogus clock.
	minCheckpointTime = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	// maxClockSkew: how far after the operator's clock a checkpoint time may be.
	maxClockSkew = 24 * time.Hour
	// maxETA: an estimated completion further away than this is not shown.
	maxETA = 100 * 365 * 24 * time.Hour
)

// sanitize drops NaN and Inf values, which JSON cannot carry: a status
// holding one could never be written.
func sanitize(r Report) Report {
	finite := func(v *float64) *float64 {
		if v == nil || math.IsNaN(*v) || math.IsInf(*v, 0) {
			return nil
		}
		c := *v
		return &c
	}
	return Report{Epoch: finite(r.Epoch), TotalEpochs: finite(r.TotalEpochs), Loss: finite(r.Loss),
		Accuracy: finite(r.Accuracy), Throughput: finite(r.Throughput),
		CheckpointEpoch: finite(r.CheckpointEpoch), CheckpointTimestamp: finite(r.CheckpointTimestamp),
		StepTime: finite(r.StepTime), GPUUtilization: finite(r.GPUUtilization),
		Step: finite(r.Step), CheckpointStep: finite(r.CheckpointStep), CheckpointAttempt: finite(r.CheckpointAttempt)}
}

// ClampEpoch turns a reported (finite) epoch into 0..MaxInt32, and at most
// total when total is known (> 0).
func ClampEpoch(v float64, total int32) int32 {
	limit := float64(math.MaxInt32)
	if total > 0 {
		limit = float64(total)
	}
	return int32(max(0, min(limit, math.Trunc(v))))
}

// checkpointTime is a reported checkpoint time, if it is sane: not before
// 2000 and not more than maxClockSkew after now. Anything else (including
// times past year 9999, which the API server refuses) is dropped.
func checkpointTime(ts *float64, now time.Time) (time.Time, bool) {
	if ts == nil {
		return time.Time{}, false
	}
	lo, hi := float64(minCheckpointTime.Unix()), float64(now.Add(maxClockSkew).Unix())
	if *ts < lo || *ts > hi {
		return time.Time{}, false
	}
	sec, frac := math.Modf(*ts)
	return time.Unix(int64(sec), int64(frac*1e9)).UTC(), true
}

// statusEqual compares the progress fields of two statuses.
func statusEqual(a, b *mlv1.TrainingJobStatus) bool {
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
		return f(s.Metrics.Loss) + f(s.Metrics.Accuracy) + f(s.Metrics.Throughput) + fmt.Sprint(s.Metrics.StepTime)
	}
	res := func(s *mlv1.TrainingJobStatus) string {
		if s.Resources == nil || s.Resources.GPUUtilization == nil {
			return ""
		}
		return fmt.Sprint(*s.Resources.GPUUtilization, s.Resources.GPUUtilizationSource)
	}
	cp := func(s *mlv1.TrainingJobStatus) string {
		if s.LastCheckpoint == nil {
			return ""
		}
		c := s.LastCheckpoint
		return fmt.Sprint(c.Epoch, c.Path, c.Time, ptrString(c.Step), ptrString(c.Attempt))
	}
	eta := func(s *mlv1.TrainingJobStatus) string {
		if s.EstimatedCompletionTime == nil {
			return ""
		}
		return s.EstimatedCompletionTime.UTC().String()
	}
	return a.CurrentEpoch == b.CurrentEpoch && a.TotalEpochs == b.TotalEpochs && a.Progress == b.Progress &&
		m(a) == m(b) && cp(a) == cp(b) && eta(a) == eta(b) && res(a) == res(b)
}

// ptrString prints an optional value, "-" for none.
func ptrString[T any](v *T) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprint(*v)
}
