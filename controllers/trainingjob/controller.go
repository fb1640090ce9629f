// Package trainingjob runs TrainingJobs: one pod per rank, created directly,
// restarted as a gang, resumed from checkpoints, with progress in status.
package trainingjob

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/controllers/namespaces"
	"github.com/ml-operator/ml-operator/internal/integrations/mlflow"
	"github.com/ml-operator/ml-operator/internal/integrations/podgroups"
	"github.com/ml-operator/ml-operator/internal/integrations/progress"
)

// +kubebuilder:rbac:groups=ml.example.com,resources=trainingjobs,verbs=get;list;watch;update;patch;delete
// +kubebuilder:rbac:groups=ml.example.com,resources=trainingjobs/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=ml.example.com,resources=trainingjobs/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=pods/status,verbs=get
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=scheduling.volcano.sh,resources=podgroups,verbs=get;list;create;delete
// +kubebuilder:rbac:groups=scheduling.x-k8s.io,resources=podgroups,verbs=get;list;create;delete

// Config is the admin's configuration of the TrainingJob controller.
type Config struct {
	// DefaultImages are the worker images per framework for jobs that name none.
	DefaultImages map[string]string
	// GPUNodeSelector is added to the node selector of GPU workers.
	GPUNodeSelector map[string]string
	// Clock is the time source of every decision; tests inject a fake one.
	Clock clock.Clock
	// MaxConcurrentReconciles is the number of jobs reconciled at once.
	MaxConcurrentReconciles int
	// CreateParallelism bounds the pod creations in flight for one job.
	CreateParallelism int
	// BackoffBase and BackoffMax shape the wait before a restarted gang is
	// created: BackoffBase doubling per restart, capped at BackoffMax.
	BackoffBase, BackoffMax time.Duration
	// NodeLostGracePeriod is how long a NotReady node is waited for before its
	// pods count as disrupted and pods stuck Terminating on it are force-deleted.
	NodeLostGracePeriod time.Duration
	// ScrapeInterval is the minimum time between two reads of rank 0's metrics.
	ScrapeInterval time.Duration
	// ScrapeBackoffMax caps the wait between failing scrapes.
	ScrapeBackoffMax time.Duration
	// Scraper reads rank 0's progress.
	Scraper progress.Scraper
	// MLflow is the MLflow tracking client, for jobs with spec.tracking.mlflow.
	MLflow mlflow.Client
	// StatusBatchPeriod is how long a status change that only moves the
	// worker counters may wait, so a gang's pod events share one write.
	StatusBatchPeriod time.Duration
}

// Defaults of Config.
const (
	DefaultBackoffBase         = 10 * time.Second
	DefaultBackoffMax          = 5 * time.Minute
	DefaultNodeLostGracePeriod = 2 * time.Minute
	DefaultScrapeInterval      = 15 * time.Second
	DefaultScrapeBackoffMax    = 5 * time.Minute
	DefaultCreateParallelism   = 16
)

func (c Config) withDefaults() Config {
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.MaxConcurrentReconciles < 1 {
		c.MaxConcurrentReconciles = 1
	}
	if c.CreateParallelism < 1 {
		c.CreateParallelism = DefaultCreateParallelism
	}
	if c.BackoffBase <= 0 {
		c.BackoffBase = DefaultBackoffBase
	}
	if c.BackoffMax <= 0 {
		c.BackoffMax = DefaultBackoffMax
	}
	if c.NodeLostGracePeriod <= 0 {
		c.NodeLostGracePeriod = DefaultNodeLostGracePeriod
	}
	if c.ScrapeInterval <= 0 {
		c.ScrapeInterval = DefaultScrapeInterval
	}
	if c.ScrapeBackoffMax <= 0 {
		c.ScrapeBackoffMax = DefaultScrapeBackoffMax
	}
	if c.Scraper == nil {
		c.Scraper = progress.NewHTTPScraper()
	}
	if c.MLflow == nil {
		c.MLflow = mlflow.NewHTTPClient()
	}
	if c.StatusBatchPeriod <= 0 {
		c.StatusBatchPeriod = DefaultStatusBatchPeriod
	}
	return c
}

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
	// podGroups creates a gang scheduler's PodGroup for each attempt.
	podGroups podgroups.Ensurer
}

