package modeldeployment

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/internal/integrations/prometheus"
	"github.com/ml-operator/ml-operator/internal/refusal"
)

// event is emitted after the status write.
type event struct{ eventType, reason, action, note string }

// pass is the outcome of one reconcile pass.
type pass struct {
	status       mlv1.ModelDeploymentStatus
	events       []event
	rollbacks    []mlv1.FailedVersion
	requeueAfter time.Duration
}

func (p *pass) normal(reason, action, format string, args ...any) {
	p.events = append(p.events, event{corev1.EventTypeNormal, reason, action, fmt.Sprintf(format, args...)})
}

func (p *pass) warning(reason, action, format string, args ...any) {
	p.events = append(p.events, event{corev1.EventTypeWarning, reason, action, fmt.Sprintf(format, args...)})
}

// passState carries one pass's observations and decisions from step to step.
type passState struct {
	*pass
	md  *mlv1.ModelDeployment
	now time.Time
	// stamp is now as the API server stores it (whole seconds).
	stamp              metav1.Time
	interval, deadline time.Duration
	router             mlv1.TrafficRouter
	route              routePlan
	obs                *observed
	prevVersions       map[string]mlv1.VersionStatus
	requested          []versionWeight
	history            []mlv1.HistoryEntry

	// results and vstatus hold the spec's versions in spec order, then the
	// removed versions that still drain.
	results []versionResult
	vstatus []mlv1.VersionStatus
	served  []prometheus.VersionMetrics

	// refused is the API server's refusal to apply a child in this pass.
	refused error

	failed    []mlv1.FailedVersion
	failedSet map[string]bool
	failing   map[string]bool
	target    string
	// effective: readiness-gated weights of the spec's versions; sizing: the
	// weights after rollback, which size the versions; routeWeights: what the
	// router gets (effective, plus the removed versions).
	effective, sizing, routeWeights []versionWeight
}

// specVersions is the number of versions in the spec (the head of results).
func (s *passState) specVersions() int { return len(s.md.Spec.Versions) }

// reconcile is one pass: observe, evaluate health, decide rollbacks and
// weights, drain removed versions, apply the children, remediate, and compute
// the new status.
func (r *Reconciler) reconcile(ctx context.Context, md *mlv1.ModelDeployment) (*pass, error) {
	obs, err := r.observe(ctx, md)
	if err != nil {
		return nil, err
	}
	route, err := r.planRoute(ctx, md)
	if err != nil {
		return nil, err
	}
	s := r.newPassState(md, obs, route)
	if err := r.evaluateVersions(ctx, s); err != nil {
		return nil, err
	}
	s.rollBackFailing(ctrl.LoggerFrom(ctx))
	s.weigh()
	if err := r.drainRemoved(ctx, s); err != nil {
		return nil, err
	}
	if err := r.applyChildren(ctx, s); err != nil {
		if !refusal.Is(err) {
			return nil, err
		}
		// Quota, a webhook, an invalid object: the ModelDeployment shows
		// it, and the next health interval tries again.
		s.refused = err
		s.warning(mlv1.EventFailedCreate, "Apply", "%s", refusal.Note(err))
	}
	if prev := md.Status.Router; prev != "" && prev != s.router {
		if err := r.deleteRouter(ctx, md, prev); err != nil {
			return nil, err
		}
	}
	if err := r.remediate(ctx, s); err != nil {
		return nil, err
	}
	s.buildStatus()
	return s.pass, nil
}

func (r *Reconciler) newPassState(md *mlv1.ModelDeployment, obs *observed, route routePlan) *passState {
	now := r.Clock.Now()
	interval := time.Duration(md.Spec.EffectiveIntervalSeconds()) * time.Second
	s := &passState{
		pass:         &pass{requeueAfter: interval},
		md:           md,
		now:          now,
		stamp:        metav1.NewTime(now.Truncate(time.Second)),
		interval:     interval,
		deadline:     time.Duration(md.Spec.EffectiveProgressDeadlineSeconds()) * time.Second,
		router:       route.router,
		route:        route,
		obs:          obs,
		prevVersions: map[string]mlv1.VersionStatus{},
		failed:       currentFailures(md.Status.FailedVersions, md.Generation),
		failedSet:    map[string]bool{},
		failing:      map[string]bool{},
	}
	s.history = recordHistory(md.Status.History, md.Generation, versionRecords(md), s.stamp.Time)
	for _, v := range md.Status.ActiveVersions {
		s.prevVersions[v.Name] = v
	}
	for _, f := range s.failed {
		s.failedSet[f.Name] = true
	}
	weights := md.Spec.RequestedWeights()
	for _, v := range md.Spec.Versions {
		s.requested = append(s.requested, versionWeight{v.Name, weights[v.Name]})
	}
	return s
}

