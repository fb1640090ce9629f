package modeldeployment

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/internal/integrations/prometheus"
)

// maxAnalyses is how many analyses status.rollout.analyses keeps.
const maxAnalyses = 10

// servedSpec is md as the pass serves it: with rollout.rollbackTo, the
// named version takes all the traffic (the others stay at weight 0), and a
// version no longer in spec.versions is served again as the newest
// status.history entry recorded it. md itself when rollbackTo is unset or
// names nothing known.
func servedSpec(md *mlv1.ModelDeployment) *mlv1.ModelDeployment {
	name := md.Spec.Rollout.RollbackTo
	if name == "" {
		return md
	}
	out := md.DeepCopy()
	found := false
	for i := range out.Spec.Versions {
		w := int32(0)
		if out.Spec.Versions[i].Name == name {
			w, found = 100, true
		}
		out.Spec.Versions[i].Weight = &w
	}
	if !found {
		rec, ok := historyRecord(md.Status.History, name)
		if !ok {
			return md
		}
		w := int32(100)
		out.Spec.Versions = append(out.Spec.Versions, mlv1.ModelVersion{
			Name: rec.Name, Weight: &w, ModelPath: rec.ModelPath, ModelSecretName: rec.ModelSecretName, Image: rec.Image,
		})
	}
	return out
}

// historyRecord is the newest record of version name in history.
func historyRecord(history []mlv1.HistoryEntry, name string) (mlv1.VersionRecord, bool) {
	for _, h := range history {
		for _, v := range h.Versions {
			if v.Name == name {
				return v, true
			}
		}
	}
	return mlv1.VersionRecord{}, false
}

// rolloutSteps are the steps that govern this pass: none for a rollbackTo
// that asks to be immediate.
func rolloutSteps(md *mlv1.ModelDeployment) []mlv1.RolloutStep {
	if md.Spec.Rollout.RollbackTo != "" && md.Spec.EffectiveRollbackStrategy() == mlv1.RollbackImmediate {
		return nil
	}
	return md.Spec.Rollout.Steps
}

// stepWeights mixes two version sets for a step of weight w (percent of the
// new set): each version of target gets stable*(100-w) + target*w,
// apportioned to integers summing to 100 (all zero when both are).
func stepWeights(stable, target []versionWeight, w int32) []versionWeight {
	out := make([]versionWeight, len(target))
	raw := make([]int64, len(target))
	var total int64
	for i, t := range target {
		out[i].name = t.name
		raw[i] = int64(weightOf(stable, t.name))*int64(100-w) + int64(t.weight)*int64(w)
		total += raw[i]
	}
	if total == 0 {
		return out
	}
	return apportion(out, raw, total)
}

// canaryVersions are the versions of the new set that the rollout judges:
// those asked for traffic that the stable set gave none, or whose image,
// model or Secret changed.
func canaryVersions(stable []mlv1.VersionRecord, target []mlv1.VersionRecord) []string {
	var out []string
	for _, t := range target {
		if t.Weight == 0 {
			continue
		}
		i := slices.IndexFunc(stable, func(s mlv1.VersionRecord) bool { return s.Name == t.Name })
		if i < 0 || stable[i].Weight == 0 || stable[i].Image != t.Image || stable[i].ModelPath != t.ModelPath || stable[i].ModelSecretName != t.ModelSecretName {
			out = append(out, t.Name)
		}
	}
	return out
}

// toVersionWeights converts a history entry's records to weights.
func recordWeights(rs []mlv1.VersionRecord) []mlv1.VersionWeight {
	out := make([]mlv1.VersionWeight, 0, len(rs))
	for _, r := range rs {
		out = append(out, mlv1.VersionWeight{Name: r.Name, Weight: r.Weight})
	}
	return out
}

func fromAPIWeights(ws []mlv1.VersionWeight) []versionWeight {
	out := make([]versionWeight, 0, len(ws))
	for _, w := range ws {
		out = append(out, versionWeight{w.Name, w.Weight})
	}
	return out
}