// NewReconciler builds the reconciler. c is the manager's (cached) client;
// apiReader reads the API server directly, for the rare uncached look-ups
// (full Node objects).
func NewReconciler(c client.Client, apiReader client.Reader, recorder events.EventRecorder, cfg Config) *Reconciler {
	return &Reconciler{
		client:    c,
		apiReader: apiReader,
		recorder:  recorder,
		cfg:       cfg.withDefaults(),
		expect:    newExpectations(),
		scrapes:   newScrapeTracker(),
		tracking:  newScrapeTracker(),
		batch:     newStatusBatch(),
		podGroups: podgroups.NewClient(c),
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
// and PVCs, the deletion of Nodes (metadata only) that run their pods, and
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
		WatchesMetadata(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(r.jobsOnNode),
			builder.WithPredicates(predicate.Funcs{
				// Heartbeats change nodes all the time; only a node going away
				// matters here. NotReady is seen through the pods' Ready condition.
				CreateFunc:  func(event.CreateEvent) bool { return false },
				UpdateFunc:  func(event.UpdateEvent) bool { return false },
				DeleteFunc:  func(event.DeleteEvent) bool { return true },
				GenericFunc: func(event.GenericEvent) bool { return false },
			})).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.cfg.MaxConcurrentReconciles}).
		Complete(r)
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

// pass is one reconcile of one job: what it decided to tell people and when
// it must look again.
type pass struct {
	job       *mlv1.TrainingJob
	now       time.Time
	events    []jobEvent
	after     []func()
	requeueAt time.Time
	// silent drops the pass's events: its namespace is being deleted and
	// the API server would refuse them.
	silent bool
}

// jobEvent is an event to emit on the job once its status is written.
type jobEvent struct {
	eventType, reason, note string
	// action marks an event about something done on the API server (pods
	// created, force-deleted), which a later pass does not do again: it is
	// emitted even when the pass's status write is lost or the pass fails.
	action bool
}

// event records an event about the status this pass writes: emitted only
// once that write lands (a lost pass is redone, and decides it again).
func (p *pass) event(eventType, reason, note string, args ...any) {
	p.events = append(p.events, jobEvent{eventType: eventType, reason: reason, note: fmt.Sprintf(note, args...)})
}

// actionEvent records an event about something this pass did.
func (p *pass) actionEvent(eventType, reason, note string, args ...any) {
	p.events = append(p.events, jobEvent{eventType: eventType, reason: reason, note: fmt.Sprintf(note, args...), action: true})
}

// emit sends the pass's events: all of them once its status write landed,
// and otherwise only those about actions done.
func (r *Reconciler) emit(p *pass, written bool) {
	if p.silent {
		return
	}
	for _, e := range p.events {
		if written || e.action {
			r.recorder.Eventf(p.job, nil, e.eventType, e.reason, e.reason, "%s", e.note)
		}
	}
}

// requeue asks for another pass at t (the earliest of all asks wins).
func (p *pass) requeue(t time.Time) {
	if t.IsZero() {
		return
	}
	if p.requeueAt.IsZero() || t.Before(p.requeueAt) {
		p.requeueAt = t
	}
}

func (p *pass) result() ctrl.Result {
	if p.requeueAt.IsZero() {
		return ctrl.Result{}
	}
	d := p.requeueAt.Sub(p.now)
	if d < time.Second {
		d = time.Second
	}
	return ctrl.Result{RequeueAfter: d}
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
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	orig := job.DeepCopy()
	p := &pass{job: job, now: r.cfg.Clock.Now()}
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
		reconcileErrors.WithLabelValues(job.Namespace).Inc()
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
	r.statusWritten(key)
	return false, nil
}

// statusWritten notes that the stored status is the pass's: no batched
// change waits, and the last scrape is carried.
func (r *Reconciler) statusWritten(key types.NamespacedName) {
	r.batch.forget(key)
	r.scrapes.written(key)
}

