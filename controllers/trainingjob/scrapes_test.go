package trainingjob

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

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

// A new rank 0 (a gang restart's) is scraped at once, and its failures back
// off from the interval, not from where the previous pod's left off.
func TestScrapeTrackerStartsAfreshForANewRank0(t *testing.T) {
	tr := newScrapeTracker()
	key := types.NamespacedName{Namespace: "a", Name: "b"}
	tr.retarget(key, "rank0-attempt0")
	tr.record(key, t0, true, 15*time.Second, 5*time.Minute)
	now := t0.Add(15 * time.Second)
	for range 4 { // attempt 0's rank 0 went away: 15 s, 30 s, 60 s, 120 s
		tr.record(key, now, false, 15*time.Second, 5*time.Minute)
	}
	tr.retarget(key, "rank0-attempt0") // the same pod: the backoff stays
	if ok, at := tr.due(key, now.Add(time.Minute)); ok || !at.Equal(now.Add(2*time.Minute)) {
		t.Fatalf("the same pod's backoff was dropped: due %t at %s", ok, at)
	}
	tr.pend(key, scrapeResult{attempt: 0})
	tr.retarget(key, "rank0-attempt1")
	if ok, _ := tr.due(key, now.Add(time.Second)); !ok {
		t.Error("the new rank 0 is not due at once")
	}
	if got := tr.record(key, now, false, 15*time.Second, 5*time.Minute).Sub(now); got != 15*time.Second {
		t.Errorf("the new rank 0's first failure backs off %s, want 15s", got)
	}
	if tr.unwritten(key) == nil {
		t.Error("retargeting dropped the pending scrape")
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
func TestScrapeTrackerBaselinePerAttempt(t *testing.T) {
	tr := newScrapeTracker()
	key := types.NamespacedName{Namespace: "a", Name: "b"}
	if b := tr.baseline(key, 0, 3, t0); b.Epoch != 3 || !b.At.Equal(t0) {
		t.Errorf("first baseline %+v", b)
	}
	tr.record(key, t0, true, time.Second, time.Minute)
	if b := tr.baseline(key, 0, 5, t0.Add(time.Hour)); b.Epoch != 3 || !b.At.Equal(t0) {
		t.Errorf("same attempt must keep its baseline: %+v", b)
	}
	if b := tr.baseline(key, 1, 4, t0.Add(2*time.Hour)); b.Epoch != 4 || !b.At.Equal(t0.Add(2*time.Hour)) {
		t.Errorf("a new attempt starts a new baseline: %+v", b)
	}
}
