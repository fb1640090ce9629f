package trainingjob

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/types"
)

func TestStaleReadsSkipUntilTheCacheCatchesUp(t *testing.T) {
	key := types.NamespacedName{Namespace: "ns", Name: "j"}
	other := types.NamespacedName{Namespace: "ns", Name: "k"}
	t0 := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	s := newStaleReads()
	assert.False(t, s.behind(key, "10", t0), "no write recorded")

	s.wrote(key, t0, "10", "11") // read 10, a finalizer patch made 11, the status write 12
	assert.True(t, s.behind(key, "10", t0.Add(time.Second)), "the version the pass read")
	assert.True(t, s.behind(key, "11", t0.Add(time.Second)), "the version the finalizer patch made")
	assert.False(t, s.behind(other, "10", t0), "another job")
	assert.False(t, s.behind(key, "12", t0.Add(time.Second)), "the write's own version: caught up")
	assert.False(t, s.behind(key, "10", t0.Add(time.Second)), "once caught up, the record is gone")

	s.wrote(key, t0, "20")
	assert.False(t, s.behind(key, "20", t0.Add(staleTTL)), "after the TTL the cache is believed")
	assert.False(t, s.behind(key, "20", t0), "and the record is gone")

	s.wrote(key, t0, "30")
	s.forget(key)
	assert.False(t, s.behind(key, "30", t0), "forgotten with the job")
}