// reconcile is one pass over a job.
func (r *Reconciler) reconcile(ctx context.Context, p *pass) error {
	job := p.job
	if job.DeletionTimestamp != nil {
		if err := r.endDeletedMLflowRun(ctx, p); err != nil {
			return err
		}
		return r.releaseFinalizer(ctx, job)
	}
	st := &job.Status
	st.ObservedGeneration = job.Generation
	if total := job.Spec.TotalEpochs(); total > 0 {
		st.TotalEpochs = total
	}
	if st.State == "" {
		// A new job is first recorded as Pending (seen, nothing created);
		// that status write triggers the pass that creates its children.
		st.State = mlv1.StatePending
		if job.Spec.EffectiveImage(r.cfg.DefaultImages) != "" {
			return nil
		}
	}

	pods, err := r.listPods(ctx, job)
	if err != nil {
		return err
	}
	nodes, err := r.nodeInfos(ctx, pods)
	if err != nil {
		return err
	}
	// Whatever deleted them (a restart, suspend, cleanup or someone else),
	// pods stuck Terminating on a lost node must not block the job.
	if err := r.forceDeleteStuck(ctx, p, pods, nodes); err != nil {
		return err
	}
	if st.State.IsFinished() {
		return r.reconcileFinished(ctx, p, pods)
	}
	// Below, a pass that finishes the job only records it: cleanup happens in
	// the pass its status write triggers. Deleting pods first and then losing
	// the write would make the next pass read the deletions as a disruption.
	if job.Spec.EffectiveImage(r.cfg.DefaultImages) == "" {
		r.finish(p, mlv1.StateFailed, mlv1.ReasonInvalidSpec, fmt.Sprintf(
			"spec.image: Required value: no image given and the operator has no default image for framework %q",
			job.Spec.EffectiveFramework()))
		return nil
	}
	if d := job.Spec.RunPolicy.ActiveDeadlineSeconds; d != nil && st.StartTime != nil {
		deadline := st.StartTime.Add(time.Duration(*d) * time.Second)
		if !p.now.Before(deadline) {
			r.finish(p, mlv1.StateFailed, mlv1.ReasonDeadlineExceeded, fmt.Sprintf(
				"spec.runPolicy.activeDeadlineSeconds: the job ran longer than %ds (started %s)", *d, st.StartTime.UTC().Format(time.RFC3339)))
			return nil
		}
		p.requeue(deadline)
	}

	if err := r.ensureResources(ctx, p); err != nil {
		return err
	}
	if job.Spec.IsSuspended() {
		return r.reconcileSuspended(ctx, p, pods)
	}
	if st.State == mlv1.StateSuspended {
		for _, pod := range pods {
			// Resumed before the suspended gang was gone: wait for it, so the
			// new gang never meets the old one; its deletion requeues. A pod
			// neither deleted nor being deleted was created by a resume pass
			// whose status write failed: it belongs to the new gang.
			if pod.DeletionTimestamp != nil || r.expect.pendingDelete(job.UID, pod.UID, p.now) {
				return nil
			}
		}
		st.State = mlv1.StatePending
		setCondition(st, suspendedCondition(job, false), metav1.NewTime(p.now))
		p.event(corev1.EventTypeNormal, mlv1.EventResumed, "spec.suspend is false: recreating the gang (attempt %d)", st.Attempt())
	}

	attempt := st.Attempt()
	var current, ps, stale []*corev1.Pod
	for _, pod := range pods {
		switch {
		case attemptOf(pod) != attempt:
			stale = append(stale, pod)
		case isPS(pod):
			ps = append(ps, pod)
		default:
			current = append(current, pod)
		}
	}
	if err := r.deletePods(ctx, job, stale, p.now); err != nil {
		return err
	}

	// A rank created by an earlier pass that the cache does not show yet was
	// not deleted: it just has not arrived.
	seen := seenRanks(st)
	for rank := range seen {
		if r.expect.pendingCreate(job.UID, createKey(mlv1.WorkerPodName(job.Name, rank), attempt), p.now) {
			delete(seen, rank)
		}
	}
	d := decide(gangState{job: job, pods: current, ps: ps, nodes: nodes, seenRanks: seen,
		now: p.now, nodeGrace: r.cfg.NodeLostGracePeriod})
	switch d.kind {
	case complete:
		observeWorkers(st, current, job.Spec.EffectiveGPUResourceName())
		r.finish(p, mlv1.StateCompleted, d.reason, d.message)
		return nil
	case fail:
		observeWorkers(st, current, job.Spec.EffectiveGPUResourceName())
		r.finish(p, mlv1.StateFailed, d.reason, d.message)
		return nil
	case restartForFailure, restartForDisruption:
		// Only the decision is written in this pass. The status write moves
		// the job to the next attempt, and the pass it triggers deletes the
		// old gang: a failed write never leaves a deleted gang uncounted.
		r.restart(p, d)
		return nil
	}
	p.requeue(d.recheckAt)

	if len(stale) > 0 {
		// The old attempt's pods are still going; their deletion requeues.
		st.WorkerStatuses, st.Workers = nil, mlv1.WorkerCounts{}
		return nil
	}
	if st.State == mlv1.StateRestarting {
		if wait := r.backoffUntil(job); p.now.Before(wait) {
			p.requeue(wait)
			return nil
		}
	}
	inFlight, err := r.createMissing(ctx, p, current, ps, attempt)
	if err != nil {
		return err
	}
	// Count pods the API server has but the cache does not show yet, so the
	// pass that sees them arrive has nothing new to write.
	observeWorkers(st, append(current, inFlight...), job.Spec.EffectiveGPUResourceName())
	r.updateActiveState(p, current)
	r.ensureMLflowRun(ctx, p)
	if st.State == mlv1.StateRunning {
		r.scrapeProgress(ctx, p, current)
	}
	return nil
}

