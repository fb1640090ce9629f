// Package trainingjob runs TrainingJobs: one pod per rank, created directly,
// restarted as a gang, resumed from checkpoints, with progress in status.
//
// Reconcile (controller.go) reads the job, runs one pass and writes the
// status once. The pass (pass.go) is a short list of named steps, each a
// policy in a file of its own: observe.go and nodes.go see the pods and
// their nodes; finish.go, suspend.go and finalizers.go handle the states
// that need no decision about the gang; decide.go is the restart and
// disruption policy, restart.go records a restart and its backoff;
// children.go creates and deletes the children, which desired.go and env.go
// build; tracking.go and progress.go report to MLflow and from rank 0.
// status.go computes the conditions. The integrations the steps call
// (MLflow, progress scraping, pod groups) live in internal/integrations.
package trainingjob

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/controllers/namespaces"
	"github.com/ml-operator/ml-operator/internal/integrations/podgroups"
)

// +kubebuilder:rbac:groups=ml.example.com,resources=trainingjobs,verbs=get;list;watch;update;patch;delete
// +kubebuilder:rbac:groups=ml.example.com,resources=trainingjobs/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=ml.example.com,resources=trainingjobs/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;create;delete;deletecollection
// +kubebuilder:rbac:groups="",resources=pods/status,verbs=get
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups=storage.k8s.io,resources=storageclasses,verbs=get;list
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=scheduling.volcano.sh,resources=podgroups,verbs=get;list;create;delete
// +kubebuilder:rbac:groups=scheduling.x-k8s.io,resources=podgroups,verbs=get;list;create;delete
// +kubebuilder:rbac:groups=scheduling.k8s.io,resources=workloads;podgroups,verbs=get;list;create;delete

// Reconciler drives TrainingJobs from create to Completed or Failed.
type Reconciler struct {
	client    client.Client
	apiReader client.Reader
	recorder  events.EventRecorder
	cfg       Config
	expect    *expectations
	scrapes   *scrapeTracker
	// tracking backs off failing MLflow calls per job.
	tracking *scrapeTracker
	// batch holds back counters-only status writes.
	batch *statusBatch
	// stale skips passes over a job the cache shows from before the
	// controller's own last status write.
	stale *staleReads
	// podGroups creates a gang scheduler's PodGroup (or the native
	// Workload and PodGroup) for each attempt.
	podGroups podgroups.Ensurer
}

// NewReconciler builds the reconciler. c is the manager's (cached) client;
// apiReader reads the API server directly, for the rare uncached look-ups
// (full Node objects).
func NewReconciler(c client.Client, apiReader client.Reader, recorder events.EventRecorder, cfg Config) *Reconciler {
	cfg = cfg.withDefaults()
	return &Reconciler{
		client:    c,
		apiReader: apiReader,
		recorder:  recorder,
		cfg:       cfg,
		expect:    newExpectations(),
		scrapes:   newScrapeTracker(),
		tracking:  newScrapeTracker(),
		batch:     newStatusBatch(),
		stale:     newStaleReads(),
		podGroups: podgroups.NewClient(c, cfg.Clock.Now),
	}
}

// Setup registers the indexes and the reconciler with the manager.
func Setup(ctx context.Context, mgr ctrl.Manager, cfg Config) error {
	if err := SetupIndexes(ctx, mgr.GetFieldIndexer()); err != nil {
		return err
	}
	r := NewReconciler(mgr.GetClient(), mgr.GetAPIReader(), mgr.GetEventRecorder("trainingjob-controller"), cfg)
	return r.SetupWithManager(mgr)
}

// SetupWithManager watches TrainingJobs, their pods, Services, ConfigMaps
// and PVCs, the deletion and cordoning of Nodes that run their pods, and
// Namespaces (metadata only, for the cache: see terminating.go).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return namespaces.Watch(ctrl.NewControllerManagedBy(mgr)).
		Named("trainingjob").
		For(&mlv1.TrainingJob{}).
		Owns(&corev1.Pod{}).
		Owns(&corev1.Service{}).
		Owns(&corev1.ConfigMap{}).
		// A retained checkpoint PVC has no owner reference: map it by label.
		Watches(&corev1.PersistentVolumeClaim{}, handler.EnqueueRequestsFromMapFunc(jobOfLabel)).
		// Nodes are cached trimmed to their identity and cordon
		// (internal/manager's node transform).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(r.jobsOnNode),
			builder.WithPredicates(predicate.Funcs{
				// Heartbeats change nodes all the time; only a node going away
				// or being cordoned for a drain matters here. NotReady is seen
				// through the pods' Ready condition.
				CreateFunc:  func(event.CreateEvent) bool { return false },
				UpdateFunc:  func(e event.UpdateEvent) bool { return newlyCordoned(e.ObjectOld, e.ObjectNew) },
				DeleteFunc:  func(event.DeleteEvent) bool { return true },
				GenericFunc: func(event.GenericEvent) bool { return false },
			})).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.cfg.MaxConcurrentReconciles}).
		Complete(r)
}

