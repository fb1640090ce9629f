// Package modeldeployment reconciles ModelDeployments: one Deployment, HPA and
// Service per version, a stable Service, a ConfigMap, optional model cache
// PVCs and a traffic router (Gateway API HTTPRoute, Istio VirtualService plus
// DestinationRule, or replica counts behind the stable Service), with
// readiness-gated weights, health remediation and automated rollback.
package modeldeployment

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/controllers/namespaces"
	"github.com/ml-operator/ml-operator/internal/eventnote"
	"github.com/ml-operator/ml-operator/internal/integrations/prometheus"
	"github.com/ml-operator/ml-operator/internal/podsecurity"
	"github.com/ml-operator/ml-operator/internal/storageinit"
)

// FieldOwner is the server-side apply field manager of every child.
const FieldOwner = "ml-operator"

// ControllerName names the controller and its event reporter.
const ControllerName = "modeldeployment-controller"

// Reconciler reconciles ModelDeployments.
type Reconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
	// Clock is injected so tests can move time (health intervals, progress deadlines, drains).
	Clock clock.PassiveClock
	// Routers tells which router APIs the cluster serves.
	Routers *RouterDetector
	// Routing are the manager's traffic settings (default gateway, mesh).
	Routing RoutingDefaults
	// Metrics reads Prometheus; nil when the manager has no --prometheus-url.
	Metrics prometheus.Source
	// PodSecurity are the admin's security defaults of model server pods
	// (internal/podsecurity); the zero value sets no IDs and no HOME.
	PodSecurity podsecurity.Defaults
	// StorageInitializerImage is the image of the init container that
	// fetches a version's http(s):// or s3:// modelPath (the manager's
	// --storage-initializer-image); storageinit.DefaultImage when empty.
	StorageInitializerImage string

	// applied detects children changed behind the operator's back.
	applied appliedRecords
}

// +kubebuilder:rbac:groups=ml.example.com,resources=modeldeployments,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=ml.example.com,resources=modeldeployments/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=ml.example.com,resources=modeldeployments/finalizers,verbs=update
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=autoscaling,resources=horizontalpodautoscalers,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=services;configmaps;persistentvolumeclaims,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=httproutes,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=networking.istio.io,resources=virtualservices;destinationrules,verbs=get;list;watch;create;update;patch;delete