// updateActiveState moves a job that runs its gang between Initializing and
// Running, with the Running condition and event.
func (r *Reconciler) updateActiveState(p *pass, pods []*corev1.Pod) {
	job, st := p.job, &p.job.Status
	now := metav1.NewTime(p.now)
	prev := st.State
	st.State = activeState(st.Workers, job.Spec.EffectiveNumWorkers())
	if prev == mlv1.StateRestarting {
		cause := ""
		if c := meta.FindStatusCondition(st.Conditions, mlv1.TrainingJobRestarting); c != nil {
			cause = c.Reason + ": " + c.Message
		}
		setCondition(st, restartDoneCondition(job, cause), now)
	}
	if st.State == mlv1.StateRunning && prev != mlv1.StateRunning {
		p.event(corev1.EventTypeNormal, mlv1.EventRunning, "all %d ranks are running (attempt %d)", job.Spec.EffectiveNumWorkers(), st.Attempt())
	}
	setCondition(st, unschedulableCondition(runningCondition(job), pods), now)
}

// seenRanks are the ranks whose pod a previous pass observed in the current attempt.
func seenRanks(st *mlv1.TrainingJobStatus) map[int32]bool {
	seen := map[int32]bool{}
	for _, ws := range st.WorkerStatuses {
		if ws.Phase != "" {
			seen[ws.Rank] = true
		}
	}
	return seen
}

// backoffUntil is when the gang of the current attempt may be created: after
// a failure, the exponential backoff from the restart; after a disruption, at once.
func (r *Reconciler) backoffUntil(job *mlv1.TrainingJob) time.Time {
	st := &job.Status
	c := meta.FindStatusCondition(st.Conditions, mlv1.TrainingJobRestarting)
	if st.LastRestartTime == nil || c == nil || c.Reason != mlv1.ReasonWorkerFailed {
		return time.Time{}
	}
	return st.LastRestartTime.Add(backoffFor(st.Restarts, r.cfg.BackoffBase, r.cfg.BackoffMax))
}

// restart records a gang restart: the counters move the job to the next
// attempt, whose label no current pod carries.
func (r *Reconciler) restart(p *pass, d decision) {
	job, st := p.job, &p.job.Status
	kind := "disruption"
	if d.kind == restartForFailure {
		st.Restarts++
		kind = "failure"
	} else {
		st.Disruptions++
	}
	now := metav1.NewTime(p.now)
	st.LastRestartTime = &now
	st.State = mlv1.StateRestarting
	st.WorkerStatuses, st.Workers = nil, mlv1.WorkerCounts{}
	st.AllocatedGPUs, st.AllocatedNodes = 0, 0
	setCondition(st, restartingCondition(job, d.reason, d.message), now)
	setCondition(st, runningCondition(job), now)
	msg := fmt.Sprintf("gang restart for a %s: %s (restarts %d/%d, disruptions %d; next attempt %d)",
		kind, d.message, st.Restarts, job.Spec.EffectiveBackoffLimit(), st.Disruptions, st.Attempt())
	if d.kind == restartForFailure {
		msg += fmt.Sprintf(", backoff %s", backoffFor(st.Restarts, r.cfg.BackoffBase, r.cfg.BackoffMax))
	}
	eventType := corev1.EventTypeNormal
	if d.kind == restartForFailure {
		eventType = corev1.EventTypeWarning
	}
	p.event(eventType, d.reason, "%s", msg)
	ns, reason := job.Namespace, d.reason
	p.after = append(p.after, func() { jobRestarts.WithLabelValues(ns, reason).Inc() })
}

