package trainingjob

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/internal/integrations/podgroups"
	"github.com/ml-operator/ml-operator/internal/podsecurity"
)

// observeWorkers fills workers, workerStatuses, allocatedGPUs and
// allocatedNodes from the current attempt's pods.
func observeWorkers(st *mlv1.TrainingJobStatus, pods []*corev1.Pod, gpuName corev1.ResourceName) {
	st.Workers = workerCounts(pods)
	st.WorkerStatuses = workerStatuses(pods)
	st.AllocatedGPUs, st.AllocatedNodes = allocation(pods, gpuName)
}

// workerCounts counts pods by phase; pods being deleted are not counted.
func workerCounts(pods []*corev1.Pod) mlv1.WorkerCounts {
	var c mlv1.WorkerCounts
	for _, p := range pods {
		switch p.Status.Phase {
		case corev1.PodRunning:
			c.Active++
		case corev1.PodSucceeded:
			c.Succeeded++
		case corev1.PodFailed:
			c.Failed++
		default:
			c.Pending++
		}
	}
	return c
}

// workerStatuses lists one entry per rank, ordered by rank.
func workerStatuses(pods []*corev1.Pod) []mlv1.WorkerStatus {
	if len(pods) == 0 {
		return nil
	}
	out := make([]mlv1.WorkerStatus, 0, len(pods))
	for _, p := range sortedByRank(pods) {
		if rankOf(p) < 0 {
			continue
		}
		phase := p.Status.Phase
		if phase == "" {
			phase = corev1.PodPending
		}
		ws := mlv1.WorkerStatus{Rank: rankOf(p), PodName: p.Name, Phase: phase, Node: p.Spec.NodeName}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name == TrainerContainerName {
				ws.RestartCount = cs.RestartCount
			}
		}
		out = append(out, ws)
	}
	return out
}

// allocation is the GPUs held by pods bound to a node and not finished, and
// the number of distinct nodes they run on.
func allocation(pods []*corev1.Pod, gpuName corev1.ResourceName) (gpus, nodes int32) {
	seen := map[string]bool{}
	for _, p := range pods {
		if p.Spec.NodeName == "" || isTerminal(p) {
			continue
		}
		seen[p.Spec.NodeName] = true
		for _, c := range p.Spec.Containers {
			if q, ok := c.Resources.Limits[gpuName]; ok {
				gpus += int32(q.Value())
			}
		}
	}
	return gpus, int32(len(seen))
}

// activeState is the state of a job that is neither finished, suspended nor
// waiting to restart: Running once every rank runs, else Initializing.
func activeState(c mlv1.WorkerCounts, numWorkers int32) mlv1.TrainingJobState {
	if c.Active+c.Succeeded >= numWorkers && c.Active > 0 {
		return mlv1.StateRunning
	}
	return mlv1.StateInitializing
}

// createdCondition is Created=True once the job's Service, ConfigMap and PVC exist.
func createdCondition(job *mlv1.TrainingJob) metav1.Condition {
	msg := fmt.Sprintf("Service %s and ConfigMap %s created", mlv1.WorkersServiceName(job.Name), mlv1.ConfigMapName(job.Name))
	if job.Spec.UsesCheckpointPVC() {
		msg += fmt.Sprintf(", checkpoint PVC %s", mlv1.CheckpointPVCName(job.Name))
	}
	return metav1.Condition{Type: mlv1.TrainingJobCreated, Status: metav1.ConditionTrue,
		Reason: mlv1.ReasonResourcesCreated, Message: msg, ObservedGeneration: job.Generation}
}

// createRefusedCondition is Created=False when the API server refused to
// create the Service, ConfigMap or checkpoint PVC, quoting it.
func createRefusedCondition(job *mlv1.TrainingJob, err error) metav1.Condition {
	return metav1.Condition{Type: mlv1.TrainingJobCreated, Status: metav1.ConditionFalse,
		Reason: mlv1.ReasonFailedCreate, Message: err.Error(), ObservedGeneration: job.Generation}
}

// runningCondition is Running=True when every rank runs, else False with why.
func runningCondition(job *mlv1.TrainingJob) metav1.Condition {
	st := &job.Status
	c := metav1.Condition{Type: mlv1.TrainingJobRunning, Status: metav1.ConditionFalse, ObservedGeneration: job.Generation}
	want := job.AttemptWorkers()
	switch st.State {
	case mlv1.StateRunning:
		c.Status, c.Reason = metav1.ConditionTrue, mlv1.ReasonAllWorkersRunning
		c.Message = fmt.Sprintf("all %d ranks are running (attempt %d)", want, st.Attempt())
	case mlv1.StateCompleted, mlv1.StateFailed:
		c.Reason, c.Message = mlv1.ReasonJobFinished, fmt.Sprintf("the job is %s", st.State)
	case mlv1.StateSuspended:
		c.Reason, c.Message = mlv1.ReasonSuspended, "spec.suspend is true; the workers are deleted"
	case mlv1.StateRestarting:
		c.Reason, c.Message = mlv1.TrainingJobRestarting, "the gang is restarting"
	default:
		c.Reason = mlv1.ReasonWorkersPending
		c.Message = fmt.Sprintf("%d of %d ranks running, %d pending", st.Workers.Active, want, st.Workers.Pending)
	}
	return c
}

