package trainingjob

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/internal/integrations/podgroups"
	"github.com/ml-operator/ml-operator/internal/refusal"
)

// ensureResources creates the Service, ConfigMap and checkpoint PVC when
// missing. A create the API server refuses (quota, another admission
// webhook, an invalid object) ends the pass: the job shows the refusal in
// Created=False and a FailedCreate event, and is looked at again after
// backoffBase.
func (r *Reconciler) ensureResources(ctx context.Context, p *pass) (refused bool, err error) {
	job := p.job
	objs := []client.Object{desiredService(job), desiredConfigMap(job)}
	if job.Spec.UsesCheckpointPVC() {
		// Built once it is known to be missing: its access modes depend
		// on its StorageClass, read only then.
		objs = append(objs, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{
			Name: mlv1.CheckpointPVCName(job.Name), Namespace: job.Namespace}})
	}
	for _, obj := range objs {
		existing := obj.DeepCopyObject().(client.Object)
		err := r.client.Get(ctx, client.ObjectKeyFromObject(obj), existing)
		if err == nil {
			if pvc, ok := existing.(*corev1.PersistentVolumeClaim); ok {
				if err := r.syncPVCOwnership(ctx, job, pvc); err != nil {
					return false, err
				}
				p.shareNode = job.Spec.RanksShareANode(pvc.Spec.AccessModes)
			}
			continue
		}
		if !apierrors.IsNotFound(err) {
			return false, fmt.Errorf("reading %T %s: %w", obj, obj.GetName(), err)
		}
		if _, ok := obj.(*corev1.PersistentVolumeClaim); ok {
			shared, err := r.checkpointClassShared(ctx, &job.Spec)
			if err != nil {
				return false, err
			}
			pvc := desiredPVC(job, shared)
			p.shareNode = job.Spec.RanksShareANode(pvc.Spec.AccessModes)
			obj = pvc
		}
		err = r.client.Create(ctx, obj)
		switch {
		case err == nil, apierrors.IsAlreadyExists(err):
		case refusal.Is(err):
			r.refuse(p, err)
			setCondition(&job.Status, createRefusedCondition(job, err), metav1.NewTime(p.now))
			return true, nil
		default:
			return false, fmt.Errorf("creating %T %s: %w", obj, obj.GetName(), err)
		}
	}
	st := &job.Status
	if c := meta.FindStatusCondition(st.Conditions, mlv1.TrainingJobCreated); c == nil || c.Status != metav1.ConditionTrue {
		setCondition(st, createdCondition(job), metav1.NewTime(p.now))
		p.event(corev1.EventTypeNormal, mlv1.EventCreated, "%s", createdCondition(job).Message)
		ns := job.Namespace
		p.after = append(p.after, func() { jobsCreated.WithLabelValues(ns, ns).Inc() })
	}
	return false, nil
}

// refuse makes a refused create visible as the Job controller does, with a
// Warning FailedCreate event quoting the API server, and looks again after
// backoffBase.
func (r *Reconciler) refuse(p *pass, err error, more ...error) {
	note := refusal.Note(err)
	if len(more) > 0 {
		note += fmt.Sprintf(" (and %d more pods refused)", len(more))
	}
	p.actionEvent(corev1.EventTypeWarning, mlv1.EventFailedCreate, "%s", note)
	p.requeue(p.now.Add(r.cfg.BackoffBase))
}