// finish moves the job to Completed or Failed.
func (r *Reconciler) finish(p *pass, state mlv1.TrainingJobState, reason, message string) {
	job, st := p.job, &p.job.Status
	now := metav1.NewTime(p.now)
	st.State = state
	st.CompletionTime = &now
	if state == mlv1.StateCompleted {
		setCondition(st, succeededCondition(job, reason, message), now)
		if st.TotalEpochs > 0 {
			st.CurrentEpoch = st.TotalEpochs
			st.Progress = "100%"
		}
		p.event(corev1.EventTypeNormal, mlv1.EventCompleted, "%s", message)
	} else {
		setCondition(st, failedCondition(job, reason, message), now)
		p.event(corev1.EventTypeWarning, mlv1.EventFailed, "%s: %s", reason, message)
	}
	if c := meta.FindStatusCondition(st.Conditions, mlv1.TrainingJobRestarting); c != nil && c.Status == metav1.ConditionTrue {
		setCondition(st, metav1.Condition{Type: mlv1.TrainingJobRestarting, Status: metav1.ConditionFalse,
			Reason: mlv1.ReasonJobFinished, Message: "the job finished", ObservedGeneration: job.Generation}, now)
	}
	setCondition(st, runningCondition(job), now)
	ns := job.Namespace
	var started time.Time
	if st.StartTime != nil {
		started = st.StartTime.Time
	}
	p.after = append(p.after, func() {
		if state == mlv1.StateCompleted {
			jobsCompleted.WithLabelValues(ns).Inc()
		} else {
			jobsFailed.WithLabelValues(ns, reason).Inc()
		}
		if !started.IsZero() {
			jobDuration.WithLabelValues(ns, string(state)).Observe(p.now.Sub(started).Seconds())
		}
	})
}

// reconcileFinished applies cleanPodPolicy and ttlSecondsAfterFinished.
func (r *Reconciler) reconcileFinished(ctx context.Context, p *pass, pods []*corev1.Pod) error {
	job := p.job
	r.endMLflowRun(ctx, p)
	var doomed []*corev1.Pod
	for _, pod := range pods {
		if finishedJobDeletes(job.Spec.EffectiveCleanPodPolicy(), pod) {
			doomed = append(doomed, pod)
		}
	}
	if err := r.deletePods(ctx, job, doomed, p.now); err != nil {
		return err
	}
	if ttl := job.Spec.RunPolicy.TTLSecondsAfterFinished; ttl != nil && job.Status.CompletionTime != nil {
		expiry := job.Status.CompletionTime.Add(time.Duration(*ttl) * time.Second)
		if p.now.Before(expiry) {
			p.requeue(expiry)
			return nil
		}
		log.FromContext(ctx).Info("deleting finished job after ttlSecondsAfterFinished", "ttl", *ttl)
		err := r.client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground),
			client.Preconditions{UID: &job.UID})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting job after its TTL: %w", err)
		}
	}
	return nil
}

// finishedJobDeletes reports whether a finished job's pod goes, under the
// job's cleanPodPolicy. Parameter servers never exit by themselves, so a
// live one goes under every policy, None included: kept, it would hold its
// node's resources for ever.
func finishedJobDeletes(policy mlv1.CleanPodPolicy, pod *corev1.Pod) bool {
	switch {
	case policy == mlv1.CleanPodPolicyAll:
		return true
	case policy == mlv1.CleanPodPolicyRunning, isPS(pod):
		return !isTerminal(pod)
	}
	return false
}

// reconcileSuspended deletes the gang and keeps everything else.
func (r *Reconciler) reconcileSuspended(ctx context.Context, p *pass, pods []*corev1.Pod) error {
	job, st := p.job, &p.job.Status
	if err := r.deletePods(ctx, job, pods, p.now); err != nil {
		return err
	}
	st.WorkerStatuses, st.Workers = nil, mlv1.WorkerCounts{}
	st.AllocatedGPUs, st.AllocatedNodes = 0, 0
	if st.State != mlv1.StateSuspended {
		now := metav1.NewTime(p.now)
		st.State = mlv1.StateSuspended
		setCondition(st, suspendedCondition(job, true), now)
		setCondition(st, runningCondition(job), now)
		p.event(corev1.EventTypeNormal, mlv1.EventSuspended, "spec.suspend is true: deleted %d pods; Service, ConfigMap and checkpoints kept", len(pods))
	}
	return nil
}

// listPods returns the pods the job controls, from the narrow cache.
func (r *Reconciler) listPods(ctx context.Context, job *mlv1.TrainingJob) ([]*corev1.Pod, error) {
	var list corev1.PodList
	if err := r.client.List(ctx, &list, client.InNamespace(job.Namespace),
		client.MatchingLabels{mlv1.LabelTrainingJob: job.Name, mlv1.LabelManagedBy: mlv1.ManagedByValue}); err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	pods := make([]*corev1.Pod, 0, len(list.Items))
	for i := range list.Items {
		pod := &list.Items[i]
		// A job recreated under the same name must not adopt its
		// predecessor's pods.
		if metav1.IsControlledBy(pod, job) {
			pods = append(pods, pod)
		}
	}
	r.expect.observe(job.UID, pods)
	return pods, nil
}