// lastPromoted is the newest Succeeded history entry older than the head.
func lastPromoted(history []mlv1.HistoryEntry) *mlv1.HistoryEntry {
	for i := 1; i < len(history); i++ {
		if history[i].Outcome == mlv1.OutcomeSucceeded {
			return &history[i]
		}
	}
	return nil
}

// rolloutActive reports whether a stepped rollout governs the weights.
func rolloutActive(st *mlv1.RolloutStatus) bool {
	if st == nil {
		return false
	}
	switch st.Phase {
	case mlv1.RolloutProgressing, mlv1.RolloutPaused, mlv1.RolloutPromoting:
		return true
	}
	return false
}

// startRollout decides whether a stepped rollout runs in this pass and
// where it starts, from the previous status.rollout and the new history:
// the head of history (the version set spec.versions asks for) is rolled
// out from the last promoted set, through steps. prev carries over while it
// is for the same set and was not aborted at an older generation (a spec
// change retries an aborted rollout from its first step). No rollout runs
// without steps, for a set already promoted, when nothing was ever
// promoted (the first version set of a ModelDeployment applies at once), or
// when the new set has no new version to judge.
func startRollout(prev *mlv1.RolloutStatus, history []mlv1.HistoryEntry, steps []mlv1.RolloutStep, currentFailures bool) *mlv1.RolloutStatus {
	if len(steps) == 0 || len(history) == 0 {
		return nil
	}
	head := history[0]
	if prev != nil && prev.Generation == head.Generation && !(prev.Phase == mlv1.RolloutAborted && !currentFailures) {
		out := prev.DeepCopy()
		if int(out.Step) < len(steps) {
			out.StepWeight = steps[out.Step].Weight
		}
		return out
	}
	if head.Outcome == mlv1.OutcomeSucceeded {
		return prev.DeepCopy()
	}
	stable := lastPromoted(history)
	if stable == nil {
		return nil
	}
	canaries := canaryVersions(stable.Versions, head.Versions)
	if len(canaries) == 0 {
		// Nothing new to judge (a return to the promoted set, a version
		// dropped): the weights apply at once.
		return nil
	}
	return &mlv1.RolloutStatus{
		Generation: head.Generation,
		Phase:      mlv1.RolloutProgressing,
		StepWeight: steps[0].Weight,
		Stable:     recordWeights(stable.Versions),
		Canaries:   canaries,
	}
}

// planRollout sets up this pass's stepped rollout before the versions are
// evaluated: the rollout's state, the user's action from the annotation, and
// the weights the versions are asked for at the current step.
func (s *passState) planRollout() {
	md := s.md
	s.steps = rolloutSteps(md)
	s.goal = append([]versionWeight(nil), s.requested...)
	s.rollout = startRollout(md.Status.Rollout, s.history, s.steps, len(s.failed) > 0)
	action := md.Annotations[mlv1.AnnotationRollout]
	if action == mlv1.RolloutActionPromote || action == mlv1.RolloutActionAbort {
		// One-shot actions are removed once read, so they never act on a
		// later rollout.
		s.clearAction = true
	}
	st := s.rollout
	if st == nil {
		return
	}
	s.stable = fromAPIWeights(st.Stable)
	if rolloutActive(st) {
		switch action {
		case mlv1.RolloutActionAbort:
			s.abortRollout(mlv1.ReasonRolloutAborted, "aborted by annotation "+mlv1.AnnotationRollout+"="+mlv1.RolloutActionAbort)
		case mlv1.RolloutActionPromote:
			if st.Phase != mlv1.RolloutPromoting {
				s.normal(mlv1.EventRolloutStep, "Promote", "promoting at step %d by annotation %s=%s", st.Step, mlv1.AnnotationRollout, action)
			}
			st.Phase = mlv1.RolloutPromoting
		case mlv1.RolloutActionPause:
			if st.Phase == mlv1.RolloutProgressing {
				st.Phase = mlv1.RolloutPaused
				st.Message = fmt.Sprintf("paused by annotation %s=%s at step %d (%d%%)", mlv1.AnnotationRollout, action, st.Step, st.StepWeight)
			}
		default:
			if st.Phase == mlv1.RolloutPaused && !lastAnalysisFailed(st) {
				st.Phase = mlv1.RolloutProgressing
			}
		}
	}
	s.requested = s.rolloutRequested()
}

