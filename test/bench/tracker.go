package bench

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/internal/localcluster"
)

// podInfo is what the tracker keeps of one worker pod.
type podInfo struct {
	job     string
	rank    int
	attempt int
	phase   corev1.PodPhase
}

// Tracker follows worker pods and TrainingJobs through watches and notes
// when each change arrived, so the benchmark measures without polling the
// API server (its own requests would be counted and would load it).
type Tracker struct {
	mu   sync.Mutex
	pods map[string]map[string]podInfo // namespace -> pod name -> info
	jobs map[string]map[string]mlv1.TrainingJobState
	// failedAt is when a pod was first seen Failed (namespace/name/attempt).
	failedAt map[string]time.Time
	// gangSeen is when the first pod of an attempt was seen (namespace/job/attempt).
	gangSeen map[string]time.Time
	// boundAt is when a pod was first seen bound to a node (namespace/name/attempt).
	boundAt map[string]time.Time
	// seenAt, runningAt and goneAt are when a pod was first seen, first
	// seen Running and seen deleted (namespace/name/attempt).
	seenAt, runningAt, goneAt map[string]time.Time
	// stateAt is when a job was first seen in a state (namespace/name/state).
	stateAt map[string]time.Time
}

// StartTracker starts the watches and waits for their caches to sync.
func StartTracker(ctx context.Context, cfg *rest.Config) (*Tracker, error) {
	managed := labels.SelectorFromSet(labels.Set{mlv1.LabelManagedBy: mlv1.ManagedByValue})
	c, err := cache.New(cfg, cache.Options{
		Scheme:   localcluster.Scheme(),
		ByObject: map[client.Object]cache.ByObject{&corev1.Pod{}: {Label: managed}},
	})
	if err != nil {
		return nil, err
	}
	t := &Tracker{
		pods:     map[string]map[string]podInfo{},
		jobs:     map[string]map[string]mlv1.TrainingJobState{},
		failedAt: map[string]time.Time{},
		gangSeen: map[string]time.Time{},
		boundAt:  map[string]time.Time{},
		seenAt:   map[string]time.Time{}, runningAt: map[string]time.Time{}, goneAt: map[string]time.Time{},
		stateAt: map[string]time.Time{},
	}
	podInf, err := c.GetInformer(ctx, &corev1.Pod{})
	if err != nil {
		return nil, err
	}
	if _, err := podInf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { t.setPod(o) },
		UpdateFunc: func(_, o any) { t.setPod(o) },
		DeleteFunc: func(o any) { t.deletePod(o) },
	}); err != nil {
		return nil, err
	}
	jobInf, err := c.GetInformer(ctx, &mlv1.TrainingJob{})
	if err != nil {
		return nil, err
	}
	if _, err := jobInf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { t.setJob(o) },
		UpdateFunc: func(_, o any) { t.setJob(o) },
		DeleteFunc: func(o any) { t.deleteJob(o) },
	}); err != nil {
		return nil, err
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		return nil, fmt.Errorf("the benchmark's watches did not sync")
	}
	return t, nil
}

func (t *Tracker) setPod(o any) {
	p, ok := o.(*corev1.Pod)
	if !ok {
		return
	}
	job := p.Labels[mlv1.LabelTrainingJob]
	if job == "" {
		return
	}
	rank, _ := strconv.Atoi(p.Labels[mlv1.LabelRank])
	attempt, _ := strconv.Atoi(p.Labels[mlv1.LabelRestartAttempt])
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.pods[p.Namespace] == nil {
		t.pods[p.Namespace] = map[string]podInfo{}
	}
	t.pods[p.Namespace][p.Name] = podInfo{job: job, rank: rank, attempt: attempt, phase: p.Status.Phase}
	if gang := p.Namespace + "/" + job + "/" + strconv.Itoa(attempt); t.gangSeen[gang].IsZero() {
		t.gangSeen[gang] = time.Now()
	}
	key := p.Namespace + "/" + p.Name + "/" + strconv.Itoa(attempt)
	if _, seen := t.boundAt[key]; !seen && p.Spec.NodeName != "" {
		t.boundAt[key] = time.Now()
	}
	if _, seen := t.seenAt[key]; !seen {
		t.seenAt[key] = time.Now()
	}
	if _, seen := t.runningAt[key]; !seen && p.Status.Phase == corev1.PodRunning {
		t.runningAt[key] = time.Now()
	}
	if p.Status.Phase == corev1.PodFailed {
		if _, seen := t.failedAt[key]; !seen {
			t.failedAt[key] = time.Now()
		}
	}
}

func (t *Tracker) deletePod(o any) {
	if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
		o = d.Obj
	}
	p, ok := o.(*corev1.Pod)
	if !ok {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.pods[p.Namespace], p.Name)
	key := p.Namespace + "/" + p.Name + "/" + p.Labels[mlv1.LabelRestartAttempt]
	if _, seen := t.goneAt[key]; !seen {
		t.goneAt[key] = time.Now()
	}
}

func (t *Tracker) setJob(o any) {
	j, ok := o.(*mlv1.TrainingJob)
	if !ok {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.jobs[j.Namespace] == nil {
		t.jobs[j.Namespace] = map[string]mlv1.TrainingJobState{}
	}
	t.jobs[j.Namespace][j.Name] = j.Status.State
	key := j.Namespace + "/" + j.Name + "/" + string(j.Status.State)
	if _, seen := t.stateAt[key]; !seen {
		t.stateAt[key] = time.Now()
	}
}

func (t *Tracker) deleteJob(o any) {
	if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
		o = d.Obj
	}
	j, ok := o.(*mlv1.TrainingJob)
	if !ok {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.jobs[j.Namespace], j.Name)
}

