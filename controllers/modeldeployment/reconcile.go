package modeldeployment

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
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

// Event reasons.
const (
	EventCreated        = "Created"
	EventScaled         = "Scaled"
	EventDegraded       = "Degraded"
	EventRemediated     = "Remediated"
	EventRolledBack     = "RolledBack"
	EventPromoted       = "Promoted"
	EventVersionRemoved = "VersionRemoved"
)

// observed is what exists in the cluster for one ModelDeployment.
type observed struct {
	deployments map[string]*appsv1.Deployment
	pods        map[string][]corev1.Pod
	claims      map[string]*corev1.PersistentVolumeClaim
}

func isNoMatch(err error) bool { return meta.IsNoMatchError(err) }

// observe lists md's Deployments, pods and model cache PVCs by label, keyed by version.
func (r *Reconciler) observe(ctx context.Context, md *mlv1.ModelDeployment) (*observed, error) {
	opts := []client.ListOption{
		client.InNamespace(md.Namespace),
		client.MatchingLabels{mlv1.LabelModelDeployment: md.Name, mlv1.LabelManagedBy: mlv1.ManagedByValue},
	}
	obs := &observed{
		deployments: map[string]*appsv1.Deployment{},
		pods:        map[string][]corev1.Pod{},
		claims:      map[string]*corev1.PersistentVolumeClaim{},
	}
	var deps appsv1.DeploymentList
	if err := r.Client.List(ctx, &deps, opts...); err != nil {
		return nil, fmt.Errorf("listing deployments: %w", err)
	}
	for i := range deps.Items {
		d := &deps.Items[i]
		if metav1.IsControlledBy(d, md) {
			obs.deployments[d.Labels[mlv1.LabelModelVersion]] = d
		}
	}
	var pods corev1.PodList
	if err := r.Client.List(ctx, &pods, opts...); err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	for _, p := range pods.Items {
		v := p.Labels[mlv1.LabelModelVersion]
		obs.pods[v] = append(obs.pods[v], p)
	}
	if md.Spec.Storage != nil {
		var claims corev1.PersistentVolumeClaimList
		if err := r.Client.List(ctx, &claims, opts...); err != nil {
			return nil, fmt.Errorf("listing model cache claims: %w", err)
		}
		for i := range claims.Items {
			obs.claims[claims.Items[i].Labels[mlv1.LabelModelVersion]] = &claims.Items[i]
		}
	}
	return obs, nil
}

// resolveRouter turns traffic.router auto into the detected router.
func (r *Reconciler) resolveRouter(md *mlv1.ModelDeployment) mlv1.TrafficRouter {
	if rt := md.Spec.Traffic.Router; rt != "" && rt != mlv1.RouterAuto {
		return rt
	}
	if r.Routers == nil {
		return mlv1.RouterService
	}
	return r.Routers.Router()
}

func (r *Reconciler) istioVersion() string {
	if r.Routers == nil {
		return defaultIstioVersion
	}
	return r.Routers.IstioVersion()
}