// ensureResources creates the Service, ConfigMap and checkpoint PVC when missing.
func (r *Reconciler) ensureResources(ctx context.Context, p *pass) error {
	job := p.job
	objs := []client.Object{desiredService(job), desiredConfigMap(job)}
	if pvc := desiredPVC(job); pvc != nil {
		objs = append(objs, pvc)
	}
	for _, obj := range objs {
		existing := obj.DeepCopyObject().(client.Object)
		err := r.client.Get(ctx, client.ObjectKeyFromObject(obj), existing)
		if err == nil {
			if pvc, ok := existing.(*corev1.PersistentVolumeClaim); ok {
				if err := r.syncPVCOwnership(ctx, job, pvc); err != nil {
					return err
				}
			}
			continue
		}
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("reading %T %s: %w", obj, obj.GetName(), err)
		}
		if err := r.client.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating %T %s: %w", obj, obj.GetName(), err)
		}
	}
	st := &job.Status
	if c := meta.FindStatusCondition(st.Conditions, mlv1.TrainingJobCreated); c == nil || c.Status != metav1.ConditionTrue {
		setCondition(st, createdCondition(job), metav1.NewTime(p.now))
		p.event(corev1.EventTypeNormal, mlv1.EventCreated, "%s", createdCondition(job).Message)
		ns := job.Namespace
		p.after = append(p.after, func() { jobsCreated.WithLabelValues(ns).Inc() })
	}
	return nil
}

// createMissing creates the pods of ranks that have none, in parallel with
// a bounded fan-out. It returns the worker pods that exist on the API server
// but not (yet) in the cache: those it created and those an earlier pass did.
func (r *Reconciler) createMissing(ctx context.Context, p *pass, current, ps []*corev1.Pod, attempt int32) ([]*corev1.Pod, error) {
	job := p.job
	have := map[string]bool{}
	for _, pod := range append(append([]*corev1.Pod(nil), current...), ps...) {
		have[pod.Name] = true
	}
	var want []*corev1.Pod
	for rank := int32(0); rank < job.Spec.EffectiveNumWorkers(); rank++ {
		want = append(want, desiredWorkerPod(job, rank, attempt, &r.cfg))
	}
	if job.Spec.EffectiveFramework() == mlv1.FrameworkTensorFlow {
		for i := int32(0); i < job.Spec.ParameterServers; i++ {
			want = append(want, desiredPSPod(job, i, attempt, &r.cfg))
		}
	}
	var missing, inFlight []*corev1.Pod
	for _, pod := range want {
		if have[pod.Name] {
			continue
		}
		if r.expect.pendingCreate(job.UID, createKey(pod.Name, attempt), p.now) {
			inFlight = append(inFlight, pod)
			continue
		}
		missing = append(missing, pod)
	}
	if len(missing) == 0 {
		return workersOnly(inFlight), nil
	}
	// A gang scheduler's PodGroup exists before the pods that name it.
	gang := desiredGang(job, attempt, want)
	scheduler, grouped, err := r.podGroups.Ensure(ctx, job.Spec.Scheduling.SchedulerName, gang)
	if err != nil {
		return workersOnly(inFlight), err
	}
	if grouped {
		for _, pod := range missing {
			scheduler.Join(pod, gang.Name)
		}
	}
	var mu sync.Mutex
	sem := make(chan struct{}, r.cfg.CreateParallelism)
	errs := make(chan error, len(missing))
	for _, pod := range missing {
		sem <- struct{}{}
		go func(pod *corev1.Pod) {
			defer func() { <-sem }()
			start := time.Now()
			err := r.client.Create(ctx, pod)
			podCreationLatency.Observe(time.Since(start).Seconds())
			switch {
			case err == nil:
				r.expect.created(job.UID, createKey(pod.Name, attempt), p.now)
				mu.Lock()
				inFlight = append(inFlight, pod)
				mu.Unlock()
			case apierrors.IsAlreadyExists(err):
				// Created by an earlier pass the cache has not shown yet.
			default:
				errs <- fmt.Errorf("creating pod %s: %w", pod.Name, err)
			}
		}(pod)
	}
	for i := 0; i < cap(sem); i++ {
		sem <- struct{}{}
	}
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	created := len(missing) - len(all)
	st := &job.Status
	if created > 0 {
		if st.StartTime == nil {
			now := metav1.NewTime(p.now)
			st.StartTime = &now
		}
		p.actionEvent(corev1.EventTypeNormal, mlv1.EventWorkersCreated, "created %d of %d pods (attempt %d)",
			created, len(want), attempt)
	}
	return workersOnly(inFlight), errors.Join(all...)
}