// lastAnalysisFailed reports whether the rollout's newest analysis failed
// (with autoRollback off, that holds the rollout until promote or abort).
func lastAnalysisFailed(st *mlv1.RolloutStatus) bool {
	return len(st.Analyses) > 0 && st.Analyses[0].Outcome == mlv1.AnalysisFailed && st.Analyses[0].Step == st.Step
}

// rolloutRequested are the weights the versions are asked for at the
// rollout's state: the step's mix while it runs (the last step's while
// promoting), the stable set once aborted, spec.versions once promoted.
func (s *passState) rolloutRequested() []versionWeight {
	st := s.rollout
	switch {
	case st == nil || st.Phase == mlv1.RolloutPromoted:
		return s.goal
	case st.Phase == mlv1.RolloutAborted:
		return stepWeights(s.stable, s.goal, 0)
	}
	return stepWeights(s.stable, s.goal, st.StepWeight)
}

// setRequested changes the versions' requested weights in the middle of a pass.
func (s *passState) setRequested(ws []versionWeight) {
	s.requested = ws
	for i := range s.results[:s.specVersions()] {
		s.results[i].requested = weightOf(ws, s.results[i].name)
	}
}

// isCanary reports whether version is one the rollout judges.
func (s *passState) isCanary(version string) bool {
	return rolloutActive(s.rollout) && slices.Contains(s.rollout.Canaries, version)
}

// abortRollout ends the rollout: the canaries are rolled back (with the
// reason and message) and the stable set serves again.
func (s *passState) abortRollout(reason, message string) {
	st := s.rollout
	st.Phase = mlv1.RolloutAborted
	st.Message = message
	for _, c := range st.Canaries {
		if s.failedSet[c] {
			continue
		}
		fv := mlv1.FailedVersion{Name: c, Generation: s.md.Generation, Reason: reason, Message: message, Time: s.stamp}
		s.failed = append(s.failed, fv)
		s.failedSet[c] = true
		s.rollbacks = append(s.rollbacks, fv)
		s.warning(mlv1.EventRolledBack, "Abort", "version %s rolled back (%s): %s", c, reason, message)
	}
}

// advanceRollout runs the rollout's state machine once the versions are
// evaluated: a step starts when its weight reaches Ready pods, its analyses
// run every interval, and it ends when its pause is over and its checks
// passed; then the next step's weights apply in this same pass. After the
// last step the rollout promotes once the new versions have their own
// capacity Ready.
func (r *Reconciler) advanceRollout(ctx context.Context, s *passState) {
	st := s.rollout
	if !rolloutActive(st) {
		return
	}
	for st.Phase == mlv1.RolloutProgressing {
		if !r.runStep(ctx, s) {
			return
		}
	}
	if st.Phase == mlv1.RolloutPromoting {
		s.promote()
	}
}

// abortOnCanaryFailure ends the rollout when a canary failed its rollout on
// its own (progress deadline, crash loop) and was rolled back.
func (s *passState) abortOnCanaryFailure() {
	st := s.rollout
	if !rolloutActive(st) {
		return
	}
	for _, c := range st.Canaries {
		if s.failedSet[c] {
			s.abortRollout(mlv1.ReasonRolloutFailed, fmt.Sprintf("version %s was rolled back (status.failedVersions)", c))
			s.setRequested(s.rolloutRequested())
			return
		}
	}
}

