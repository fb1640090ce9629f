package modeldeployment

import (
	"fmt"
	"sort"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/internal/integrations/prometheus"
)

// maxHistory is how many applied version sets status.history keeps.
const maxHistory = 10

// currentFailures keeps the rollbacks recorded at generation: a later spec
// change (a new generation) retries every version.
func currentFailures(failed []mlv1.FailedVersion, generation int64) []mlv1.FailedVersion {
	var out []mlv1.FailedVersion
	for _, f := range failed {
		if f.Generation == generation {
			out = append(out, f)
		}
	}
	return out
}

// retried reports whether version was rolled back at an older generation and
// is now being tried again.
func retried(failed []mlv1.FailedVersion, version string, generation int64) bool {
	for _, f := range failed {
		if f.Name == version && f.Generation != generation {
			return true
		}
	}
	return false
}

// analysisQueries are the queries that judge a version: the preset of
// rollout.analysis (by framework when auto), each replaced by the user's
// own query where one is given, rendered for the version's pods.
func analysisQueries(md *mlv1.ModelDeployment, version string) prometheus.Queries {
	// The preset names are an enum in the CRD schema; an unknown one (only
	// possible without the schema) has no queries and so judges nothing.
	q, _ := prometheus.PresetQueries(string(md.Spec.EffectiveAnalysisPreset()))
	if a := md.Spec.Rollout.Analysis; a != nil && a.Queries != nil {
		q = q.Override(prometheus.Queries{RequestRate: a.Queries.RequestRate, ErrorRate: a.Queries.ErrorRate, LatencyMs: a.Queries.LatencyMs})
	}
	return q.Render(md.Namespace, prometheus.PodRegex(md.Name, version), md.Spec.EffectiveAnalysisWindow())
}

// metricFailure judges a version's serving metrics against the rollout
// limits. A version with no traffic cannot fail on them.
func metricFailure(m prometheus.VersionMetrics, maxErrorRate float64, maxLatencyMs *int32) (reason, message string) {
	if m.RequestsPerSecond <= 0 {
		return "", ""
	}
	if m.HasErrorRate && m.ErrorRate > maxErrorRate {
		return mlv1.ReasonErrorRate, fmt.Sprintf("error rate %.4f is above rollout.maxErrorRate %.4f", m.ErrorRate, maxErrorRate)
	}
	if maxLatencyMs != nil && m.HasLatency && m.AverageLatencyMs > float64(*maxLatencyMs) {
		return mlv1.ReasonLatency, fmt.Sprintf("average latency %.1fms is above rollout.maxLatencyMs %d", m.AverageLatencyMs, *maxLatencyMs)
	}
	return "", ""
}

// rollbackTarget is the last healthy version: the heaviest version of the
// newest Succeeded history entry that is still in the spec, Ready and not
// failing. When no such entry helps, the heaviest Ready, non-failing version
// by requested weight. Empty when there is nowhere to roll back to.
func rollbackTarget(history []mlv1.HistoryEntry, requested []versionWeight, ready, failing map[string]bool) string {
	inSpec := map[string]bool{}
	for _, w := range requested {
		inSpec[w.name] = true
	}
	usable := func(name string) bool { return inSpec[name] && ready[name] && !failing[name] }
	for _, h := range history {
		if h.Outcome != mlv1.OutcomeSucceeded {
			continue
		}
		vs := append([]mlv1.VersionRecord(nil), h.Versions...)
		sort.SliceStable(vs, func(i, j int) bool { return vs[i].Weight > vs[j].Weight })
		for _, v := range vs {
			if v.Weight > 0 && usable(v.Name) {
				return v.Name
			}
		}
	}
	best := ""
	var bestWeight int32 = -1
	for _, w := range requested {
		if usable(w.name) && w.weight > bestWeight {
			best, bestWeight = w.name, w.weight
		}
	}
	return best
}

// versionRecords is the version set the spec asks for.
func versionRecords(md *mlv1.ModelDeployment) []mlv1.VersionRecord {
	weights := md.Spec.RequestedWeights()
	out := make([]mlv1.VersionRecord, 0, len(md.Spec.Versions))
	for _, v := range md.Spec.Versions {
		out = append(out, mlv1.VersionRecord{
			Name: v.Name, Weight: weights[v.Name], Image: md.Spec.VersionImage(v), ModelPath: v.ModelPath,
		})
	}
	return out
}

// sameVersionSet compares two version sets, order included.
func sameVersionSet(a, b []mlv1.VersionRecord) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// recordHistory puts the applied version set at the head of history when it
// differs from the newest entry (the previous entry, if still progressing,
// is superseded) and keeps the last maxHistory entries.
func recordHistory(history []mlv1.HistoryEntry, generation int64, set []mlv1.VersionRecord, now time.Time) []mlv1.HistoryEntry {
	if len(history) > 0 && sameVersionSet(history[0].Versions, set) {
		out := make([]mlv1.HistoryEntry, len(history))
		for i := range history {
			history[i].DeepCopyInto(&out[i])
		}
		return out
	}
	out := make([]mlv1.HistoryEntry, 0, maxHistory)
	out = append(out, mlv1.HistoryEntry{Generation: generation, Versions: set, Time: metav1.NewTime(now), Outcome: mlv1.OutcomeProgressing})
	for i, h := range history {
		if len(out) == maxHistory {
			break
		}
		if i == 0 && h.Outcome == mlv1.OutcomeProgressing {
			h.Outcome = mlv1.OutcomeSuperseded
		}
		out = append(out, h)
	}
	return out
}

// historyOutcome is the newest entry's outcome: RolledBack once any version
// of the generation was rolled back, Succeeded once every version that should
// take traffic has completed its rollout, else unchanged.
func historyOutcome(current string, rolledBack, allRolledOut bool) string {
	switch {
	case rolledBack:
		return mlv1.OutcomeRolledBack
	case current == mlv1.OutcomeProgressing && allRolledOut:
		return mlv1.OutcomeSucceeded
	default:
		return current
	}
}
