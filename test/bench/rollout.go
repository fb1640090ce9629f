package bench

import (
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/internal/integrations/prometheus/prometheustest"
)

// RolloutLatency is how fast a ModelDeployment's traffic moves under the
// service router (replica counts), in milliseconds: the Ready,
// non-terminating pods behind the stable Service (what its endpoints list),
// read every 20 ms.
type RolloutLatency struct {
	// SplitServed: a weight change (75/25 <-> 25/75 over 4 replicas) -> the
	// Ready pods behind the stable Service are in the new split (3:1 or
	// 1:3) and no other.
	SplitServed []float64 `json:"weightToSplitServedMs"`
	// AbortToStable: a stepped rollout's failing analysis (the moment the
	// canned Prometheus answered the canary's error rate, above the
	// threshold) -> no Ready pod of the canary is left behind the stable
	// Service, and the stable version's is.
	AbortToStable []float64 `json:"failedAnalysisToStableMs"`
	// LoadAverage is the machine's 1-minute load average at the end.
	LoadAverage float64 `json:"loadAverage1m"`
}

// CannedPrometheus answers the rollout scenario's analysis queries (the
// generic preset's) on loopback: every version serves 10 requests/s in
// 5 ms; a version named "bad" answers 20 % of them with errors, others
// none. It records when it first answered a bad version's error rate: the
// failing analysis.
type CannedPrometheus struct {
	URL string
	srv *httptest.Server

	mu       sync.Mutex
	failedAt map[string]time.Time
}

// StartCannedPrometheus starts one; Close stops it.
func StartCannedPrometheus() *CannedPrometheus {
	c := &CannedPrometheus{failedAt: map[string]time.Time{}}
	c.srv = httptest.NewServer(prometheustest.Handler(c.answer))
	c.URL = c.srv.URL
	return c
}

// Close stops the server.
func (c *CannedPrometheus) Close() { c.srv.Close() }

// podsOf finds the pod regex of a preset query, <md>-<version>-[a-z0-9]+-[a-z0-9]+
// (internal/integrations/prometheus.PodRegex), and captures <md>-<version>.
var podsOf = regexp.MustCompile(`pod=~"([a-z0-9.-]+)-\[a-z0-9\]\+-\[a-z0-9\]\+"`)

func (c *CannedPrometheus) answer(query string) (float64, bool) {
	m := podsOf.FindStringSubmatch(query)
	if m == nil {
		return 0, false
	}
	bad := strings.HasSuffix(m[1], "-bad")
	switch {
	case strings.Contains(query, `code=~"5.."`):
		if !bad {
			return 0, true
		}
		c.mu.Lock()
		if _, ok := c.failedAt[m[1]]; !ok {
			c.failedAt[m[1]] = time.Now()
		}
		c.mu.Unlock()
		return 0.2, true
	case strings.Contains(query, "http_request_duration_seconds"):
		return 5, true
	}
	return 10, true
}

// FailedAt is when the error rate of <md>-bad was first answered.
func (c *CannedPrometheus) FailedAt(md string) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.failedAt[md+"-bad"]
	return t, ok
}

// RunRollout measures RolloutLatency, samples of each, on env, whose
// manager reads prom (--prometheus-url).
func RunRollout(ctx context.Context, env *Env, prom *CannedPrometheus, samples int, log io.Writer) (*RolloutLatency, error) {
	r := &run{env: env, log: log}
	ns := "rollout"
	if err := r.newNamespace(ctx, ns); err != nil {
		return nil, err
	}
	out := &RolloutLatency{}
	if err := r.splitServed(ctx, ns, samples, out); err != nil {
		return out, fmt.Errorf("weight -> split served: %w", err)
	}
	if err := r.abortToStable(ctx, ns, samples, prom, out); err != nil {
		return out, fmt.Errorf("failed analysis -> stable: %w", err)
	}
	out.LoadAverage = loadAverage()
	return out, nil
}

// servedSplit counts, by version, the pods behind the stable Service of md
// that its endpoints would list as Ready: Ready and not terminating. The
// local cluster runs no EndpointSlice controller (its pod addresses are
// loopback, which endpoints refuse), so the pods are read directly.
func (r *run) servedSplit(ctx context.Context, ns, md string) map[string]int {
	pods := &corev1.PodList{}
	if err := r.env.Client.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{mlv1.LabelModelDeployment: md}); err != nil {
		return nil
	}
	out := map[string]int{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				out[p.Labels[mlv1.LabelModelVersion]]++
			}
		}
	}
	return out
}

// isSplit reports whether got is want exactly (versions at zero left out).
func isSplit(got, want map[string]int) bool {
	for v, n := range want {
		if got[v] != n {
			return false
		}
	}
	for v, n := range got {
		if n != want[v] {
			return false
		}
	}
	return true
}