// reconcile is one pass: observe, evaluate health, decide rollbacks and
// weights, apply the children, remediate, and compute the new status.
func (r *Reconciler) reconcile(ctx context.Context, md *mlv1.ModelDeployment) (*pass, error) {
	log := ctrl.LoggerFrom(ctx)
	now := r.Clock.Now()
	stamp := metav1.NewTime(now.Truncate(time.Second))
	spec := &md.Spec
	gen := md.Generation
	interval := time.Duration(spec.EffectiveIntervalSeconds()) * time.Second
	deadline := time.Duration(spec.EffectiveProgressDeadlineSeconds()) * time.Second
	router := r.resolveRouter(md)

	obs, err := r.observe(ctx, md)
	if err != nil {
		return nil, err
	}
	prev := md.Status
	p := &pass{requeueAfter: interval}
	st := mlv1.ModelDeploymentStatus{
		Conditions:         append([]metav1.Condition(nil), prev.Conditions...),
		History:            recordHistory(prev.History, gen, versionRecords(md), stamp.Time),
		Router:             router,
		URL:                stableURL(md, router),
		ObservedGeneration: gen,
	}
	prevVersions := map[string]mlv1.VersionStatus{}
	for _, v := range prev.ActiveVersions {
		prevVersions[v.Name] = v
	}
	failed := currentFailures(prev.FailedVersions, gen)
	failedSet := map[string]bool{}
	for _, f := range failed {
		failedSet[f.Name] = true
	}
	requestedMap := spec.RequestedWeights()
	requested := make([]versionWeight, 0, len(spec.Versions))
	for _, v := range spec.Versions {
		requested = append(requested, versionWeight{v.Name, requestedMap[v.Name]})
	}

	// Evaluate every version in the spec.
	results := make([]versionResult, len(spec.Versions))
	vstatus := make([]mlv1.VersionStatus, len(spec.Versions))
	var served []VersionMetrics
	for i, v := range spec.Versions {
		d, err := desiredDeployment(md, v, nil)
		if err != nil {
			return nil, err
		}
		vs := mlv1.VersionStatus{Name: v.Name, TemplateHash: templateHash(d)}
		if ps, ok := prevVersions[v.Name]; ok && ps.TemplateHash == vs.TemplateHash && ps.RolloutStartTime != nil &&
			ps.DrainStartTime == nil && !retried(prev.FailedVersions, v.Name, gen) {
			vs.RolloutStartTime, vs.RolloutComplete, vs.Remediations = ps.RolloutStartTime, ps.RolloutComplete, ps.Remediations
		} else {
			// A new template, a version back from draining, or a retry after a
			// rollback: a new rollout with a fresh progress deadline.
			vs.RolloutStartTime = stamp.DeepCopy()
		}
		res := versionResult{name: v.Name, requested: requestedMap[v.Name], failed: failedSet[v.Name]}
		if dep := obs.deployments[v.Name]; dep != nil {
			res.exists = true
			res.desired = ptr.Deref(dep.Spec.Replicas, 1)
			res.ready = dep.Status.ReadyReplicas
			res.current = dep.Status.Replicas
		}
		res.verdict = evaluateHealth(versionState{
			Desired: res.desired, Ready: res.ready, RolloutStart: vs.RolloutStartTime.Time,
			RolloutComplete: vs.RolloutComplete, Remediations: vs.Remediations, Pods: obs.pods[v.Name],
		}, now, deadline, spec.EffectiveFailureThreshold())
		if res.failed {
			// A rolled-back version is left alone until the spec changes.
			res.verdict.Failure, res.verdict.Message, res.verdict.CrashLoopPods = "", "", nil
		}
		if r.Metrics != nil && res.verdict.Ready && !res.failed {
			m, err := r.Metrics.VersionMetrics(ctx, md.Namespace, md.Name, v.Name)
			if err != nil {
				log.Error(err, "reading serving metrics", "version", v.Name)
			} else {
				served = append(served, m)
				res.metricReason, res.metricMessage = metricFailure(m, spec.EffectiveMaxErrorRate(), spec.Rollout.MaxLatencyMs)
			}
		}
		vs.RolloutComplete = res.verdict.RolloutComplete
		if !vs.RolloutComplete && !res.failed {
			p.requeueAfter = sooner(p.requeueAfter, vs.RolloutStartTime.Add(deadline).Sub(now))
		}
		results[i], vstatus[i] = res, vs
	}

	// Roll back failing versions to the last healthy one.
	ready := map[string]bool{}
	failing := map[string]bool{}
	for _, res := range results {
		ready[res.name] = res.verdict.Ready
		if reason, _ := res.failure(); reason != "" && !res.failed {
			failing[res.name] = true
		}
	}
	if spec.AutoRollback() && len(failing) > 0 {
		exclude := map[string]bool{}
		for n := range failedSet {
			exclude[n] = true
		}
		for n := range failing {
			exclude[n] = true
		}
		if target := rollbackTarget(st.History, requested, ready, exclude); target != "" {
			for i := range results {
				res := &results[i]
				if !failing[res.name] {
					continue
				}
				reason, msg := res.failure()
				fv := mlv1.FailedVersion{Name: res.name, Generation: gen, Reason: reason, Message: msg, Time: stamp}
				failed = append(failed, fv)
				failedSet[res.name] = true
				res.failed = true
				res.verdict.CrashLoopPods = nil
				p.rollbacks = append(p.rollbacks, fv)
				p.warning(EventRolledBack, "RollBack", "version %s rolled back to %s (%s): %s", res.name, target, reason, msg)
			}
		} else {
			log.Info("versions are failing but no healthy version is left to roll back to", "failing", failing)
		}
	}
	target := ""
	if len(failedSet) > 0 {
		target = rollbackTarget(st.History, requested, ready, failedSet)
	}
	effective := effectiveWeights(requested, ready, failedSet, target)
	sizing := rolledBackWeights(requested, failedSet, target)
	for i := range results {
		results[i].effective = weightOf(effective, results[i].name)
		results[i].sizing = weightOf(sizing, results[i].name)
	}

	// Versions no longer in the spec drain for one health interval, then go.
	var drainingStatus []mlv1.VersionStatus
	var removed []string
	for name := range obs.deployments {
		if _, inSpec := requestedMap[name]; !inSpec {
			removed = append(removed, name)
		}
	}
	sort.Strings(removed)
	routeWeights := append([]versionWeight(nil), effective...)
	for _, name := range removed {
		dep := obs.deployments[name]
		start := stamp.DeepCopy()
		if ps, ok := prevVersions[name]; ok && ps.DrainStartTime != nil {
			start = ps.DrainStartTime
		}
		if end := start.Add(interval); now.Before(end) {
			routeWeights = append(routeWeights, versionWeight{name: name})
			res := versionResult{name: name, draining: true, exists: true,
				desired: ptr.Deref(dep.Spec.Replicas, 1), ready: dep.Status.ReadyReplicas, current: dep.Status.Replicas}
			results = append(results, res)
			drainingStatus = append(drainingStatus, mlv1.VersionStatus{Name: name, Replicas: res.desired,
				HealthyReplicas: res.ready, DrainStartTime: start})
			p.requeueAfter = sooner(p.requeueAfter, end.Sub(now))
			continue
		}
		if err := r.deleteVersion(ctx, md, name, dep); err != nil {
			return nil, err
		}
		p.normal(EventVersionRemoved, "Delete", "version %s drained and deleted", name)
	}

	if err := r.applyChildren(ctx, md, router, obs, results, routeWeights, sizing, p); err != nil {
		return nil, err
	}
	if prev.Router != "" && prev.Router != router {
		if err := r.deleteRouter(ctx, md, prev.Router); err != nil {
			return nil, err
		}
	}

	// Remediate crash loops: delete the pods so the Deployment recreates them.
	for i := range results[:len(spec.Versions)] {
		res, vs := &results[i], &vstatus[i]
		if len(res.verdict.CrashLoopPods) > 0 {
			if err := r.deletePods(ctx, obs.pods[res.name], res.verdict.CrashLoopPods); err != nil {
				return nil, err
			}
			vs.Remediations++
			p.warning(EventRemediated, "DeletePods", "version %s: deleted crash-looping pods %s (restarted at least %d times)",
				res.name, strings.Join(res.verdict.CrashLoopPods, ", "), spec.EffectiveFailureThreshold())
		} else if res.verdict.FullyReady {
			vs.Remediations = 0
		}
	}

	// Status.
	for i, res := range results[:len(spec.Versions)] {
		vs := &vstatus[i]
		vs.Replicas, vs.HealthyReplicas, vs.Weight = res.desired, res.ready, res.effective
		vs.Ready = res.verdict.Ready && !res.failed
		if ps, ok := prevVersions[res.name]; ok && res.exists && ps.Replicas != res.desired && ps.DrainStartTime == nil {
			p.normal(EventScaled, "Scale", "version %s scaled from %d to %d replicas", res.name, ps.Replicas, res.desired)
		}
	}
	st.ActiveVersions = append(vstatus, drainingStatus...)
	st.FailedVersions = failed
	allRolledOut := true
	for _, res := range results[:len(spec.Versions)] {
		if res.sizing > 0 && (!res.verdict.RolloutComplete || failing[res.name] && !res.failed) {
			allRolledOut = false
		}
	}
	before := st.History[0].Outcome
	st.History[0].Outcome = historyOutcome(before, len(failed) > 0, allRolledOut)
	if before == OutcomeProgressing && st.History[0].Outcome == OutcomeSucceeded {
		parts := make([]string, 0, len(effective))
		for _, w := range effective {
			parts = append(parts, fmt.Sprintf("%s=%d%%", w.name, w.weight))
		}
		p.normal(EventPromoted, "Promote", "generation %d rolled out: %s", st.History[0].Generation, strings.Join(parts, ", "))
	}
	st.Metrics = aggregateMetrics(served)

	readyC := readyCondition(results, gen)
	healthyC := healthyCondition(results, gen)
	setConditions(&st, readyC, healthyC, scaledCondition(results, gen), progressingCondition(results, gen),
		rolledBackCondition(failed, target, gen))
	st.Phase = phase(results, readyC, healthyC)
	if healthyC.Status == metav1.ConditionFalse {
		if old := meta.FindStatusCondition(prev.Conditions, mlv1.ModelDeploymentHealthy); old == nil || old.Status != metav1.ConditionFalse {
			p.warning(EventDegraded, "Evaluate", "%s", healthyC.Message)
		}
	}
	p.status = st
	return p, nil
}