// evaluateVersions judges the health of every version in the spec and reads
// its serving metrics.
func (r *Reconciler) evaluateVersions(ctx context.Context, s *passState) error {
	md, spec := s.md, &s.md.Spec
	for _, v := range spec.Versions {
		d, err := desiredDeployment(md, v, nil, r.PodSecurity, r.storageInitializerImage())
		if err != nil {
			return err
		}
		vs := mlv1.VersionStatus{Name: v.Name, TemplateHash: templateHash(d)}
		if ps, ok := s.prevVersions[v.Name]; ok && ps.TemplateHash == vs.TemplateHash && ps.RolloutStartTime != nil &&
			ps.DrainStartTime == nil && !retried(md.Status.FailedVersions, v.Name, md.Generation) {
			vs.RolloutStartTime, vs.RolloutComplete = ps.RolloutStartTime, ps.RolloutComplete
			vs.Remediations, vs.LastRemediationTime = ps.Remediations, ps.LastRemediationTime
		} else {
			// A new template, a version back from draining, or a retry after a
			// rollback: a new rollout with a fresh progress deadline.
			vs.RolloutStartTime = s.stamp.DeepCopy()
		}
		res := versionResult{name: v.Name, requested: weightOf(s.requested, v.Name), failed: s.failedSet[v.Name]}
		if res.requested == 0 && !vs.RolloutComplete {
			// A version asked for no traffic is not rolling out: its progress
			// deadline starts when it is given a weight.
			vs.RolloutStartTime = nil
		}
		var rolloutStart, lastRemediation time.Time
		if vs.RolloutStartTime != nil {
			rolloutStart = vs.RolloutStartTime.Time
		}
		if vs.LastRemediationTime != nil {
			lastRemediation = vs.LastRemediationTime.Time
		}
		res.blockedReason, res.blockedMessage = blocked(s.obs.deployments[v.Name], s.obs.pods[v.Name])
		if dep := s.obs.deployments[v.Name]; dep != nil {
			res.exists = true
			res.desired = ptr.Deref(dep.Spec.Replicas, 1)
			res.ready = dep.Status.ReadyReplicas
			res.current = dep.Status.Replicas
		}
		res.verdict = evaluateHealth(versionState{
			Desired: res.desired, Ready: res.ready, RolloutStart: rolloutStart,
			RolloutComplete: vs.RolloutComplete, Remediations: vs.Remediations, LastRemediation: lastRemediation,
			Pods: s.obs.pods[v.Name],
		}, s.now, s.deadline, spec.EffectiveFailureThreshold())
		if res.failed {
			// A rolled-back version is left alone until the spec changes.
			res.verdict.Failure, res.verdict.Message, res.verdict.CrashLoopPods = "", "", nil
		}
		if r.Metrics != nil && res.verdict.Ready && !res.failed {
			m, err := r.Metrics.VersionMetrics(ctx, analysisQueries(md, v.Name))
			if err != nil {
				// Prometheus being down must not stop serving or trigger rollbacks.
				ctrl.LoggerFrom(ctx).Error(err, "reading serving metrics", "version", v.Name)
			} else {
				s.served = append(s.served, m)
				res.metricReason, res.metricMessage = metricFailure(m, spec.EffectiveMaxErrorRate(), spec.Rollout.MaxLatencyMs)
			}
		}
		vs.RolloutComplete = res.verdict.RolloutComplete
		if !vs.RolloutComplete && !res.failed && !rolloutStart.IsZero() {
			s.requeueAfter = sooner(s.requeueAfter, rolloutStart.Add(s.deadline).Sub(s.now))
		}
		// Rolling back a version that was asked for no traffic means nothing:
		// it is only remediated.
		if reason, _ := res.failure(); reason != "" && !res.failed && res.requested > 0 {
			s.failing[res.name] = true
		}
		s.results = append(s.results, res)
		s.vstatus = append(s.vstatus, vs)
	}
	return nil
}

// ready is the set of versions with a Ready pod.
func (s *passState) ready() map[string]bool {
	out := map[string]bool{}
	for _, res := range s.results[:s.specVersions()] {
		out[res.name] = res.verdict.Ready
	}
	return out
}

