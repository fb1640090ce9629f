package trainingjob

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

// onlyCountersMoved reports whether next differs from prev only in what the
// pods' progress moves on every pod event: the worker counts, the phase,
// node and restart count of ranks already listed, the allocation, and the
// message of a Running condition whose status and reason stay. Such a
// change is batched (statusBatch); anything else is written at once.
func onlyCountersMoved(prev, next *mlv1.TrainingJobStatus) bool {
	if len(prev.WorkerStatuses) != len(next.WorkerStatuses) {
		return false
	}
	for i := range prev.WorkerStatuses {
		if prev.WorkerStatuses[i].Rank != next.WorkerStatuses[i].Rank || prev.WorkerStatuses[i].PodName != next.WorkerStatuses[i].PodName {
			return false
		}
	}
	a, b := prev.DeepCopy(), next.DeepCopy()
	for _, st := range []*mlv1.TrainingJobStatus{a, b} {
		st.Workers, st.WorkerStatuses = mlv1.WorkerCounts{}, nil
		st.AllocatedGPUs, st.AllocatedNodes = 0, 0
	}
	was, is := meta.FindStatusCondition(a.Conditions, mlv1.TrainingJobRunning), meta.FindStatusCondition(b.Conditions, mlv1.TrainingJobRunning)
	if was != nil && is != nil && was.Status == is.Status && was.Reason == is.Reason {
		is.Message = was.Message
	}
	return equality.Semantic.DeepEqual(a, b)
}

// DefaultStatusBatchPeriod is how long a counters-only status change may
// wait to be written, so that the pod events of a gang starting or
// finishing together cost one status write rather than one each. The
// Kubernetes Job controller batches its pod events the same way (1 s).
const DefaultStatusBatchPeriod = time.Second

// statusBatch remembers, per job, since when a counters-only status change
// has been waiting to be written.
type statusBatch struct {
	mu    sync.Mutex
	since map[types.NamespacedName]time.Time
}

func newStatusBatch() *statusBatch {
	return &statusBatch{since: map[types.NamespacedName]time.Time{}}
}

// due reports whether a waiting counters-only change of the job must be
// written at now; if not, at is when it must.
func (b *statusBatch) due(key types.NamespacedName, now time.Time, period time.Duration) (ok bool, at time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	since, waiting := b.since[key]
	if !waiting {
		b.since[key] = now
		since = now
	}
	at = since.Add(period)
	return !now.Before(at), at
}

// forget drops the job's waiting change: it was written, or undone.
func (b *statusBatch) forget(key types.NamespacedName) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.since, key)
}