// newlyCordoned reports a node update that cordoned it (cordonOf).
func newlyCordoned(old, updated client.Object) bool {
	o, ok1 := old.(*corev1.Node)
	n, ok2 := updated.(*corev1.Node)
	return ok1 && ok2 && cordonOf(n) != "" && cordonOf(o) == ""
}

// jobOfLabel maps a child to the job named in its LabelTrainingJob.
func jobOfLabel(_ context.Context, obj client.Object) []reconcile.Request {
	name := obj.GetLabels()[mlv1.LabelTrainingJob]
	if name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: name}}}
}

// jobsOnNode maps a node to the jobs with pods on it.
func (r *Reconciler) jobsOnNode(ctx context.Context, obj client.Object) []reconcile.Request {
	var pods corev1.PodList
	if err := r.client.List(ctx, &pods, client.MatchingFields{IndexPodNodeName: obj.GetName()},
		client.HasLabels{mlv1.LabelTrainingJob}); err != nil {
		return nil
	}
	seen := map[types.NamespacedName]bool{}
	var reqs []reconcile.Request
	for _, p := range pods.Items {
		key := types.NamespacedName{Namespace: p.Namespace, Name: p.Labels[mlv1.LabelTrainingJob]}
		if !seen[key] {
			seen[key] = true
			reqs = append(reqs, reconcile.Request{NamespacedName: key})
		}
	}
	return reqs
}

// Reconcile reads the job, runs one pass, writes the status once if it
// changed, and only then emits the pass's events and metrics.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	start := time.Now()
	defer func() { reconcileDuration.Observe(time.Since(start).Seconds()) }()

	job := &mlv1.TrainingJob{}
	if err := r.client.Get(ctx, req.NamespacedName, job); err != nil {
		if apierrors.IsNotFound(err) {
			forgetJobMetrics(req.NamespacedName)
			r.scrapes.forget(req.NamespacedName)
			r.tracking.forget(req.NamespacedName)
			r.batch.forget(req.NamespacedName)
			r.stale.forget(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	now := r.cfg.Clock.Now()
	if r.stale.behind(req.NamespacedName, job.ResourceVersion, now) {
		// The cache has not shown this controller's last status write yet
		// (a pod event came first): a pass now would decide from the status
		// before it, and its write would be refused as a conflict. The
		// write's own watch event reconciles the job again.
		return ctrl.Result{}, nil
	}
	orig := job.DeepCopy()
	p := &pass{job: job, now: now}
	err := r.reconcileUnlessNamespaceTerminating(ctx, p)
	if errors.Is(err, errNamespaceTerminating) {
		return ctrl.Result{}, nil
	}
	lost := false
	if err == nil {
		lost, err = r.writeStatus(ctx, p, orig)
	}
	r.emit(p, err == nil && !lost)
	if err != nil {
		reconcileErrors.WithLabelValues(job.Namespace, job.Namespace, errorType(err)).Inc()
		return ctrl.Result{}, err
	}
	if lost {
		// A newer version exists; its own event reconciles it.
		return ctrl.Result{}, nil
	}
	for _, f := range p.after {
		f()
	}
	if job.DeletionTimestamp == nil {
		recordJobGauges(job)
	}
	return p.result(), nil
}

// writeStatus writes the pass's status once, if it changed. A change that
// only moves the worker counters, in a pass with nothing to announce, waits
// up to StatusBatchPeriod so the gang's other pod events join it. lost
// reports a write that lost to a newer version of the job.
func (r *Reconciler) writeStatus(ctx context.Context, p *pass, orig *mlv1.TrainingJob) (lost bool, err error) {
	job := p.job
	key := client.ObjectKeyFromObject(job)
	if job.DeletionTimestamp != nil || equality.Semantic.DeepEqual(orig.Status, job.Status) {
		r.statusWritten(key)
		return false, nil
	}
	if len(p.events) == 0 && len(p.after) == 0 && onlyCountersMoved(&orig.Status, &job.Status) {
		if due, at := r.batch.due(key, p.now, r.cfg.StatusBatchPeriod); !due {
			p.requeue(at)
			return false, nil
		}
	}
	// Update carries the resourceVersion: a pass that decided from a stale
	// job must not overwrite counters a newer pass wrote. (A merge patch
	// would also drop the zero-valued, required worker counts.)
	read := job.ResourceVersion
	if err := r.client.Status().Update(ctx, job); err != nil {
		// What this pass scraped is lost with the write: the next pass
		// applies it again (the scrape stays pending), without scraping
		// before the interval is up.
		r.tracking.forget(key)
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, fmt.Errorf("writing status: %w", err)
	}
	// Both the version the pass read and the one its finalizer patch made
	// (when it made one) are now behind.
	r.stale.wrote(key, p.now, orig.ResourceVersion, read)
	r.statusWritten(key)
	return false, nil
}

// statusWritten notes that the stored status is the pass's: no batched
// change waits, and the last scrape is carried.
func (r *Reconciler) statusWritten(key types.NamespacedName) {
	r.batch.forget(key)
	r.scrapes.written(key)
}