// workersOnly drops parameter-server pods.
func workersOnly(pods []*corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range pods {
		if !isPS(p) {
			out = append(out, p)
		}
	}
	return out
}

// forceDeleteStuck force-deletes pods stuck Terminating on a lost node once
// their own grace period has passed: no kubelet will ever confirm them.
func (r *Reconciler) forceDeleteStuck(ctx context.Context, p *pass, pods []*corev1.Pod, nodes map[string]nodeInfo) error {
	var errs []error
	var forced []string
	for _, pod := range pods {
		if pod.DeletionTimestamp == nil {
			continue
		}
		n, ok := nodes[pod.Spec.NodeName]
		if !ok {
			continue
		}
		lost, at := n.lost(p.now, r.cfg.NodeLostGracePeriod)
		if !lost {
			p.requeue(at)
			continue
		}
		if p.now.Before(pod.DeletionTimestamp.Time) {
			p.requeue(pod.DeletionTimestamp.Time)
			continue
		}
		err := r.client.Delete(ctx, pod, client.GracePeriodSeconds(0), client.Preconditions{UID: &pod.UID})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			errs = append(errs, fmt.Errorf("force-deleting pod %s on lost node %s: %w", pod.Name, pod.Spec.NodeName, err))
			continue
		}
		forced = append(forced, fmt.Sprintf("%s (node %s)", pod.Name, pod.Spec.NodeName))
	}
	if len(forced) > 0 {
		p.actionEvent(corev1.EventTypeWarning, mlv1.EventForceDeleted, "force-deleted %d pods stuck terminating on lost nodes: %s",
			len(forced), strings.Join(forced, ", "))
	}
	return errors.Join(errs...)
}

// deletePods deletes pods that are not already being deleted.
func (r *Reconciler) deletePods(ctx context.Context, job *mlv1.TrainingJob, pods []*corev1.Pod, now time.Time) error {
	var errs []error
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil || r.expect.pendingDelete(job.UID, pod.UID, now) {
			continue
		}
		err := r.client.Delete(ctx, pod, client.Preconditions{UID: &pod.UID})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			errs = append(errs, fmt.Errorf("deleting pod %s: %w", pod.Name, err))
			continue
		}
		r.expect.deleted(job.UID, pod.UID, now)
	}
	return errors.Join(errs...)
}

// nodeInfos looks up the nodes the pods are bound to. Presence comes from the
// metadata cache (confirmed uncached before a node is called gone); readiness
// is read uncached, and only for nodes whose running pods lost their Ready
// condition, which the node lifecycle controller does when a node goes NotReady.
func (r *Reconciler) nodeInfos(ctx context.Context, pods []*corev1.Pod) (map[string]nodeInfo, error) {
	suspect := map[string]bool{}
	names := map[string]bool{}
	for _, pod := range pods {
		if pod.Spec.NodeName == "" {
			continue
		}
		names[pod.Spec.NodeName] = true
		if pod.Status.Phase == corev1.PodRunning && podReadyFalse(pod) {
			suspect[pod.Spec.NodeName] = true
		}
	}
	infos := make(map[string]nodeInfo, len(names))
	for name := range names {
		meta := &metav1.PartialObjectMetadata{}
		meta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Node"))
		err := r.client.Get(ctx, client.ObjectKey{Name: name}, meta)
		if apierrors.IsNotFound(err) {
			node := &corev1.Node{}
			err = r.apiReader.Get(ctx, client.ObjectKey{Name: name}, node)
			if apierrors.IsNotFound(err) {
				infos[name] = nodeInfo{gone: true}
				continue
			}
			if err == nil {
				infos[name] = readinessOf(node)
				continue
			}
		}
		if err != nil {
			return nil, fmt.Errorf("reading node %s: %w", name, err)
		}
		if !suspect[name] {
			infos[name] = nodeInfo{}
			continue
		}
		node := &corev1.Node{}
		if err := r.apiReader.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
			if apierrors.IsNotFound(err) {
				infos[name] = nodeInfo{gone: true}
				continue
			}
			return nil, fmt.Errorf("reading node %s: %w", name, err)
		}
		infos[name] = readinessOf(node)
	}
	return infos, nil
}