// runStep advances the current step; it reports whether the step ended
// (and the next one, or promotion, begins).
func (r *Reconciler) runStep(ctx context.Context, s *passState) bool {
	st := s.rollout
	step := s.steps[st.Step]
	if st.StepStartTime == nil {
		if waiting := s.canariesNotServing(); len(waiting) > 0 {
			st.Message = fmt.Sprintf("step %d (%d%%): waiting for a Ready pod of %s", st.Step, st.StepWeight, strings.Join(waiting, ", "))
			return false
		}
		st.StepStartTime = s.stamp.DeepCopy()
	}
	start := st.StepStartTime.Time
	interval := s.md.Spec.EffectiveAnalysisInterval()
	if checks := step.EffectiveChecks(); st.ChecksPassed < checks {
		last := start
		if st.LastCheckTime != nil {
			last = st.LastCheckTime.Time
		}
		if due := last.Add(interval); s.now.Before(due) {
			st.Message = fmt.Sprintf("step %d (%d%%): analysis %d of %d at %s", st.Step, st.StepWeight, st.ChecksPassed+1, checks, due.UTC().Format(time.RFC3339))
			s.requeueAfter = sooner(s.requeueAfter, due.Sub(s.now))
			return false
		}
		st.LastCheckTime = s.stamp.DeepCopy()
		results := r.analyzeCanaries(ctx, s)
		st.Analyses = append(results, st.Analyses...)
		if len(st.Analyses) > maxAnalyses {
			st.Analyses = st.Analyses[:maxAnalyses]
		}
		s.requeueAfter = sooner(s.requeueAfter, interval)
		switch outcome(results) {
		case mlv1.AnalysisFailed:
			s.analysisFailed(results)
			return false
		case mlv1.AnalysisPassed:
			st.ChecksPassed++
		}
		if st.ChecksPassed < checks {
			st.Message = fmt.Sprintf("step %d (%d%%): %d of %d analyses passed", st.Step, st.StepWeight, st.ChecksPassed, checks)
			return false
		}
	}
	if end := start.Add(step.PauseDuration()); s.now.Before(end) {
		st.Message = fmt.Sprintf("step %d (%d%%): paused until %s", st.Step, st.StepWeight, end.UTC().Format(time.RFC3339))
		s.requeueAfter = sooner(s.requeueAfter, end.Sub(s.now))
		return false
	}
	st.Step++
	st.StepStartTime, st.LastCheckTime, st.ChecksPassed = nil, nil, 0
	if int(st.Step) >= len(s.steps) {
		st.Phase = mlv1.RolloutPromoting
		return true
	}
	st.StepWeight = s.steps[st.Step].Weight
	s.setRequested(s.rolloutRequested())
	s.normal(mlv1.EventRolloutStep, "Step", "step %d: %s", st.Step, weightsText(s.requested))
	return true
}

// canariesNotServing are the canaries asked for traffic at this step that
// have no Ready pod yet: the step's weight has not taken effect.
func (s *passState) canariesNotServing() []string {
	var out []string
	for _, res := range s.results[:s.specVersions()] {
		if s.isCanary(res.name) && res.requested > 0 && !res.verdict.Ready {
			out = append(out, res.name)
		}
	}
	return out
}

// analysisFailed aborts the rollout on a failed analysis (or, with
// autoRollback off, holds it at its step), with a Warning event quoting the
// query, the value and the threshold.
func (s *passState) analysisFailed(results []mlv1.AnalysisResult) {
	st := s.rollout
	var msgs []string
	for _, a := range results {
		if a.Outcome == mlv1.AnalysisFailed {
			msgs = append(msgs, a.Message)
			s.warning(mlv1.EventAnalysis, "Analyze", "step %d: %s", st.Step, a.Message)
		}
	}
	msg := strings.Join(msgs, "; ")
	if !s.md.Spec.AutoRollback() {
		st.Phase = mlv1.RolloutPaused
		st.Message = fmt.Sprintf("step %d: analysis failed (rollout.autoRollback is off: promote or abort with annotation %s): %s", st.Step, mlv1.AnnotationRollout, msg)
		return
	}
	s.abortRollout(mlv1.ReasonAnalysisFailed, fmt.Sprintf("step %d: %s", st.Step, msg))
	s.setRequested(s.rolloutRequested())
}