// Pods is the number of worker pods in ns.
func (t *Tracker) Pods(ns string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.pods[ns])
}

// AllPods is the number of worker pods in every namespace.
func (t *Tracker) AllPods() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, m := range t.pods {
		n += len(m)
	}
	return n
}

// Jobs is the number of TrainingJobs in ns, and how many are in state.
func (t *Tracker) Jobs(ns string, state mlv1.TrainingJobState) (all, in int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, s := range t.jobs[ns] {
		all++
		if s == state {
			in++
		}
	}
	return all, in
}

// JobState is a job's last seen state.
func (t *Tracker) JobState(ns, name string) mlv1.TrainingJobState {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.jobs[ns][name]
}

// GangPods counts the pods of job's attempt: how many exist and how many are
// Running. ranks is how many distinct ranks exist.
func (t *Tracker) GangPods(ns, job string, attempt int) (exist, running int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, p := range t.pods[ns] {
		if p.job != job || p.attempt != attempt {
			continue
		}
		exist++
		if p.phase == corev1.PodRunning {
			running++
		}
	}
	return exist, running
}

// JobPods counts all pods of job, any attempt, and the highest attempt seen.
func (t *Tracker) JobPods(ns, job string) (n, maxAttempt int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	maxAttempt = -1
	for _, p := range t.pods[ns] {
		if p.job == job {
			n++
			maxAttempt = max(maxAttempt, p.attempt)
		}
	}
	return n, maxAttempt
}

// FailedAt is when pod name of attempt was first seen Failed.
func (t *Tracker) FailedAt(ns, name string, attempt int) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	at, ok := t.failedAt[ns+"/"+name+"/"+strconv.Itoa(attempt)]
	return at, ok
}

// GangSeen is when the first pod of job's attempt was seen.
func (t *Tracker) GangSeen(ns, job string, attempt int) time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.gangSeen[ns+"/"+job+"/"+strconv.Itoa(attempt)]
}

// waitUntil checks cond every 20 ms (in memory) until it holds, and returns
// the time it was first seen to hold.
func waitUntil(ctx context.Context, timeout time.Duration, what string, cond func() bool) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if cond() {
			return time.Now(), nil
		}
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-tick.C:
		}
	}
}

// retrying calls a request that may be repeated (a delete of a
// collection, a create that treats AlreadyExists as done) up to 5 times,
// 2 s apart, until it succeeds: on a loaded machine the API server may drop
// one (a stream reset, a timeout), and a lost request must not end a run.
func retrying(ctx context.Context, f func() error) error {
	var err error
	for range 5 {
		if err = f(); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(2 * time.Second):
		}
	}
	return err
}

// GangBound reports when the first and the last pod of an attempt were
// seen bound to a node, and how many are bound.
func (t *Tracker) GangBound(ns, job string, attempt int) (first, last time.Time, bound int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for name, p := range t.pods[ns] {
		if p.job != job || p.attempt != attempt {
			continue
		}
		at, ok := t.boundAt[ns+"/"+name+"/"+strconv.Itoa(attempt)]
		if !ok {
			continue
		}
		bound++
		if first.IsZero() || at.Before(first) {
			first = at
		}
		if at.After(last) {
			last = at
		}
	}
	return first, last, bound
}

// StateAt is when job was first seen in state.
func (t *Tracker) StateAt(ns, job string, state mlv1.TrainingJobState) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	at, ok := t.stateAt[ns+"/"+job+"/"+string(state)]
	return at, ok
}

// GangTimes are when the pods of one attempt of a job of ranks ranks
// reached each step, the last of them to do so: seen (created), bound,
// Running, and deleted (zero until every one has).
type GangTimes struct {
	LastSeen, LastBound, LastRunning, LastGone time.Time
}

// Gang reports GangTimes for job's attempt, whose pods are
// <job>-worker-<rank> for rank 0..ranks-1.
func (t *Tracker) Gang(ns, job string, attempt, ranks int) GangTimes {
	t.mu.Lock()
	defer t.mu.Unlock()
	var g GangTimes
	latest := func(m map[string]time.Time, key string, into *time.Time, all *bool) {
		at, ok := m[key]
		if !ok {
			*all = false
			return
		}
		if at.After(*into) {
			*into = at
		}
	}
	seen, bound, running, gone := true, true, true, true
	for r := range ranks {
		key := ns + "/" + mlv1.WorkerPodName(job, int32(r)) + "/" + strconv.Itoa(attempt)
		latest(t.seenAt, key, &g.LastSeen, &seen)
		latest(t.boundAt, key, &g.LastBound, &bound)
		latest(t.runningAt, key, &g.LastRunning, &running)
		latest(t.goneAt, key, &g.LastGone, &gone)
	}
	for _, x := range []struct {
		all bool
		at  *time.Time
	}{{seen, &g.LastSeen}, {bound, &g.LastBound}, {running, &g.LastRunning}, {gone, &g.LastGone}} {
		if !x.all {
			*x.at = time.Time{}
		}
	}
	return g
}
