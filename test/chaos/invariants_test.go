//go:build chaos

package chaos

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

// violations collects what broke, once per distinct description.
type violations struct {
	mu   sync.Mutex
	seen map[string]bool
	list []string
}

func (v *violations) add(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.seen == nil {
		v.seen = map[string]bool{}
	}
	if v.seen[msg] {
		return
	}
	v.seen[msg] = true
	v.list = append(v.list, time.Now().UTC().Format("15:04:05.000")+" "+msg)
}

func (v *violations) all() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]string(nil), v.list...)
}

// podInfo is what the invariants need of a worker pod.
type podInfo struct {
	uid     types.UID
	job     string // namespace/name
	slot    string // replica type and rank
	attempt string
	live    bool
	phase   corev1.PodPhase
}

// podWatcher keeps the pods of every TrainingJob in one ordered view, from a
// single list+watch of the API server, and checks the pod invariants after
// every event:
//
//   - never two live pods for the same job, rank and attempt;
//   - never live pods of two attempts of one job at once.
//
// A watch delivers the events of one resource in resourceVersion order, so
// "at once" means "in the same state of that sequence", not a guess from
// timing. A pod is live until it is Succeeded or Failed or gone; a pod
// being deleted but not yet gone still counts (on a real node it may still
// run). When the watch breaks (the API server stops, the resourceVersion
// is too old) the watcher lists again and replaces its view at once; the
// events in between are not seen, and the number of such gaps is reported.
type podWatcher struct {
	cs  kubernetes.Interface
	ns  string
	bad *violations

	mu    sync.Mutex
	pods  map[types.UID]*podInfo
	uids  map[string]map[types.UID]bool // job/slot/attempt -> every pod uid seen
	maxAt map[string]string             // job -> highest attempt seen (as text)

	events, relists int
	// log is every pod event per job, for the report of a job in violation.
	log map[string][]string
}

func newPodWatcher(cs kubernetes.Interface, ns string, bad *violations) *podWatcher {
	return &podWatcher{cs: cs, ns: ns, bad: bad, pods: map[types.UID]*podInfo{},
		uids: map[string]map[types.UID]bool{}, maxAt: map[string]string{}, log: map[string][]string{}}
}

func infoOf(p *corev1.Pod) *podInfo {
	job := p.Labels[mlv1.LabelTrainingJob]
	if job == "" {
		return nil
	}
	typ := p.Labels[mlv1.LabelReplicaType]
	if typ == "" {
		typ = mlv1.ReplicaTypeWorker
	}
	return &podInfo{
		uid:     p.UID,
		job:     p.Namespace + "/" + job,
		slot:    typ + "-" + p.Labels[mlv1.LabelRank],
		attempt: p.Labels[mlv1.LabelRestartAttempt],
		live:    p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed,
		phase:   p.Status.Phase,
	}
}

// run lists and watches until ctx is done.
func (w *podWatcher) run(ctx context.Context, ready chan<- struct{}) {
	selector := mlv1.LabelTrainingJob
	first := true
	for ctx.Err() == nil {
		list, err := w.cs.CoreV1().Pods(w.ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			sleep(ctx, 500*time.Millisecond)
			continue
		}
		w.replace(list.Items)
		if first {
			close(ready)
			first = false
		} else {
			w.mu.Lock()
			w.relists++
			w.mu.Unlock()
		}
		wi, err := w.cs.CoreV1().Pods(w.ns).Watch(ctx, metav1.ListOptions{
			LabelSelector: selector, ResourceVersion: list.ResourceVersion, AllowWatchBookmarks: true,
		})
		if err != nil {
			sleep(ctx, 500*time.Millisecond)
			continue
		}
		w.consume(wi)
		wi.Stop()
	}
}

func (w *podWatcher) consume(wi watch.Interface) {
	for ev := range wi.ResultChan() {
		switch ev.Type {
		case watch.Added, watch.Modified, watch.Deleted:
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			w.apply(p, ev.Type == watch.Deleted)
		case watch.Error:
			return
		}
	}
}