// promote ends the rollout once every canary has its own capacity Ready:
// until then the last step's weights stand and the stable set keeps its
// capacity (sizing, in weigh).
func (s *passState) promote() {
	st := s.rollout
	var short []string
	for _, res := range s.results[:s.specVersions()] {
		tw := weightOf(s.goal, res.name)
		if tw == 0 || !slices.Contains(st.Canaries, res.name) {
			continue
		}
		if need := s.capacity(tw); !res.verdict.FullyReady || res.ready < need {
			short = append(short, fmt.Sprintf("%s %d/%d Ready", res.name, res.ready, max(need, res.desired)))
		}
	}
	if len(short) > 0 {
		st.Message = "promoting: waiting for the new versions' own capacity: " + strings.Join(short, ", ")
		return
	}
	st.Phase = mlv1.RolloutPromoted
	st.Message = "promoted: " + weightsText(s.goal)
	s.promotedNow = true
	s.setRequested(s.goal)
}

// capacity is the Ready replicas a version needs at weight before the
// versions it replaces may shrink: its HPA's minimum at that weight.
func (s *passState) capacity(weight int32) int32 {
	minReplicas := max(1, s.md.Spec.Scaling.MinReplicas)
	if s.router != mlv1.RouterService {
		return minReplicas
	}
	lo, _, _ := serviceModeBounds(weight, minReplicas, max(minReplicas, s.md.Spec.EffectiveMaxReplicas()))
	return lo
}

// holdStableCapacity keeps, while a rollout runs, every version sized for
// at least its stable weight (and, while promoting, its target weight):
// the stable set never shrinks before the new versions are promoted.
func (s *passState) holdStableCapacity() {
	st := s.rollout
	if !rolloutActive(st) {
		return
	}
	for i := range s.sizing {
		w := max(s.sizing[i].weight, weightOf(s.stable, s.sizing[i].name))
		if st.Phase == mlv1.RolloutPromoting {
			w = max(w, weightOf(s.goal, s.sizing[i].name))
		}
		s.sizing[i].weight = w
	}
	for i := range s.results[:s.specVersions()] {
		s.results[i].sizing = weightOf(s.sizing, s.results[i].name)
	}
}

// weightsText is "v1=90%, v2=10%".
func weightsText(ws []versionWeight) string {
	parts := make([]string, 0, len(ws))
	for _, w := range ws {
		parts = append(parts, fmt.Sprintf("%s=%d%%", w.name, w.weight))
	}
	return strings.Join(parts, ", ")
}

// analyzeCanaries runs one analysis of every Ready canary.
func (r *Reconciler) analyzeCanaries(ctx context.Context, s *passState) []mlv1.AnalysisResult {
	var out []mlv1.AnalysisResult
	for _, res := range s.results[:s.specVersions()] {
		if !s.isCanary(res.name) || !res.verdict.Ready {
			continue
		}
		a := mlv1.AnalysisResult{Outcome: mlv1.AnalysisInconclusive,
			Message: "the manager has no --prometheus-url, so no analysis can run: promote with annotation " + mlv1.AnnotationRollout + "=" + mlv1.RolloutActionPromote}
		if r.Metrics != nil {
			q := analysisQueries(s.md, res.name)
			m, err := r.Metrics.VersionMetrics(ctx, q)
			if err != nil {
				a.Message = fmt.Sprintf("Prometheus did not answer: %v", err)
			} else {
				a = judgeAnalysis(res.name, q, m, s.md.Spec.EffectiveMaxErrorRate(), s.md.Spec.Rollout.MaxLatencyMs)
			}
		}
		a.Time, a.Step, a.Version = s.stamp, s.rollout.Step, res.name
		out = append(out, a)
	}
	return out
}

