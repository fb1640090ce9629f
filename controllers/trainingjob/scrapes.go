package trainingjob

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/ml-operator/ml-operator/internal/integrations/progress"
)

// scrapeTracker rate-limits scrapes per job: at most one per interval, and
// backing off (doubling, capped) while scrapes fail.
type scrapeTracker struct {
	mu      sync.Mutex
	entries map[types.NamespacedName]scrapeEntry
}

type scrapeEntry struct {
	next     time.Time
	failures int
	// target is the pod the schedule (next, failures) is for: rank 0's
	// pod of the current attempt (retarget).
	target types.UID
	// The rate baseline of attempt baseAttempt, if set.
	base        progress.RateBaseline
	baseAttempt int32
	// pending is the last scrape's outcome until a status write carries it:
	// a pass whose write is lost applies it again instead of scraping
	// before the interval is up.
	pending *scrapeResult
	// stall is what the scrapes showed of rank 0's progress (stall.go).
	stall StallWatch
}

// scrapeResult is one scrape's outcome.
type scrapeResult struct {
	report progress.Report
	// dcgm is DCGM's GPU utilization for the job, when it had one.
	dcgm    *float64
	err     error
	url     string
	at      time.Time
	attempt int32
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

// retarget starts a fresh schedule when the pod to scrape is not the one
// the schedule was for: a gang restart's new rank 0 is scraped at once and
// its failures (while its trainer starts) back off from the interval, not
// from the previous attempt's. Otherwise the failures of the restart (the
// old rank 0 gone, the new one still loading its framework) doubled into
// minutes, and a short attempt could end before its progress was read.
func (t *scrapeTracker) retarget(key types.NamespacedName, target types.UID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.entries[key]
	if e.target == target {
		return
	}
	e.target, e.next, e.failures = target, time.Time{}, 0
	t.entries[key] = e
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

// baseline returns the rate baseline of a job's attempt, setting it to
// (epoch, now) at the attempt's first call.
func (t *scrapeTracker) baseline(key types.NamespacedName, attempt, epoch int32, now time.Time) progress.RateBaseline {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.entries[key]
	if e.base.At.IsZero() || e.baseAttempt != attempt {
		e.base, e.baseAttempt = progress.RateBaseline{Epoch: epoch, At: now}, attempt
		t.entries[key] = e
	}
	return e.base
}

// pend keeps a scrape's outcome until a status write carries it.
func (t *scrapeTracker) pend(key types.NamespacedName, res scrapeResult) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.entries[key]
	e.pending = &res
	t.entries[key] = e
}

// unwritten returns the last scrape's outcome if no status write has
// carried it yet, and nil otherwise.
func (t *scrapeTracker) unwritten(key types.NamespacedName) *scrapeResult {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.entries[key].pending
}

// written notes that the job's status now carries the last scrape.
func (t *scrapeTracker) written(key types.NamespacedName) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.entries[key]; ok && e.pending != nil {
		e.pending = nil
		t.entries[key] = e
	}
}

// forget drops a job's entry.
func (t *scrapeTracker) forget(key types.NamespacedName) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.entries, key)
}
