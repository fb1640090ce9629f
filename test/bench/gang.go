package bench

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

// GangBindRun is the time to bind one gang of Ranks pods, as a TrainingJob
// under native gang scheduling (its Workload and PodGroup) and as the same
// number of plain pods, shaped alike, created at once on the same cluster.
type GangBindRun struct {
	Ranks int `json:"ranks"`
	// NativeSeconds: the first pod of the job seen -> the last one seen
	// bound; NativeSpread: the first bind -> the last.
	NativeSeconds []float64 `json:"nativeSeconds"`
	NativeSpread  []float64 `json:"nativeSpreadSeconds"`
	// PlainSeconds and PlainSpread: the same for the plain pods.
	PlainSeconds []float64 `json:"plainSeconds"`
	PlainSpread  []float64 `json:"plainSpreadSeconds"`
}

// gangBind measures GangBindRun for each of cfg.GangRanks, Repeats times,
// alternating native and plain. The cluster must run with native gang
// scheduling (--gang native), or the job's pods would be plain pods too.
func (r *run) gangBind(ctx context.Context) ([]GangBindRun, error) {
	ns := "gangbind"
	if err := r.newNamespace(ctx, ns); err != nil {
		return nil, err
	}
	var out []GangBindRun
	for _, ranks := range r.cfg.GangRanks {
		gr := GangBindRun{Ranks: ranks}
		for rep := range r.cfg.Repeats {
			name := fmt.Sprintf("native-%d-%d", ranks, rep)
			if err := r.env.Client.Create(ctx, r.job(ns, name, ranks, nil)); err != nil {
				return nil, err
			}
			total, spread, err := r.waitBound(ctx, ns, name, ranks)
			if err != nil {
				return nil, err
			}
			job := &mlv1.TrainingJob{}
			if err := r.env.Client.Get(ctx, keyOf(ns, name), job); err != nil {
				return nil, err
			}
			if job.Status.GangPlacement != mlv1.GangPlacementNative {
				return nil, fmt.Errorf("job %s: gangPlacement %q, not Native: run the benchmark with --gang native", name, job.Status.GangPlacement)
			}
			gr.NativeSeconds, gr.NativeSpread = append(gr.NativeSeconds, total), append(gr.NativeSpread, spread)
			if err := r.cleanup(ctx, ns); err != nil {
				return nil, err
			}

			plain := fmt.Sprintf("plain-%d-%d", ranks, rep)
			if err := parallel(ctx, ranks, 64, func(i int) error {
				p := r.baselinePod(i)
				p.Name = fmt.Sprintf("%s-%d", plain, i)
				// The tracker follows pods with the operator's labels.
				p.Labels = map[string]string{mlv1.LabelManagedBy: mlv1.ManagedByValue, mlv1.LabelTrainingJob: plain,
					mlv1.LabelRestartAttempt: "0", mlv1.LabelRank: strconv.Itoa(i)}
				return r.env.Client.Create(ctx, p)
			}); err != nil {
				return nil, err
			}
			if total, spread, err = r.waitBound(ctx, ns, plain, ranks); err != nil {
				return nil, err
			}
			gr.PlainSeconds, gr.PlainSpread = append(gr.PlainSeconds, total), append(gr.PlainSpread, spread)
			if err := r.cleanup(ctx, ns); err != nil {
				return nil, err
			}
		}
		out = append(out, gr)
		r.logf("gang of %d bound: native %v s, plain %v s", ranks, gr.NativeSeconds, gr.PlainSeconds)
	}
	return out, nil
}

// waitBound waits until every pod of attempt 0 of job is bound, and returns
// the seconds from its first pod seen to its last pod bound, and from its
// first pod bound to its last.
func (r *run) waitBound(ctx context.Context, ns, job string, ranks int) (total, spread float64, err error) {
	var first, last time.Time
	if _, err := waitUntil(ctx, 5*time.Minute, fmt.Sprintf("%d pods of %s bound", ranks, job), func() bool {
		var bound int
		first, last, bound = r.tracker.GangBound(ns, job, 0)
		return bound == ranks
	}); err != nil {
		return 0, 0, err
	}
	return last.Sub(r.tracker.GangSeen(ns, job, 0)).Seconds(), last.Sub(first).Seconds(), nil
}

func keyOf(ns, name string) client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: name} }
