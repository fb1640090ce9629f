package trainingjob

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

// Elastic gangs (spec.elastic; docs/trainingjob.md, "Elastic gangs"). The
// size of an attempt is mlv1.TrainingJob.AttemptWorkers: numWorkers, or
// status.worldSize.current while the gang runs shrunk. Two decisions change
// it, both gang restarts counted as disruptions (status.disruptions, never
// against backoffLimit), reason Resized:
//
//   - shrinkOf: some rank of the attempt is still unschedulable a grace
//     period after its pods were created, and the ranks the scheduler did
//     place (bound to a node) are at least minWorkers: the next attempt
//     runs with that many ranks, from the latest checkpoint.
//   - growOf: the gang runs shrunk, every rank is running, and rank 0
//     reported a checkpoint this attempt wrote (a checkpoint boundary): the
//     next attempt tries numWorkers again from that checkpoint; if ranks
//     stay unschedulable, shrinkOf applies again.
//
// The operator has no cheap way to see capacity come back (no probe pod is
// kept pending), so growing is an attempt at each checkpoint boundary.

// shrinkGrace is how long an elastic attempt's ranks may stay
// unschedulable before it shrinks: mlv1.ElasticShrinkGrace, or the job's
// placement timeout when that applies and is shorter. what names it for
// the message.
func shrinkGrace(g gangState) (grace time.Duration, what string) {
	grace, what = mlv1.ElasticShrinkGrace, "elastic grace"
	if g.job.Status.GangPlacement == mlv1.GangPlacementTimeout && g.placementTimeout > 0 && g.placementTimeout < grace {
		grace, what = g.placementTimeout, "placementTimeout"
	}
	return grace, what
}

// shrinkOf decides whether an elastic job's attempt goes on with fewer
// ranks: a rank is still unschedulable (PodScheduled=False, reason
// Unschedulable) at placementStartTime + shrinkGrace, and the ranks bound
// to a node are at least minWorkers. Pods the scheduler has not tried yet
// count as neither. Before the grace ends it asks for a look again then.
// Below minWorkers it decides nothing: the job waits, or its placement
// timeout releases it, as a fixed-size job's does. Under a gang scheduler
// no rank is bound until all fit, so it never shrinks there.
func shrinkOf(g gangState) (d decision, recheck time.Time, ok bool) {
	job, st := g.job, &g.job.Status
	e := job.Spec.Elastic
	if e == nil || st.PlacementStartTime == nil {
		return decision{}, time.Time{}, false
	}
	var placed int32
	var stuck []*corev1.Pod
	for _, p := range sortedByRank(g.pods) {
		switch {
		case p.DeletionTimestamp != nil:
		case p.Spec.NodeName != "":
			placed++
		case unschedulableMessage(p) != "":
			stuck = append(stuck, p)
		}
	}
	if len(stuck) == 0 || placed < e.MinWorkers {
		return decision{}, time.Time{}, false
	}
	grace, what := shrinkGrace(g)
	at := st.PlacementStartTime.Add(grace)
	if g.now.Before(at) {
		return decision{}, at, false
	}
	names := make([]string, 0, len(stuck))
	for _, p := range stuck {
		names = append(names, describePod(p))
	}
	msg := fmt.Sprintf("%s still unschedulable %s after the gang's pods were created (%s %s): %s; "+
		"resizing the gang from %d to the %d ranks that were placed (spec.elastic.minWorkers %d) from the latest checkpoint",
		strings.Join(names, ", "), g.now.Sub(st.PlacementStartTime.Time).Round(time.Second), what, grace,
		unschedulableMessage(stuck[0]), job.AttemptWorkers(), placed, e.MinWorkers)
	return decision{kind: restartForDisruption, reason: mlv1.ReasonResized, message: msg, workers: placed}, time.Time{}, true
}

// growOf decides whether an elastic job running shrunk tries numWorkers
// again: every rank of the attempt is running and rank 0 reported a
// checkpoint this attempt wrote (checkpointOfThisAttempt), so the restart
// loses (almost) nothing.
func growOf(g gangState) (decision, bool) {
	job, st := g.job, &g.job.Status
	current, want := job.AttemptWorkers(), job.Spec.EffectiveNumWorkers()
	if job.Spec.Elastic == nil || current >= want || st.PlacementStartTime == nil {
		return decision{}, false
	}
	running := int32(0)
	for _, p := range g.pods {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			running++
		}
	}
	if running < current || !checkpointOfThisAttempt(st) {
		return decision{}, false
	}
	msg := fmt.Sprintf("rank 0 saved a checkpoint (epoch %d) since the gang shrank to %d ranks; "+
		"growing it back to %d ranks (numWorkers) from that checkpoint, and shrinking again if ranks stay unschedulable",
		st.LastCheckpoint.Epoch, current, want)
	return decision{kind: restartForDisruption, reason: mlv1.ReasonResized, message: msg, workers: want}, true
}

// checkpointOfThisAttempt reports whether status.lastCheckpoint was written
// by the current attempt: rank 0 says so (training_checkpoint_attempt), or
// its time (training_checkpoint_timestamp_seconds) is after the attempt's
// pods were created. A checkpoint that says neither never counts.
func checkpointOfThisAttempt(st *mlv1.TrainingJobStatus) bool {
	cp := st.LastCheckpoint
	switch {
	case cp == nil:
		return false
	case cp.Attempt != nil:
		return *cp.Attempt == st.Attempt()
	case cp.Time != nil && st.PlacementStartTime != nil:
		return cp.Time.After(st.PlacementStartTime.Time)
	}
	return false
}
