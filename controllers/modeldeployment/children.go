package modeldeployment

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/internal/integrations/prometheus"
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

func (r *Reconciler) istioVersion() string {
	if r.Routers == nil {
		return defaultIstioVersion
	}
	return r.Routers.Routers().IstioVersion
}

// aggregateMetrics sums the versions' rates and weights their error rates and
// latencies by traffic. Nil when nothing was read.
func aggregateMetrics(ms []prometheus.VersionMetrics) *mlv1.ServingMetrics {
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
func (r *Reconciler) applyChildren(ctx context.Context, s *passState) error {
	md, spec, obs, router := s.md, &s.md.Spec, s.obs, s.router
	cm := desiredConfigMap(md)
	if _, err := r.applyChild(ctx, md, cm, &corev1.ConfigMap{}, func(a map[string]string) { cm.WithAnnotations(a) }); err != nil {
		return fmt.Errorf("applying ConfigMap: %w", err)
	}
	minReplicas := max(1, spec.Scaling.MinReplicas)
	maxReplicas := max(minReplicas, spec.EffectiveMaxReplicas())
	for i, v := range spec.Versions {
		if spec.Storage != nil {
			pvc := desiredModelCacheClaim(md, v.Name, obs.claims[v.Name])
			if _, err := r.applyChild(ctx, md, pvc, &corev1.PersistentVolumeClaim{}, func(a map[string]string) { pvc.WithAnnotations(a) }); err != nil {
				return fmt.Errorf("applying model cache PVC of version %s: %w", v.Name, err)
			}
		}
		// The HPA owns the replicas; only a version that router "service"
		// sizes to zero has its replicas set by the operator, and no HPA.
		var replicas *int32
		lo, hi := minReplicas, maxReplicas
		if router == mlv1.RouterService {
			var ok bool
			if lo, hi, ok = serviceModeBounds(weightOf(s.sizing, v.Name), minReplicas, maxReplicas); !ok {
				replicas = ptr.To[int32](0)
			}
		}
		sizedToZero := replicas != nil
		if dep := obs.deployments[v.Name]; !sizedToZero && dep != nil && ptr.Deref(dep.Spec.Replicas, 1) == 0 {
			// An HPA does not scale a Deployment up from zero (it is disabled
			// there), so a version coming back from zero (a drain or a zero
			// weight) is set to one replica once; the HPA takes it from there.
			replicas = ptr.To[int32](1)
		}
		d, err := desiredDeployment(md, v, replicas, r.PodSecurity, r.storageInitializerImage())
		if err != nil {
			return err
		}
		applied, err := r.applyChild(ctx, md, d, &appsv1.Deployment{}, func(a map[string]string) { d.WithAnnotations(a) })
		if err != nil {
			return fmt.Errorf("applying Deployment of version %s: %w", v.Name, err)
		}
		if obs.deployments[v.Name] == nil {
			s.normal(mlv1.EventCreated, "Create", "created Deployment %s for version %s", *d.Name, v.Name)
		}
		if applied && d.Spec != nil && d.Spec.Replicas != nil {
			// The apply answers with the live object: the replicas the HPA
			// (or the API default) decided.
			s.results[i].desired = *d.Spec.Replicas
		}
		svc := desiredVersionService(md, v.Name)
		if _, err := r.applyChild(ctx, md, svc, &corev1.Service{}, func(a map[string]string) { svc.WithAnnotations(a) }); err != nil {
			return fmt.Errorf("applying Service of version %s: %w", v.Name, err)
		}
		if sizedToZero {
			hpa := &autoscalingv2.HorizontalPodAutoscaler{}
			err := r.Client.Get(ctx, client.ObjectKey{Namespace: md.Namespace, Name: mlv1.VersionResourceName(md.Name, v.Name)}, hpa)
			if err == nil {
				err = r.deleteIfExists(ctx, hpa)
			}
			if err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("deleting HPA of version %s: %w", v.Name, err)
			}
			continue
		}
		hpa, err := desiredHPA(md, v.Name, lo, hi)
		if err != nil {
			return err
		}
		if _, err := r.applyChild(ctx, md, hpa, &autoscalingv2.HorizontalPodAutoscaler{}, func(a map[string]string) { hpa.WithAnnotations(a) }); err != nil {
			return fmt.Errorf("applying HPA of version %s: %w", v.Name, err)
		}
	}
	stable := desiredStableService(md)
	if _, err := r.applyChild(ctx, md, stable, &corev1.Service{}, func(a map[string]string) { stable.WithAnnotations(a) }); err != nil {
		return fmt.Errorf("applying stable Service: %w", err)
	}

	if !s.route.write {
		return nil
	}
	switch router {
	case mlv1.RouterGatewayAPI:
		route, err := toUnstructured(desiredHTTPRoute(md, s.route.gateway, s.routeWeights))
		if err != nil {
			return err
		}
		if err := r.apply(ctx, client.ApplyConfigurationFromUnstructured(route)); err != nil {
			return fmt.Errorf("applying HTTPRoute (traffic.router gatewayapi): %w", err)
		}
	case mlv1.RouterIstio:
		ws := s.routeWeights
		var sum int32
		for _, w := range ws {
			sum += w.weight
		}
		if sum == 0 {
			// Nothing is Ready: Envoy refuses an all-zero split, so route as
			// requested until a version becomes Ready.
			ws = append(append([]versionWeight(nil), s.sizing...), s.routeWeights[len(s.sizing):]...)
		}
		iv := r.istioVersion()
		for _, u := range []*unstructured.Unstructured{desiredDestinationRule(md, iv, ws), desiredVirtualService(md, iv, s.route.gateway, ws)} {
			if err := r.apply(ctx, client.ApplyConfigurationFromUnstructured(u)); err != nil {
				return fmt.Errorf("applying %s (traffic.router istio): %w", u.GetKind(), err)
			}
		}
	}
	return nil
}

