package trainingjob

import (
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// expectationTTL bounds how long a create or delete the cache has not shown
// yet is trusted. After it, the cache is believed again.
const expectationTTL = 30 * time.Second

// expectations remember the pods a pass created or deleted until the cache
// shows it, so the next pass does not repeat the write (the cache lags the
// API server by a watch event).
type expectations struct {
	mu      sync.Mutex
	creates map[types.UID]map[string]time.Time
	deletes map[types.UID]map[types.UID]time.Time
}

func newExpectations() *expectations {
	return &expectations{
		creates: map[types.UID]map[string]time.Time{},
		deletes: map[types.UID]map[types.UID]time.Time{},
	}
}

// createKey identifies a pod of an attempt: names repeat across attempts.
func createKey(name string, attempt int32) string {
	return fmt.Sprintf("%s@%d", name, attempt)
}

func (e *expectations) created(job types.UID, key string, now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.creates[job] == nil {
		e.creates[job] = map[string]time.Time{}
	}
	e.creates[job][key] = now
}

func (e *expectations) pendingCreate(job types.UID, key string, now time.Time) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	at, ok := e.creates[job][key]
	return ok && now.Sub(at) < expectationTTL
}

func (e *expectations) deleted(job, pod types.UID, now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.deletes[job] == nil {
		e.deletes[job] = map[types.UID]time.Time{}
	}
	e.deletes[job][pod] = now
}

func (e *expectations) pendingDelete(job, pod types.UID, now time.Time) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	at, ok := e.deletes[job][pod]
	return ok && now.Sub(at) < expectationTTL
}

// observe settles the expectations the cache now shows: created pods that
// appear, deleted pods that are gone or terminating.
func (e *expectations) observe(job types.UID, pods []*corev1.Pod) {
	e.mu.Lock()
	defer e.mu.Unlock()
	live := map[types.UID]bool{}
	for _, p := range pods {
		delete(e.creates[job], createKey(p.Name, attemptOf(p)))
		if p.DeletionTimestamp == nil {
			live[p.UID] = true
		}
	}
	for uid := range e.deletes[job] {
		if !live[uid] {
			delete(e.deletes[job], uid)
		}
	}
	if len(e.creates[job]) == 0 {
		delete(e.creates, job)
	}
	if len(e.deletes[job]) == 0 {
		delete(e.deletes, job)
	}
}
