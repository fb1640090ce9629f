//go:build chaos

package chaos

import (
	"context"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

// jobWatcher reads every TrainingJob once a second and checks what must
// hold over time, not only at the end:
//
//   - status.restarts and status.disruptions never go down (a manager that
//     lost a status write, or counted from a stale cache, would);
//   - a finished job (Completed or Failed) never becomes unfinished again.
type jobWatcher struct {
	cl  client.Client
	ns  string
	bad *violations

	mu   sync.Mutex
	last map[string]mlv1.TrainingJobStatus
}

func newJobWatcher(cl client.Client, ns string, bad *violations) *jobWatcher {
	return &jobWatcher{cl: cl, ns: ns, bad: bad, last: map[string]mlv1.TrainingJobStatus{}}
}

func (w *jobWatcher) run(ctx context.Context) {
	for ctx.Err() == nil {
		list := &mlv1.TrainingJobList{}
		if err := w.cl.List(ctx, list, client.InNamespace(w.ns)); err == nil {
			w.observe(list.Items)
		}
		sleep(ctx, time.Second)
	}
}

func (w *jobWatcher) observe(jobs []mlv1.TrainingJob) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := range jobs {
		j := &jobs[i]
		st := j.Status
		if prev, ok := w.last[j.Name]; ok {
			if st.Restarts < prev.Restarts {
				w.bad.add("%s: status.restarts went from %d to %d", j.Name, prev.Restarts, st.Restarts)
			}
			if st.Disruptions < prev.Disruptions {
				w.bad.add("%s: status.disruptions went from %d to %d", j.Name, prev.Disruptions, st.Disruptions)
			}
			if prev.State.IsFinished() && st.State != prev.State {
				w.bad.add("%s: state went from %s to %q after it finished", j.Name, prev.State, st.State)
			}
		}
		w.last[j.Name] = st
	}
}

// state is the last state read for a job ("" before the first read).
func (w *jobWatcher) state(name string) mlv1.TrainingJobState {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last[name].State
}

// active is the number of jobs read so far that have not finished.
func (w *jobWatcher) active() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, st := range w.last {
		if !st.State.IsFinished() {
			n++
		}
	}
	return n
}

// countState counts the plans' jobs last read in state s.
func (w *jobWatcher) countState(plans []*plan, s mlv1.TrainingJobState) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, p := range plans {
		if w.last[p.name].State == s {
			n++
		}
	}
	return n
}