// aggregateMetrics sums the versions' rates and weights their error rates and
// latencies by traffic. Nil when nothing was read.
func aggregateMetrics(ms []VersionMetrics) *mlv1.ServingMetrics {
	if len(ms) == 0 {
		return nil
	}
	var rps, errs, lat, latRPS float64
	for _, m := range ms {
		rps += m.RequestsPerSecond
		errs += m.RequestsPerSecond * m.ErrorRate
		if m.HasLatency {
			lat += m.RequestsPerSecond * m.AverageLatencyMs
			latRPS += m.RequestsPerSecond
		}
	}
	out := &mlv1.ServingMetrics{RequestsPerSecond: ptr.To(rps)}
	if rps > 0 {
		out.ErrorRate = ptr.To(errs / rps)
	}
	if latRPS > 0 {
		out.AverageLatencyMs = ptr.To(lat / latRPS)
	}
	return out
}

// applyChildren server-side-applies the ConfigMap, per-version PVCs,
// Deployments, Services and HPAs, the stable Service and the router.
func (r *Reconciler) applyChildren(ctx context.Context, md *mlv1.ModelDeployment, router mlv1.TrafficRouter,
	obs *observed, results []versionResult, routeWeights, sizing []versionWeight, p *pass) error {
	spec := &md.Spec
	if err := r.apply(ctx, desiredConfigMap(md)); err != nil {
		return fmt.Errorf("applying ConfigMap: %w", err)
	}
	minReplicas := max(1, spec.Scaling.MinReplicas)
	maxReplicas := max(minReplicas, spec.EffectiveMaxReplicas())
	for i, v := range spec.Versions {
		if spec.Storage != nil {
			if err := r.apply(ctx, desiredModelCacheClaim(md, v.Name, obs.claims[v.Name])); err != nil {
				return fmt.Errorf("applying model cache PVC of version %s: %w", v.Name, err)
			}
		}
		// The HPA owns the replicas; only a version that router "service"
		// sizes to zero has its replicas set by the operator, and no HPA.
		var replicas *int32
		lo, hi := minReplicas, maxReplicas
		if router == mlv1.RouterService {
			var ok bool
			if lo, hi, ok = serviceModeBounds(weightOf(sizing, v.Name), minReplicas, maxReplicas); !ok {
				replicas = ptr.To[int32](0)
			}
		}
		d, err := desiredDeployment(md, v, replicas)
		if err != nil {
			return err
		}
		if err := r.apply(ctx, d); err != nil {
			return fmt.Errorf("applying Deployment of version %s: %w", v.Name, err)
		}
		if obs.deployments[v.Name] == nil {
			p.normal(EventCreated, "Create", "created Deployment %s for version %s", *d.Name, v.Name)
		}
		if d.Spec != nil && d.Spec.Replicas != nil {
			// The apply answers with the live object: the replicas the HPA
			// (or the API default) decided.
			results[i].desired = *d.Spec.Replicas
		}
		if err := r.apply(ctx, desiredVersionService(md, v.Name)); err != nil {
			return fmt.Errorf("applying Service of version %s: %w", v.Name, err)
		}
		if replicas != nil {
			hpa := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{
				Name: mlv1.VersionResourceName(md.Name, v.Name), Namespace: md.Namespace}}
			if err := r.deleteIfExists(ctx, hpa); err != nil {
				return fmt.Errorf("deleting HPA of version %s: %w", v.Name, err)
			}
			continue
		}
		hpa, err := desiredHPA(md, v.Name, lo, hi)
		if err != nil {
			return err
		}
		if err := r.apply(ctx, hpa); err != nil {
			return fmt.Errorf("applying HPA of version %s: %w", v.Name, err)
		}
	}
	if err := r.apply(ctx, desiredStableService(md)); err != nil {
		return fmt.Errorf("applying stable Service: %w", err)
	}

	switch router {
	case mlv1.RouterGatewayAPI:
		route, err := toUnstructured(desiredHTTPRoute(md, routeWeights))
		if err != nil {
			return err
		}
		if err := r.apply(ctx, client.ApplyConfigurationFromUnstructured(route)); err != nil {
			return fmt.Errorf("applying HTTPRoute (traffic.router gatewayapi): %w", err)
		}
	case mlv1.RouterIstio:
		ws := routeWeights
		var sum int32
		for _, w := range ws {
			sum += w.weight
		}
		if sum == 0 {
			// Nothing is Ready: Envoy refuses an all-zero split, so route as
			// requested until a version becomes Ready.
			ws = append(append([]versionWeight(nil), sizing...), routeWeights[len(sizing):]...)
		}
		iv := r.istioVersion()
		for _, u := range []*unstructured.Unstructured{desiredDestinationRule(md, iv, ws), desiredVirtualService(md, iv, ws)} {
			if err := r.apply(ctx, client.ApplyConfigurationFromUnstructured(u)); err != nil {
				return fmt.Errorf("applying %s (traffic.router istio): %w", u.GetKind(), err)
			}
		}
	}
	return nil
}