// readinessOf is when a node's Ready condition stopped being True.
func readinessOf(node *corev1.Node) nodeInfo {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status != corev1.ConditionTrue {
			return nodeInfo{notReadySince: c.LastTransitionTime.Time}
		}
	}
	return nodeInfo{}
}

// podReadyFalse reports a pod whose Ready condition is False.
func podReadyFalse(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionFalse
		}
	}
	return false
}

// scrapeProgress reads rank 0's progress when it is due.
func (r *Reconciler) scrapeProgress(ctx context.Context, p *pass, current []*corev1.Pod) {
	job := p.job
	var rank0 *corev1.Pod
	for _, pod := range current {
		if rankOf(pod) == 0 {
			rank0 = pod
		}
	}
	if rank0 == nil || rank0.Status.PodIP == "" || rank0.Status.Phase != corev1.PodRunning {
		return
	}
	key := client.ObjectKeyFromObject(job)
	if ok, next := r.scrapes.due(key, p.now); !ok {
		p.requeue(next)
		// A scrape whose status write was lost is applied again.
		if res := r.scrapes.unwritten(key); res != nil && res.attempt == job.Status.Attempt() {
			r.applyScrape(ctx, p, key, *res)
		}
		return
	}
	url := fmt.Sprintf("http://%s%s", net.JoinHostPort(rank0.Status.PodIP, strconv.Itoa(int(job.Spec.EffectiveMetricsPort()))), job.Spec.EffectiveMetricsPath())
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	report, err := r.cfg.Scraper.Scrape(sctx, url)
	res := scrapeResult{report: report, err: err, url: url, at: p.now, attempt: job.Status.Attempt()}
	p.requeue(r.scrapes.record(key, p.now, err == nil, r.cfg.ScrapeInterval, r.cfg.ScrapeBackoffMax))
	r.scrapes.pend(key, res)
	r.applyScrape(ctx, p, key, res)
}

// applyScrape puts a scrape's outcome into the job's status.
func (r *Reconciler) applyScrape(ctx context.Context, p *pass, key types.NamespacedName, res scrapeResult) {
	job := p.job
	setCondition(&job.Status, progressCondition(job, res.err, res.url), metav1.NewTime(res.at))
	if res.err != nil {
		return
	}
	var base rateBaseline
	if e := res.report.Epoch; e != nil && !math.IsNaN(*e) {
		base = r.scrapes.baseline(key, res.attempt, clampEpoch(*e, job.Status.TotalEpochs), res.at)
	}
	if applyProgress(job, res.report, res.at, base) {
		r.logMLflowMetrics(ctx, p)
	}
}

// syncPVCOwnership makes the job own its checkpoint PVC exactly when
// checkpoints are not retained (retainOnDelete may change at any time).
func (r *Reconciler) syncPVCOwnership(ctx context.Context, job *mlv1.TrainingJob, pvc *corev1.PersistentVolumeClaim) error {
	owned := false
	var others []metav1.OwnerReference
	for _, ref := range pvc.OwnerReferences {
		if ref.UID == job.UID {
			owned = true
		} else {
			others = append(others, ref)
		}
	}
	want := !job.Spec.RetainCheckpoints()
	if owned == want {
		return nil
	}
	orig := pvc.DeepCopy()
	if want {
		if metav1.GetControllerOf(pvc) != nil {
			// Someone else controls it; never take it over.
			return nil
		}
		pvc.OwnerReferences = append(pvc.OwnerReferences, ownerRef(job))
	} else {
		pvc.OwnerReferences = others
	}
	if err := r.client.Patch(ctx, pvc, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("updating the owner of checkpoint PVC %s (retainOnDelete %t): %w", pvc.Name, !want, err)
	}
	return nil
}

// releaseFinalizer removes the cleanup finalizer, which this controller no
// longer needs: the garbage collector removes every child through owner
// references, and a retained PVC has none. Jobs that still carry it (set by
// an earlier version) must not hang in deletion.
func (r *Reconciler) releaseFinalizer(ctx context.Context, job *mlv1.TrainingJob) error {
	if !controllerutil.ContainsFinalizer(job, mlv1.TrainingJobFinalizer) {
		return nil
	}
	orig := job.DeepCopy()
	controllerutil.RemoveFinalizer(job, mlv1.TrainingJobFinalizer)
	if err := r.client.Patch(ctx, job, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("removing finalizer: %w", err)
	}
	return nil
}