// runGang keeps the current attempt's gang going. Once the older
// attempts' pods are gone (names repeat across attempts, and old and new
// ranks must never meet) and, after a failure, the backoff has passed, it
// creates the missing pods; then it reports the gang's state, and tracks
// its MLflow run and progress.
func (r *Reconciler) runGang(ctx context.Context, p *pass, g attemptPods) error {
	job, st := p.job, &p.job.Status
	if len(g.stale) > 0 {
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
	inFlight, err := r.createMissing(ctx, p, g.current, g.ps, g.attempt)
	if err != nil {
		return err
	}
	// Count pods the API server has but the cache does not show yet, so the
	// pass that sees them arrive has nothing new to write.
	markPlacementStart(st, len(g.current)+len(g.ps)+len(inFlight), p.now)
	observeWorkers(st, append(g.current, inFlight...), job.Spec.EffectiveGPUResourceName())
	st.WorldSize = job.ObservedWorldSize()
	r.updateActiveState(p, g.current)
	r.ensureMLflowRun(ctx, p)
	if st.State == mlv1.StateRunning {
		r.scrapeProgress(ctx, p, g.current)
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
	for rank := int32(0); rank < job.AttemptWorkers(); rank++ {
		want = append(want, desiredWorkerPod(job, rank, attempt, &r.cfg, p.shareNode))
	}
	if job.Spec.EffectiveFramework() == mlv1.FrameworkTensorFlow {
		for i := int32(0); i < job.Spec.ParameterServers; i++ {
			want = append(want, desiredPSPod(job, i, attempt, &r.cfg, p.shareNode))
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
	// A gang scheduler's PodGroup exists before the pods that name it. Under
	// Kueue (a queue name) the default scheduler gets no native group: Kueue
	// admits the gang (status.gangPlacement Kueue).
	gang := desiredGang(job, attempt, want)
	var scheduler podgroups.Scheduler
	grouped := false
	if job.Spec.Scheduling.QueueName == "" || !podgroups.IsDefaultScheduler(job.Spec.Scheduling.SchedulerName) {
		var err error
		if scheduler, grouped, err = r.podGroups.Ensure(ctx, job.Spec.Scheduling.SchedulerName, gang); err != nil {
			return workersOnly(inFlight), err
		}
	}
	if grouped {
		for _, pod := range missing {
			scheduler.Join(pod, gang.Name)
		}
	}
	var mu sync.Mutex
	sem := make(chan struct{}, r.cfg.CreateParallelism)
	errs := make(chan error, len(missing))
	refusals := make([]error, len(missing))
	for i, pod := range missing {
		sem <- struct{}{}
		go func(i int, pod *corev1.Pod) {
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
			case refusal.Is(err):
				refusals[i] = err
			default:
				errs <- fmt.Errorf("creating pod %s: %w", pod.Name, err)
			}
		}(i, pod)
	}
	for i := 0; i < cap(sem); i++ {
		sem <- struct{}{}
	}
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	var refused []error
	for _, err := range refusals {
		if err != nil {
			refused = append(refused, err)
		}
	}
	if len(refused) > 0 {
		// The lowest rank's refusal names the cause; the others are
		// almost always the same.
		r.refuse(p, refused[0], refused[1:]...)
		p.refusedPods = refused[0].Error()
	}
	created := len(missing) - len(all) - len(refused)
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

// deleteStale deletes the pods of earlier attempts, each with its own grace
// period (terminationGracePeriodSeconds), in one request: a
// DeleteCollection of the job's pods whose attempt label is not the
// current attempt's. A gang restart then costs one delete however many
// ranks it has (docs/benchmarks.md, "Restart"), not one per pod at the
// client's rate limit. The request is sent only while some stale pod is
// neither terminating nor deleted by an earlier pass the cache has not
// caught up with; pods of the current attempt never match it.
func (r *Reconciler) deleteStale(ctx context.Context, job *mlv1.TrainingJob, g attemptPods, now time.Time) error {
	var doomed []*corev1.Pod
	for _, pod := range g.stale {
		if pod.DeletionTimestamp == nil && !r.expect.pendingDelete(job.UID, pod.UID, now) {
			doomed = append(doomed, pod)
		}
	}
	if len(doomed) == 0 {
		return nil
	}
	sel, err := labels.Parse(fmt.Sprintf("%s=%s,%s=%s,%s!=%d",
		mlv1.LabelTrainingJob, job.Name, mlv1.LabelManagedBy, mlv1.ManagedByValue, mlv1.LabelRestartAttempt, g.attempt))
	if err != nil {
		return fmt.Errorf("selecting the pods of earlier attempts: %w", err)
	}
	if err := r.client.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(job.Namespace),
		client.MatchingLabelsSelector{Selector: sel}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting the %d pods of earlier attempts (%s): %w", len(doomed), sel, err)
	}
	for _, pod := range doomed {
		r.expect.deleted(job.UID, pod.UID, now)
	}
	return nil
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

// checkpointClassShared reports whether the StorageClass the job's
// checkpoint claim will use serves volumes many nodes may mount
// (mlv1.StorageClassReadWriteMany). It is read, uncached, only when the
// claim is about to be created and its access mode is the operator's to
// choose: the claim's modes never change afterwards. No class (a claim
// with storageClassName "", a named class that does not exist, no default
// class) is not shared: such a claim binds to whatever the admin provides,
// and ReadWriteOnce asks the least of it.
func (r *Reconciler) checkpointClassShared(ctx context.Context, spec *mlv1.TrainingJobSpec) (bool, error) {
	if len(spec.Checkpoint.Storage.AccessModes) > 0 || spec.GangSize() < 2 {
		return false, nil
	}
	var class *storagev1.StorageClass
	if name := spec.Checkpoint.Storage.StorageClassName; name != nil {
		if *name == "" {
			return false, nil
		}
		class = &storagev1.StorageClass{}
		if err := r.apiReader.Get(ctx, client.ObjectKey{Name: *name}, class); err != nil {
			if apierrors.IsNotFound(err) {
				return false, nil
			}
			return false, fmt.Errorf("reading StorageClass %s: %w", *name, err)
		}
	} else {
		list := &storagev1.StorageClassList{}
		if err := r.apiReader.List(ctx, list); err != nil {
			return false, fmt.Errorf("listing StorageClasses for the default one: %w", err)
		}
		if class = defaultStorageClass(list.Items); class == nil {
			return false, nil
		}
	}
	return mlv1.StorageClassReadWriteMany(class.Provisioner, class.Annotations), nil
}

// defaultStorageClass is the class a claim without storageClassName gets:
// of those marked default, the newest (then the first by name), as the API
// server's DefaultStorageClass admission picks it; nil when none is.
func defaultStorageClass(classes []storagev1.StorageClass) *storagev1.StorageClass {
	var best *storagev1.StorageClass
	for i := range classes {
		c := &classes[i]
		if c.Annotations["storageclass.kubernetes.io/is-default-class"] != "true" &&
			c.Annotations["storageclass.beta.kubernetes.io/is-default-class"] != "true" {
			continue
		}
		if best == nil || c.CreationTimestamp.After(best.CreationTimestamp.Time) ||
			(c.CreationTimestamp.Equal(&best.CreationTimestamp) && c.Name < best.Name) {
			best = c
		}
	}
	return best
}