// toUnstructured turns an apply configuration into an unstructured object, so
// kinds outside the manager's scheme (the Gateway API) can be applied.
func toUnstructured(ac any) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	if err := convertJSON(ac, &u.Object); err != nil {
		return nil, fmt.Errorf("converting %T: %w", ac, err)
	}
	return u, nil
}

// deleteRouter removes the objects of a router md no longer uses.
func (r *Reconciler) deleteRouter(ctx context.Context, md *mlv1.ModelDeployment, router mlv1.TrafficRouter) error {
	// Unstructured, so neither kind needs to be in the manager's scheme.
	var gvks []schema.GroupVersionKind
	switch router {
	case mlv1.RouterGatewayAPI:
		gvks = append(gvks, gwv1.SchemeGroupVersion.WithKind("HTTPRoute"))
	case mlv1.RouterIstio:
		for _, kind := range []string{KindVirtualService, KindDestinationRule} {
			gvks = append(gvks, schema.GroupVersionKind{Group: IstioGroup, Version: r.istioVersion(), Kind: kind})
		}
	}
	for _, gvk := range gvks {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		u.SetName(md.Name)
		u.SetNamespace(md.Namespace)
		if err := r.deleteIfExists(ctx, u); err != nil {
			return fmt.Errorf("deleting the %s router's %s: %w", router, gvk.Kind, err)
		}
	}
	return nil
}