// rollBackFailing records a rollback for every failing version, when
// autoRollback is on and a healthy version is left to take its traffic.
func (s *passState) rollBackFailing(log logr.Logger) {
	if !s.md.Spec.AutoRollback() || len(s.failing) == 0 {
		return
	}
	exclude := map[string]bool{}
	for n := range s.failedSet {
		exclude[n] = true
	}
	for n := range s.failing {
		exclude[n] = true
	}
	target := rollbackTarget(s.history, s.requested, s.ready(), exclude)
	if target == "" {
		log.Info("versions are failing but no healthy version is left to roll back to", "failing", s.failing)
		return
	}
	for i := range s.results {
		res := &s.results[i]
		if !s.failing[res.name] {
			continue
		}
		reason, msg := res.failure()
		fv := mlv1.FailedVersion{Name: res.name, Generation: s.md.Generation, Reason: reason, Message: msg, Time: s.stamp}
		s.failed = append(s.failed, fv)
		s.failedSet[res.name] = true
		res.failed = true
		res.verdict.CrashLoopPods = nil
		s.rollbacks = append(s.rollbacks, fv)
		s.warning(mlv1.EventRolledBack, "RollBack", "version %s rolled back to %s (%s): %s", res.name, target, reason, msg)
	}
}

// weigh computes the sizing and effective weights of the spec's versions.
func (s *passState) weigh() {
	if len(s.failedSet) > 0 {
		s.target = rollbackTarget(s.history, s.requested, s.ready(), s.failedSet)
	}
	s.effective = effectiveWeights(s.requested, s.ready(), s.failedSet, s.target)
	s.sizing = rolledBackWeights(s.requested, s.failedSet, s.target)
	s.routeWeights = append([]versionWeight(nil), s.effective...)
	for i := range s.results {
		s.results[i].effective = weightOf(s.effective, s.results[i].name)
		s.results[i].sizing = weightOf(s.sizing, s.results[i].name)
	}
}

// drainRemoved handles versions that left the spec. Each drains at weight 0
// for one health interval, then its children are deleted. While no version
// in the spec is Ready, the removed versions keep serving and their drain
// has not started, so renaming a version never drops traffic.
func (r *Reconciler) drainRemoved(ctx context.Context, s *passState) error {
	var removed []string
	for name := range s.obs.deployments {
		if hasVersion(s.requested, name) {
			continue
		}
		removed = append(removed, name)
	}
	sort.Strings(removed)
	var specServing bool
	for _, w := range s.effective {
		specServing = specServing || w.weight > 0
	}
	var holding []versionWeight
	var holdRaw []int64
	for _, name := range removed {
		dep := s.obs.deployments[name]
		res := versionResult{name: name, draining: true, exists: true,
			desired: ptr.Deref(dep.Spec.Replicas, 1), ready: dep.Status.ReadyReplicas, current: dep.Status.Replicas}
		vs := mlv1.VersionStatus{Name: name, Replicas: res.desired, HealthyReplicas: res.ready}
		if !specServing {
			if res.ready > 0 {
				holding = append(holding, versionWeight{name: name})
				holdRaw = append(holdRaw, 1)
			}
			s.routeWeights = append(s.routeWeights, versionWeight{name: name})
			s.results, s.vstatus = append(s.results, res), append(s.vstatus, vs)
			continue
		}
		start := s.stamp.DeepCopy()
		if ps, ok := s.prevVersions[name]; ok && ps.DrainStartTime != nil {
			start = ps.DrainStartTime
		}
		if end := start.Add(s.interval); s.now.Before(end) {
			if s.router == mlv1.RouterService {
				// Weight 0 under router service is zero replicas: the pods
				// terminate gracefully and leave the stable Service.
				if err := r.scaleToZero(ctx, s.md, dep); err != nil {
					return err
				}
			}
			vs.DrainStartTime = start
			s.routeWeights = append(s.routeWeights, versionWeight{name: name})
			s.results, s.vstatus = append(s.results, res), append(s.vstatus, vs)
			s.requeueAfter = sooner(s.requeueAfter, end.Sub(s.now))
			continue
		}
		if err := r.deleteVersion(ctx, s.md, name, dep); err != nil {
			return err
		}
		s.normal(mlv1.EventVersionRemoved, "Delete", "version %s drained and deleted", name)
	}
	if len(holding) > 0 {
		holding = apportion(holding, holdRaw, int64(len(holding)))
		for i := range s.routeWeights {
			s.routeWeights[i].weight = max(s.routeWeights[i].weight, weightOf(holding, s.routeWeights[i].name))
		}
		for i := s.specVersions(); i < len(s.results); i++ {
			s.results[i].effective = weightOf(holding, s.results[i].name)
		}
	}
	return nil
}