// unschedulableCondition turns a Running=False WorkersPending condition into
// Running=False Unschedulable when a rank's pod has PodScheduled=False with
// reason Unschedulable, carrying the scheduler's message and naming the
// lowest such rank. Under native gang scheduling (placement Native) the
// ranks the scheduler could place wait with the GangScheduling plugin's
// message, which says nothing of why: the lowest rank with another message
// (the one that did not fit) is named instead when there is one. Any other
// condition is returned unchanged.
func unschedulableCondition(c metav1.Condition, pods []*corev1.Pod, placement mlv1.GangPlacement) metav1.Condition {
	if c.Status != metav1.ConditionFalse || c.Reason != mlv1.ReasonWorkersPending {
		return c
	}
	var cause *corev1.Pod
	var why string
	for _, p := range sortedByRank(pods) {
		if p.Spec.NodeName != "" || p.DeletionTimestamp != nil {
			continue
		}
		for _, pc := range p.Status.Conditions {
			if pc.Type == corev1.PodScheduled && pc.Status == corev1.ConditionFalse && pc.Reason == corev1.PodReasonUnschedulable {
				if cause == nil || (placement == mlv1.GangPlacementNative && podgroups.IsNativeGangWaiting(why) &&
					!podgroups.IsNativeGangWaiting(pc.Message)) {
					cause, why = p, pc.Message
				}
			}
		}
	}
	if cause == nil {
		return c
	}
	c.Reason = mlv1.ReasonUnschedulable
	c.Message = fmt.Sprintf("%s; rank %d (pod %s) is unschedulable: %s", c.Message, rankOf(cause), cause.Name, why)
	if placement == mlv1.GangPlacementNative {
		c.Message += "; native gang scheduling binds no pod of the gang until every pod fits"
	}
	return c
}

// failedCreateCondition turns a Running=False WorkersPending condition into
// Running=False FailedCreate when the API server refused a pod create of
// this pass (refused is its answer). Any other condition is returned
// unchanged.
func failedCreateCondition(c metav1.Condition, refused string) metav1.Condition {
	if refused == "" || c.Status != metav1.ConditionFalse || c.Reason != mlv1.ReasonWorkersPending {
		return c
	}
	c.Reason = mlv1.ReasonFailedCreate
	c.Message = fmt.Sprintf("%s; the API server refused to create a pod: %s", c.Message, refused)
	return c
}

// cannotStartCondition turns a Running=False WorkersPending condition into
// Running=False ContainerCannotStart when a rank's container waits on
// something the kubelet cannot get past by itself (a root image under
// runAsNonRoot, an image it cannot pull), quoting the kubelet and naming
// the lowest such rank. Any other condition is returned unchanged.
func cannotStartCondition(c metav1.Condition, pods []*corev1.Pod) metav1.Condition {
	if c.Status != metav1.ConditionFalse || c.Reason != mlv1.ReasonWorkersPending {
		return c
	}
	for _, p := range sortedByRank(pods) {
		if p.DeletionTimestamp != nil {
			continue
		}
		if msg, ok := podsecurity.NotStarting(p, runAsNonRootFix); ok {
			c.Reason = mlv1.ReasonContainerCannotStart
			c.Message = fmt.Sprintf("%s; rank %d (pod %s) cannot start: %s", c.Message, rankOf(p), p.Name, msg)
			return c
		}
	}
	return c
}

// runAsNonRootFix is what to do when the kubelet refuses an image under
// runAsNonRoot.
const runAsNonRootFix = "the image runs as root or as a user name: use an image with a numeric non-root USER, " +
	"or set spec.template.podSecurityContext.runAsUser, or ask the admin for --pod-run-as-user"

// succeededCondition is Succeeded=True once the job completed.
func succeededCondition(job *mlv1.TrainingJob, reason, message string) metav1.Condition {
	return metav1.Condition{Type: mlv1.TrainingJobSucceeded, Status: metav1.ConditionTrue,
		Reason: reason, Message: message, ObservedGeneration: job.Generation}
}

// failedCondition is Failed=True with the reason the job failed.
func failedCondition(job *mlv1.TrainingJob, reason, message string) metav1.Condition {
	return metav1.Condition{Type: mlv1.TrainingJobFailed, Status: metav1.ConditionTrue,
		Reason: reason, Message: message, ObservedGeneration: job.Generation}
}