// judgeAnalysis holds one version's metrics against the thresholds: failed
// when the error rate or the latency is over its limit, inconclusive without
// requests in the window, else passed.
func judgeAnalysis(version string, q prometheus.Queries, m prometheus.VersionMetrics, maxErrorRate float64, maxLatencyMs *int32) mlv1.AnalysisResult {
	num := func(f float64) string { return strconv.FormatFloat(f, 'g', 4, 64) }
	switch {
	case m.RequestsPerSecond <= 0:
		return mlv1.AnalysisResult{Outcome: mlv1.AnalysisInconclusive, Query: q.RequestRate,
			Message: fmt.Sprintf("version %s served no requests in the window: %s", version, q.RequestRate)}
	case m.HasErrorRate && m.ErrorRate > maxErrorRate:
		return mlv1.AnalysisResult{Outcome: mlv1.AnalysisFailed, Metric: mlv1.ReasonErrorRate, Query: q.ErrorRate,
			Value: num(m.ErrorRate), Threshold: num(maxErrorRate),
			Message: fmt.Sprintf("version %s: error rate %s is above rollout.maxErrorRate %s (query: %s)", version, num(m.ErrorRate), num(maxErrorRate), q.ErrorRate)}
	case maxLatencyMs != nil && m.HasLatency && m.AverageLatencyMs > float64(*maxLatencyMs):
		return mlv1.AnalysisResult{Outcome: mlv1.AnalysisFailed, Metric: mlv1.ReasonLatency, Query: q.LatencyMs,
			Value: num(m.AverageLatencyMs), Threshold: strconv.Itoa(int(*maxLatencyMs)),
			Message: fmt.Sprintf("version %s: average latency %sms is above rollout.maxLatencyMs %d (query: %s)", version, num(m.AverageLatencyMs), *maxLatencyMs, q.LatencyMs)}
	}
	return mlv1.AnalysisResult{Outcome: mlv1.AnalysisPassed,
		Message: fmt.Sprintf("version %s: %s requests/s within rollout.maxErrorRate and rollout.maxLatencyMs", version, num(m.RequestsPerSecond))}
}

// outcome of one analysis round: failed if any version failed, passed when
// at least one version was judged and every one passed, else inconclusive.
func outcome(results []mlv1.AnalysisResult) string {
	passed := len(results) > 0
	for _, a := range results {
		switch a.Outcome {
		case mlv1.AnalysisFailed:
			return mlv1.AnalysisFailed
		case mlv1.AnalysisInconclusive:
			passed = false
		}
	}
	if passed {
		return mlv1.AnalysisPassed
	}
	return mlv1.AnalysisInconclusive
}

// canaryRoute is the version traffic.canaryHeader routes to: the rollout's
// first Ready canary while it runs, else the last of spec.versions; empty
// when there is no header, one version only, or that version is not Ready
// or rolled back (requests with the header then follow the weights).
func (s *passState) canaryRoute() string {
	if s.md.Spec.Traffic.CanaryHeader == nil || s.specVersions() < 2 {
		return ""
	}
	candidates := []string{s.md.Spec.Versions[s.specVersions()-1].Name}
	if rolloutActive(s.rollout) && len(s.rollout.Canaries) > 0 {
		candidates = s.rollout.Canaries
	}
	ready := s.ready()
	for _, c := range candidates {
		if ready[c] && !s.failedSet[c] {
			return c
		}
	}
	return ""
}

// rolloutStatus is the rollout's status as of the end of the pass.
func (s *passState) rolloutStatus() *mlv1.RolloutStatus {
	if s.rollout == nil {
		return nil
	}
	out := s.rollout.DeepCopy()
	if out.Phase == mlv1.RolloutProgressing && out.Message == "" {
		out.Message = fmt.Sprintf("step %d (%d%%)", out.Step, out.StepWeight)
	}
	return out
}