// hasVersion reports whether name is among ws.
func hasVersion(ws []versionWeight, name string) bool {
	for _, w := range ws {
		if w.name == name {
			return true
		}
	}
	return false
}

// remediate deletes crash-looping pods so their Deployment recreates them.
func (r *Reconciler) remediate(ctx context.Context, s *passState) error {
	for i := range s.specVersions() {
		res, vs := &s.results[i], &s.vstatus[i]
		switch {
		case len(res.verdict.CrashLoopPods) > 0:
			if err := r.deletePods(ctx, s.obs.pods[res.name], res.verdict.CrashLoopPods); err != nil {
				return err
			}
			vs.Remediations++
			vs.LastRemediationTime = s.stamp.DeepCopy()
			s.warning(mlv1.EventRemediated, "DeletePods", "version %s: deleted crash-looping pods %s (restarted at least %d times)",
				res.name, strings.Join(res.verdict.CrashLoopPods, ", "), s.md.Spec.EffectiveFailureThreshold())
		case res.verdict.FullyReady:
			vs.Remediations, vs.LastRemediationTime = 0, nil
		}
	}
	return nil
}

// buildStatus computes the new status and the events that depend on it.
func (s *passState) buildStatus() {
	md, gen := s.md, s.md.Generation
	st := mlv1.ModelDeploymentStatus{
		Conditions:         append([]metav1.Condition(nil), md.Status.Conditions...),
		History:            s.history,
		FailedVersions:     s.failed,
		Metrics:            aggregateMetrics(s.served),
		Router:             s.router,
		URL:                stableURL(md, s.router),
		ObservedGeneration: gen,
	}
	for i, res := range s.results {
		vs := &s.vstatus[i]
		vs.Replicas, vs.HealthyReplicas, vs.Weight = res.desired, res.ready, res.effective
		vs.Ready = res.verdict.Ready && !res.failed
		if res.draining {
			vs.Ready = res.ready > 0 && res.effective > 0
			continue
		}
		if ps, ok := s.prevVersions[res.name]; ok && res.exists && ps.Replicas != res.desired && ps.DrainStartTime == nil {
			s.normal(mlv1.EventScaled, "Scale", "version %s scaled from %d to %d replicas", res.name, ps.Replicas, res.desired)
		}
	}
	st.ActiveVersions = s.vstatus

	allRolledOut := true
	for _, res := range s.results[:s.specVersions()] {
		if res.sizing > 0 && (!res.verdict.RolloutComplete || s.failing[res.name] && !res.failed) {
			allRolledOut = false
		}
	}
	before := st.History[0].Outcome
	st.History[0].Outcome = historyOutcome(before, len(s.failed) > 0, allRolledOut)
	if before == mlv1.OutcomeProgressing && st.History[0].Outcome == mlv1.OutcomeSucceeded {
		parts := make([]string, 0, len(s.effective))
		for _, w := range s.effective {
			parts = append(parts, fmt.Sprintf("%s=%d%%", w.name, w.weight))
		}
		s.normal(mlv1.EventPromoted, "Promote", "generation %d rolled out: %s", st.History[0].Generation, strings.Join(parts, ", "))
	}

	readyC := readyCondition(s.results, gen)
	healthyC := healthyCondition(s.results, gen)
	progressingC := progressingCondition(s.results, gen)
	if s.refused != nil {
		progressingC = refusedCondition(s.refused, gen)
	}
	setConditions(&st, readyC, healthyC, scaledCondition(s.results, gen), progressingC,
		rolledBackCondition(s.failed, s.target, gen), trafficRoutedCondition(s.route, gen))
	if progressingC.Reason == mlv1.ReasonFailedCreate && s.refused == nil {
		// The ReplicaSet controller's refusal: its event is on the
		// ReplicaSet; the owner the user made gets one too, once.
		if old := meta.FindStatusCondition(md.Status.Conditions, mlv1.ModelDeploymentProgressing); old == nil || old.Reason != mlv1.ReasonFailedCreate {
			s.warning(mlv1.EventFailedCreate, "Create", "%s", progressingC.Message)
		}
	}
	st.Phase = phase(s.results, readyC, healthyC)
	if healthyC.Status == metav1.ConditionFalse {
		if old := meta.FindStatusCondition(md.Status.Conditions, mlv1.ModelDeploymentHealthy); old == nil || old.Status != metav1.ConditionFalse {
			s.warning(mlv1.EventDegraded, "Evaluate", "%s", healthyC.Message)
		}
	}
	s.status = st
}