func (w *podWatcher) replace(pods []corev1.Pod) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pods = map[types.UID]*podInfo{}
	jobs := map[string]bool{}
	for i := range pods {
		if info := infoOf(&pods[i]); info != nil {
			w.record(info)
			w.pods[info.uid] = info
			jobs[info.job] = true
		}
	}
	for job := range jobs {
		w.check(job)
	}
}

func (w *podWatcher) apply(p *corev1.Pod, deleted bool) {
	info := infoOf(p)
	if info == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.events++
	what := string(info.phase)
	if p.DeletionTimestamp != nil {
		what += " deleting"
		if g := p.DeletionGracePeriodSeconds; g != nil {
			what += fmt.Sprintf(" (grace %ds)", *g)
		}
	}
	if deleted {
		what = "DELETED"
	}
	w.log[info.job] = append(w.log[info.job], fmt.Sprintf("%s rv %s %s attempt %s uid %s: %s",
		time.Now().UTC().Format("15:04:05.000"), p.ResourceVersion, p.Name, info.attempt, shortUID(info.uid), what))
	if deleted {
		delete(w.pods, info.uid)
		return
	}
	w.record(info)
	w.pods[info.uid] = info
	w.check(info.job)
}

func (w *podWatcher) record(info *podInfo) {
	key := info.job + "/" + info.slot + "/" + info.attempt
	if w.uids[key] == nil {
		w.uids[key] = map[types.UID]bool{}
	}
	w.uids[key][info.uid] = true
	if len(info.attempt) > len(w.maxAt[info.job]) ||
		(len(info.attempt) == len(w.maxAt[info.job]) && info.attempt > w.maxAt[info.job]) {
		w.maxAt[info.job] = info.attempt
	}
}

// check applies the pod invariants to one job's live pods.
func (w *podWatcher) check(job string) {
	perSlot := map[string][]string{}
	attempts := map[string][]string{}
	for _, p := range w.pods {
		if p.job != job || !p.live {
			continue
		}
		desc := fmt.Sprintf("%s(uid %s, %s)", p.slot, shortUID(p.uid), p.phase)
		perSlot[p.slot+" attempt "+p.attempt] = append(perSlot[p.slot+" attempt "+p.attempt], desc)
		attempts[p.attempt] = append(attempts[p.attempt], desc)
	}
	for slot, pods := range perSlot {
		if len(pods) > 1 {
			sort.Strings(pods)
			w.bad.add("%s: %d live pods for %s: %s", job, len(pods), slot, strings.Join(pods, ", "))
		}
	}
	if len(attempts) > 1 {
		var parts []string
		for a, pods := range attempts {
			sort.Strings(pods)
			parts = append(parts, fmt.Sprintf("attempt %s [%s]", a, strings.Join(pods, ", ")))
		}
		sort.Strings(parts)
		w.bad.add("%s: live pods of %d attempts at once: %s", job, len(attempts), strings.Join(parts, "; "))
	}
}

// recreated counts job/rank/attempt slots that had more than one pod over
// the run (one at a time): a pod of an attempt deleted and created again.
func (w *podWatcher) recreated() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for key, uids := range w.uids {
		if len(uids) > 1 {
			out = append(out, fmt.Sprintf("%s (%d pods)", key, len(uids)))
		}
	}
	sort.Strings(out)
	return out
}

// attemptsSeen is the number of attempts whose pods the watcher saw for a job.
func (w *podWatcher) attemptsSeen(job string) map[string]bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	seen := map[string]bool{}
	prefix := job + "/"
	for key := range w.uids {
		if strings.HasPrefix(key, prefix) {
			seen[key[strings.LastIndexByte(key, '/')+1:]] = true
		}
	}
	return seen
}

func (w *podWatcher) stats() (events, relists, pods int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, uids := range w.uids {
		pods += len(uids)
	}
	return w.events, w.relists, pods
}

func shortUID(u types.UID) string {
	s := string(u)
	if len(s) > 8 {
		return s[:8]
	}
	return s
}

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// history is the pod events seen for a job (namespace/name).
func (w *podWatcher) history(job string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.log[job]...)
}
