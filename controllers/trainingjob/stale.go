package trainingjob

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// staleTTL bounds how long a job's own status write is waited for in the
// cache. After it, the cache is believed again.
const staleTTL = 30 * time.Second

// staleReads remembers, per job, the resourceVersions that this
// controller's last status write superseded, until the cache shows a
// newer one. A pass that reads one of them from the cache (a pod event
// arrived before the watch event of the write) would decide from the status
// before the write, and its own write would be refused as a conflict: it is
// skipped instead. The watch event of the write reconciles the job again
// with what the pass would have seen, and more.
type staleReads struct {
	mu   sync.Mutex
	jobs map[types.NamespacedName]superseded
}

type superseded struct {
	versions []string
	at       time.Time
}

func newStaleReads() *staleReads {
	return &staleReads{jobs: map[types.NamespacedName]superseded{}}
}

// wrote records a status write that replaced the given resourceVersions
// (the one the pass read, and the one a finalizer patch of the same pass
// produced, when it made one).
func (s *staleReads) wrote(key types.NamespacedName, now time.Time, versions ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.jobs[key] = superseded{versions: versions, at: now}
}

// behind reports whether the job read from the cache, at resourceVersion
// rv, predates the controller's last status write. A read that does not is
// the cache catching up: the record goes.
func (s *staleReads) behind(key types.NamespacedName, rv string, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	sup, ok := s.jobs[key]
	if !ok {
		return false
	}
	if now.Sub(sup.at) < staleTTL {
		for _, v := range sup.versions {
			if v == rv {
				return true
			}
		}
	}
	delete(s.jobs, key)
	return false
}

func (s *staleReads) forget(key types.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.jobs, key)
}