// AnnotationApplyHash on a child holds the hash of the apply configuration the
// operator last applied to it.
const AnnotationApplyHash = "ml.example.com/apply-hash"

// appliable is an apply configuration that knows its name.
type appliable interface {
	runtime.ApplyConfiguration
	GetName() *string
	GetNamespace() *string
}

// applyChild server-side-applies ac unless the live object (read into live,
// from the cache in the manager) already carries the hash of this exact
// apply configuration and nobody has changed it since the operator applied
// it (appliedRecords). A pass runs on every health interval; re-sending
// unchanged children would spend the client's rate budget on no-op writes,
// while an edit others make to a child (its generation or resourceVersion
// moves, and the watch on children starts a pass) is corrected at once.
// annotate adds the hash to ac.
func (r *Reconciler) applyChild(ctx context.Context, md *mlv1.ModelDeployment, ac appliable, live client.Object, annotate func(map[string]string)) (bool, error) {
	data, err := json.Marshal(ac)
	if err != nil {
		return false, err
	}
	h := fnv.New64a()
	_, _ = h.Write(data)
	hash := fmt.Sprintf("%016x", h.Sum64())
	owner := client.ObjectKeyFromObject(md)
	key := client.ObjectKey{Namespace: ptr.Deref(ac.GetNamespace(), ""), Name: ptr.Deref(ac.GetName(), "")}
	switch err := r.Client.Get(ctx, key, live); {
	case err == nil && live.GetAnnotations()[AnnotationApplyHash] == hash && r.applied.unchanged(owner, live, hash):
		return false, nil
	case err != nil && !apierrors.IsNotFound(err):
		return false, err
	}
	annotate(map[string]string{AnnotationApplyHash: hash})
	if err := r.apply(ctx, ac); err != nil {
		return true, err
	}
	// client.Apply decodes the API server's answer into ac.
	r.applied.record(owner, ac, live, hash)
	return true, nil
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

// scaleToZero removes a draining version's HPA and sets its Deployment's
// replicas to 0 (a merge patch: the pod template stays as applied).
func (r *Reconciler) scaleToZero(ctx context.Context, md *mlv1.ModelDeployment, dep *appsv1.Deployment) error {
	hpa := &autoscalingv2.HorizontalPodAutoscaler{}
	err := r.Client.Get(ctx, client.ObjectKeyFromObject(dep), hpa)
	if err == nil {
		err = r.deleteIfExists(ctx, hpa)
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting the HPA of draining Deployment %s: %w", dep.Name, err)
	}
	if dep.Spec.Replicas != nil && *dep.Spec.Replicas == 0 {
		return nil
	}
	patch := client.MergeFrom(dep.DeepCopy())
	dep.Spec.Replicas = ptr.To[int32](0)
	if err := r.Client.Patch(ctx, dep, patch, client.FieldOwner(FieldOwner)); err != nil {
		return fmt.Errorf("scaling draining Deployment %s to zero: %w", dep.Name, err)
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