// Reconcile computes and applies one ModelDeployment's children, then writes
// its status once and emits the pass's events.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	md := &mlv1.ModelDeployment{}
	if err := r.Client.Get(ctx, req.NamespacedName, md); err != nil {
		if apierrors.IsNotFound(err) {
			forgetMetrics(req.Namespace, req.Name)
			r.applied.forget(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if !md.DeletionTimestamp.IsZero() {
		// Owner references let the garbage collector remove the children;
		// retained PVCs have none and stay.
		forgetMetrics(md.Namespace, md.Name)
		r.applied.forget(req.NamespacedName)
		return ctrl.Result{}, nil
	}

	if leave, err := r.leftToNamespaceDeletion(ctx, md); leave || err != nil {
		return ctrl.Result{}, err
	}

	p, err := r.reconcile(ctx, md)
	if refusedInTerminatingNamespace(ctx, err) {
		return ctrl.Result{}, nil
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	if !equality.Semantic.DeepEqual(md.Status, p.status) {
		// Optimistic lock: a status computed from a stale read (an old
		// rollback or rollout record) must not overwrite a newer one.
		patch := client.MergeFromWithOptions(md.DeepCopy(), client.MergeFromWithOptimisticLock{})
		md.Status = p.status
		if err := r.Client.Status().Patch(ctx, md, patch); err != nil {
			return ctrl.Result{}, fmt.Errorf("writing status: %w", err)
		}
	}
	for _, e := range p.events {
		r.Recorder.Eventf(md, nil, e.eventType, e.reason, e.action, "%s", eventnote.Fit(e.note))
	}
	if p.clearAction {
		if err := r.clearRolloutAction(ctx, md); err != nil {
			return ctrl.Result{}, err
		}
	}
	recordMetrics(md)
	for _, rb := range p.rollbacks {
		rollbacksCounter.WithLabelValues(md.Namespace, md.Namespace, md.Name, rb.Name, rb.Reason).Inc()
	}
	return ctrl.Result{RequeueAfter: p.requeueAfter}, nil
}

// clearRolloutAction removes a one-shot rollout annotation (promote,
// abort) the pass acted on, so it never acts on a later rollout. The
// optimistic lock keeps an annotation set again meanwhile.
func (r *Reconciler) clearRolloutAction(ctx context.Context, md *mlv1.ModelDeployment) error {
	patch := client.MergeFromWithOptions(md.DeepCopy(), client.MergeFromWithOptimisticLock{})
	delete(md.Annotations, mlv1.AnnotationRollout)
	if err := r.Client.Patch(ctx, md, patch); err != nil {
		return fmt.Errorf("removing annotation %s: %w", mlv1.AnnotationRollout, err)
	}
	return nil
}

// SetupWithManager registers the controller. Pods are not watched: they are
// evaluated every healthCheck.intervalSeconds, and Deployment status (which
// is watched) carries readiness. Namespaces are watched (metadata only) for
// the cache that tells a namespace being deleted (terminating.go).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, maxConcurrent int) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	b := namespaces.Watch(ctrl.NewControllerManagedBy(mgr)).
		Named("modeldeployment").
		For(&mlv1.ModelDeployment{}).
		Owns(&appsv1.Deployment{}).
		Owns(&autoscalingv2.HorizontalPodAutoscaler{}).
		Owns(&corev1.Service{}).
		Owns(&corev1.ConfigMap{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: maxConcurrent})
	if r.Routers != nil {
		// A router installed (or removed) later moves every auto
		// ModelDeployment at once.
		b = b.WatchesRawSource(source.Channel(r.Routers.Changes(), handler.EnqueueRequestsFromMapFunc(r.AutoRouted)))
	}
	return b.Complete(r)
}

// AutoRouted is a request for every ModelDeployment whose traffic.router is
// auto (or unset): the ones a change of the detected router moves.
func (r *Reconciler) AutoRouted(ctx context.Context, _ client.Object) []reconcile.Request {
	var list mlv1.ModelDeploymentList
	if err := r.Client.List(ctx, &list); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing ModelDeployments after a router change; each follows at its next health interval")
		return nil
	}
	var reqs []reconcile.Request
	for _, md := range list.Items {
		if rt := md.Spec.Traffic.Router; rt == "" || rt == mlv1.RouterAuto {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&md)})
		}
	}
	return reqs
}

// apply server-side-applies a child as FieldOwner, taking over conflicting fields.
func (r *Reconciler) apply(ctx context.Context, obj runtime.ApplyConfiguration) error {
	return r.Client.Apply(ctx, obj, client.FieldOwner(FieldOwner), client.ForceOwnership)
}

// deleteIfExists deletes obj, treating "already gone" (and "kind not
// installed") as success.
func (r *Reconciler) deleteIfExists(ctx context.Context, obj client.Object) error {
	err := r.Client.Delete(ctx, obj, client.PropagationPolicy("Background"))
	if err == nil || apierrors.IsNotFound(err) || isNoMatch(err) {
		return nil
	}
	return err
}

// sooner is the shorter of two positive requeue delays (a non-positive one
// is ignored).
func sooner(a, b time.Duration) time.Duration {
	if a <= 0 {
		return b
	}
	if b <= 0 {
		return a
	}
	return min(a, b)
}

// storageInitializerImage is the storage initializer's image.
func (r *Reconciler) storageInitializerImage() string {
	if r.StorageInitializerImage != "" {
		return r.StorageInitializerImage
	}
	return storageinit.DefaultImage
}