// deleteVersion deletes a drained version's HPA, Service and (unless
// retained) model cache PVC, and its Deployment last, so a failure part-way
// is retried on the next pass.
func (r *Reconciler) deleteVersion(ctx context.Context, md *mlv1.ModelDeployment, version string, dep *appsv1.Deployment) error {
	name := mlv1.VersionResourceName(md.Name, version)
	objs := []client.Object{
		&autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: md.Namespace}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: md.Namespace}},
	}
	if !md.Spec.RetainStorage() {
		objs = append(objs, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{
			Name: mlv1.ModelCacheClaimName(md.Name, version), Namespace: md.Namespace}})
	}
	objs = append(objs, dep)
	for _, o := range objs {
		if err := r.deleteIfExists(ctx, o); err != nil {
			return fmt.Errorf("deleting %T %s of removed version %s: %w", o, o.GetName(), version, err)
		}
	}
	return nil
}

// deletePods deletes the named pods, each only if it is still the pod that
// was evaluated (UID precondition).
func (r *Reconciler) deletePods(ctx context.Context, pods []corev1.Pod, names []string) error {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	for i := range pods {
		pod := &pods[i]
		if !want[pod.Name] {
			continue
		}
		err := r.Client.Delete(ctx, pod, client.Preconditions{UID: &pod.UID})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("deleting crash-looping pod %s: %w", pod.Name, err)
		}
	}
	return nil
}