// restartingCondition is Restarting=True while a gang restart is under way,
// naming the rank and reason that caused it.
func restartingCondition(job *mlv1.TrainingJob, reason, message string) metav1.Condition {
	return metav1.Condition{Type: mlv1.TrainingJobRestarting, Status: metav1.ConditionTrue,
		Reason: reason, Message: message, ObservedGeneration: job.Generation}
}

// restartDoneCondition is Restarting=False once the new gang exists; the
// message keeps the cause of the last restart (cause is "Reason: message").
func restartDoneCondition(job *mlv1.TrainingJob, cause string) metav1.Condition {
	msg := fmt.Sprintf("attempt %d created after %d restarts and %d disruptions",
		job.Status.Attempt(), job.Status.Restarts, job.Status.Disruptions)
	if n := job.Status.PlacementTimeouts; n > 0 {
		msg += fmt.Sprintf(" (and %d placement timeouts)", n)
	}
	if cause != "" {
		msg += "; last restart: " + cause
	}
	return metav1.Condition{Type: mlv1.TrainingJobRestarting, Status: metav1.ConditionFalse,
		Reason: mlv1.ReasonGangRecreated, ObservedGeneration: job.Generation, Message: msg}
}

// suspendedCondition is Suspended=True while spec.suspend is true, and
// Suspended=False (Resumed) after it is set back.
func suspendedCondition(job *mlv1.TrainingJob, suspended bool) metav1.Condition {
	if suspended {
		return metav1.Condition{Type: mlv1.TrainingJobSuspended, Status: metav1.ConditionTrue, Reason: mlv1.ReasonSuspended,
			Message: "spec.suspend is true: workers deleted; Service, ConfigMap and checkpoints kept", ObservedGeneration: job.Generation}
	}
	return metav1.Condition{Type: mlv1.TrainingJobSuspended, Status: metav1.ConditionFalse, Reason: mlv1.ReasonResumed,
		Message: "spec.suspend is false: the gang is recreated from the latest checkpoint", ObservedGeneration: job.Generation}
}

// progressCondition says whether the last scrape of rank 0 worked.
func progressCondition(job *mlv1.TrainingJob, err error, url string) metav1.Condition {
	if err != nil {
		return metav1.Condition{Type: mlv1.TrainingJobProgressAvailable, Status: metav1.ConditionFalse, Reason: mlv1.ReasonScrapeFailed,
			Message: fmt.Sprintf("reading %s: %v (retried with backoff; the job is not affected)", url, err), ObservedGeneration: job.Generation}
	}
	return metav1.Condition{Type: mlv1.TrainingJobProgressAvailable, Status: metav1.ConditionTrue, Reason: mlv1.ReasonScraped,
		Message: "progress read from " + url, ObservedGeneration: job.Generation}
}

// setCondition sets c, keeping the transition time when the status is unchanged.
func setCondition(st *mlv1.TrainingJobStatus, c metav1.Condition, now metav1.Time) {
	c.LastTransitionTime = now
	meta.SetStatusCondition(&st.Conditions, c)
	sort.SliceStable(st.Conditions, func(i, j int) bool {
		return conditionOrder(st.Conditions[i].Type) < conditionOrder(st.Conditions[j].Type)
	})
}

// conditionOrder keeps conditions in lifecycle order, so status reads top-down.
func conditionOrder(t string) int {
	for i, name := range []string{mlv1.TrainingJobCreated, mlv1.TrainingJobRunning, mlv1.TrainingJobRestarting,
		mlv1.TrainingJobSuspended, mlv1.TrainingJobSucceeded, mlv1.TrainingJobFailed, mlv1.TrainingJobProgressAvailable,
		mlv1.TrainingJobStalled} {
		if name == t {
			return i
		}
	}
	return 100
}

// updateActiveState moves a job that runs its gang between Initializing and
// Running, with the Running condition and event.
func (r *Reconciler) updateActiveState(p *pass, pods []*corev1.Pod) {
	job, st := p.job, &p.job.Status
	now := metav1.NewTime(p.now)
	prev := st.State
	st.State = activeState(st.Workers, job.AttemptWorkers())
	if prev == mlv1.StateRestarting {
		cause := ""
		if c := meta.FindStatusCondition(st.Conditions, mlv1.TrainingJobRestarting); c != nil {
			cause = c.Reason + ": " + c.Message
		}
		setCondition(st, restartDoneCondition(job, cause), now)
	}
	if st.State == mlv1.StateRunning && prev != mlv1.StateRunning {
		p.event(corev1.EventTypeNormal, mlv1.EventRunning, "all %d ranks are running (attempt %d)", job.AttemptWorkers(), st.Attempt())
	}
	setCondition(st, failedCreateCondition(cannotStartCondition(unschedulableCondition(runningCondition(job), pods, st.GangPlacement), pods), p.refusedPods), now)
}