// rolloutModelDeployment is a ModelDeployment on the service router with
// replicas min = max = replicas, judged by the generic preset.
func rolloutModelDeployment(ns, name string, replicas int32, versions ...mlv1.ModelVersion) *mlv1.ModelDeployment {
	return &mlv1.ModelDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: mlv1.ModelDeploymentSpec{
			ModelName: name,
			Framework: mlv1.ModelFrameworkCustom,
			Image:     "example.com/server:bench",
			Versions:  versions,
			Scaling:   mlv1.ScalingSpec{MinReplicas: replicas, MaxReplicas: ptr.To(replicas)},
			Traffic:   mlv1.TrafficSpec{Router: mlv1.RouterService},
			Rollout:   mlv1.RolloutSpec{Analysis: &mlv1.AnalysisSpec{Preset: mlv1.AnalysisGeneric}},
		},
	}
}

// splitServed changes two versions' weights 75/25 <-> 25/75 and times each
// change until the Ready pods behind the stable Service are 3:1 (1:3).
// Under the service router a weight is a replica count: the operator
// changes the versions' HPA bounds, the HPA controller resizes the
// Deployments (at its next sync, every 15 s by default) and kwok makes the
// new pods Ready.
func (r *run) splitServed(ctx context.Context, ns string, samples int, out *RolloutLatency) error {
	name := "roll-split"
	md := rolloutModelDeployment(ns, name, 4,
		mlv1.ModelVersion{Name: "a", Weight: ptr.To[int32](75)},
		mlv1.ModelVersion{Name: "b", Weight: ptr.To[int32](25)})
	if err := r.env.Client.Create(ctx, md); err != nil {
		return err
	}
	if _, err := waitUntil(ctx, 3*time.Minute, name+" serving 3:1", func() bool {
		return isSplit(r.servedSplit(ctx, ns, name), map[string]int{"a": 3, "b": 1})
	}); err != nil {
		return fmt.Errorf("%w (served %v)", err, r.servedSplit(ctx, ns, name))
	}
	for i := range samples {
		a, want := int32(25), map[string]int{"a": 1, "b": 3}
		if i%2 == 1 {
			a, want = 75, map[string]int{"a": 3, "b": 1}
		}
		start, err := r.setWeights(ctx, md, a)
		if err != nil {
			return err
		}
		at, err := waitUntil(ctx, 2*time.Minute, fmt.Sprintf("%s serving %v", name, want), func() bool {
			return isSplit(r.servedSplit(ctx, ns, name), want)
		})
		if err != nil {
			return fmt.Errorf("%w (served %v)", err, r.servedSplit(ctx, ns, name))
		}
		out.SplitServed = append(out.SplitServed, ms(at.Sub(start)))
	}
	r.logf("rollout: %d weight changes served", samples)
	return r.env.Client.Delete(ctx, md)
}

// abortToStable runs samples stepped rollouts, one replica each, of a
// version named "bad" (one step, 50 %, analysed 1 s after its weight
// reached a Ready pod) that the canned Prometheus fails, and times each from
// the failing answer to the stable Service back on the stable version
// alone.
func (r *run) abortToStable(ctx context.Context, ns string, samples int, prom *CannedPrometheus, out *RolloutLatency) error {
	for i := range samples {
		name := fmt.Sprintf("roll-abort-%d", i)
		md := rolloutModelDeployment(ns, name, 1, mlv1.ModelVersion{Name: "good"})
		md.Spec.Rollout.Analysis.Interval = "1s"
		md.Spec.Rollout.Steps = []mlv1.RolloutStep{{Weight: 50, Analysis: &mlv1.StepAnalysis{Checks: 1}}}
		if err := r.env.Client.Create(ctx, md); err != nil {
			return err
		}
		stable := map[string]int{"good": 1}
		cur := &mlv1.ModelDeployment{}
		// good serves, and is the promoted set the rollout starts from.
		if _, err := waitUntil(ctx, 3*time.Minute, name+" serving good, promoted", func() bool {
			if r.env.Client.Get(ctx, client.ObjectKeyFromObject(md), cur) != nil {
				return false
			}
			h := cur.Status.History
			return len(h) > 0 && h[0].Generation == cur.Generation && h[0].Outcome == mlv1.OutcomeSucceeded &&
				isSplit(r.servedSplit(ctx, ns, name), stable)
		}); err != nil {
			return fmt.Errorf("%w (served %v)", err, r.servedSplit(ctx, ns, name))
		}
		base := cur.DeepCopy()
		cur.Spec.Versions = []mlv1.ModelVersion{{Name: "good", Weight: ptr.To[int32](0)}, {Name: "bad", Weight: ptr.To[int32](100)}}
		if err := r.env.Client.Patch(ctx, cur, client.MergeFrom(base)); err != nil {
			return err
		}
		var failed time.Time
		at, err := waitUntil(ctx, 3*time.Minute, name+" back on good after its failed analysis", func() bool {
			var ok bool
			if failed, ok = prom.FailedAt(name); !ok {
				return false
			}
			return isSplit(r.servedSplit(ctx, ns, name), stable)
		})
		if err != nil {
			return fmt.Errorf("%w (served %v)", err, r.servedSplit(ctx, ns, name))
		}
		out.AbortToStable = append(out.AbortToStable, ms(at.Sub(failed)))
		if err := r.env.Client.Delete(ctx, md); err != nil {
			return err
		}
	}
	r.logf("rollout: %d failed analyses rolled back", samples)
	return nil
}
