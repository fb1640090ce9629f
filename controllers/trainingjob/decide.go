package trainingjob

import (
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

// decisionKind is what the current attempt's pods mean for the job.
type decisionKind int

const (
	// keepGoing: nothing to decide; create missing pods, report progress.
	keepGoing decisionKind = iota
	// complete: every rank exited 0.
	complete
	// fail: the job is Failed.
	fail
	// restartForFailure: a gang restart that counts against backoffLimit.
	restartForFailure
	// restartForDisruption: a gang restart that does not.
	restartForDisruption
	// restartForPlacement: a gang released because a rank was still
	// unschedulable at its placement timeout (placement.go); not counted
	// against backoffLimit either.
	restartForPlacement
)

// decision is the outcome of decide, with what a person needs to act on it.
type decision struct {
	kind    decisionKind
	reason  string
	message string
	// recheckAt is when a condition that is not yet a decision (a NotReady
	// node inside its grace period) must be looked at again; zero if none.
	recheckAt time.Time
	// stalled marks a decision about a stall (whatever its kind): the job
	// gets Stalled=True.
	stalled bool
	// workers is the number of ranks of the next attempt when an elastic
	// gang shrinks or grows (elastic.go); 0 leaves it as it is.
	workers int32
}

// gangState is everything decide looks at, gathered by the controller.
type gangState struct {
	job *mlv1.TrainingJob
	// pods are the current attempt's worker pods.
	pods []*corev1.Pod
	// ps are the current attempt's TensorFlow parameter-server pods; they
	// fail and get disrupted like ranks, but do not decide completion.
	ps []*corev1.Pod
	// nodes by name, for the nodes the pods are bound to.
	nodes map[string]nodeInfo
	// seenRanks are ranks whose pod an earlier pass observed in this attempt
	// (status.workerStatuses); a seen rank without a pod was deleted.
	seenRanks map[int32]bool
	now       time.Time
	// nodeGrace is how long a NotReady node is waited for.
	nodeGrace time.Duration
	// placementTimeout is the job's effective placement timeout (0: never).
	placementTimeout time.Duration
	// stall is what the scrapes showed of rank 0's progress (stall.go).
	stall StallWatch
}

// gangState gathers what decide looks at. A rank created by an earlier pass
// that the cache does not show yet was not deleted: it just has not
// arrived, so it does not count as seen.
func (r *Reconciler) gangState(p *pass, g attemptPods, nodes map[string]nodeInfo) gangState {
	job := p.job
	seen := seenRanks(&job.Status)
	for rank := range seen {
		if r.expect.pendingCreate(job.UID, createKey(mlv1.WorkerPodName(job.Name, rank), g.attempt), p.now) {
			delete(seen, rank)
		}
	}
	return gangState{job: job, pods: g.current, ps: g.ps, nodes: nodes, seenRanks: seen,
		now: p.now, nodeGrace: r.cfg.NodeLostGracePeriod,
		placementTimeout: job.Spec.EffectivePlacementTimeout(r.cfg.PlacementTimeout),
		stall:            r.scrapes.stallWatch(client.ObjectKeyFromObject(job))}
}

// decide is the gang policy: given the current attempt's pods, does the job
// complete, fail, restart (for a failure, a disruption or a placement
// timeout) or keep going? A hung gang (rank 0's progress standing still
// for spec.failurePolicy.stallTimeout) is decided after the pods' own news.
// Disruptions are checked first: a preempted or evicted pod often also looks
// Failed, and must not spend the retry budget.
func decide(g gangState) decision {
	spec := &g.job.Spec
	pods := sortedByRank(g.pods)
	all := append(append([]*corev1.Pod(nil), pods...), sortedByRank(g.ps)...)

	var recheck time.Time
	actOnCordon := !toleratesCordon(spec.Scheduling.Tolerations)
	for _, p := range all {
		if reason, msg, ok := disruptionOf(p, g.nodes, g.now, g.nodeGrace, actOnCordon, &recheck); ok {
			return decision{kind: restartForDisruption, reason: reason, message: msg}
		}
	}
	present := map[int32]bool{}
	for _, p := range pods {
		present[rankOf(p)] = true
	}
	for rank := int32(0); rank < g.job.AttemptWorkers(); rank++ {
		if g.seenRanks[rank] && !present[rank] {
			return decision{kind: restartForDisruption, reason: mlv1.ReasonPodDeleted,
				message: fmt.Sprintf("rank %d: pod %s was deleted", rank, mlv1.WorkerPodName(g.job.Name, rank))}
		}
	}

	for _, p := range all {
		if p.Status.Phase != corev1.PodFailed {
			continue
		}
		return failureDecision(g.job, p)
	}

	succeeded := int32(0)
	for _, p := range pods {
		if p.Status.Phase == corev1.PodSucceeded && rankOf(p) < g.job.AttemptWorkers() {
			succeeded++
		}
	}
	if succeeded == g.job.AttemptWorkers() {
		return decision{kind: complete, reason: mlv1.ReasonAllWorkersSucceeded,
			message: fmt.Sprintf("all %d ranks exited 0", succeeded)}
	}

	if d, ok := rescaleOf(g.job, pods, g.ps); ok {
		return d
	}
	if d, ok := stallOf(g.job, g.stall); ok {
		d.stalled = true
		return d
	}
	if d, ok := growOf(g); ok {
		return d
	}
	// An elastic gang shrinks before its placement timeout releases it.
	d, shrinkAt, shrink := shrinkOf(g)
	if shrink {
		return d
	}
	if !shrinkAt.IsZero() && (recheck.IsZero() || shrinkAt.Before(recheck)) {
		recheck = shrinkAt
	}
	d, expiry, expired := placementTimeoutOf(g)
	if expired {
		return d
	}
	if !expiry.IsZero() && (recheck.IsZero() || expiry.Before(recheck)) {
		recheck = expiry
	}
	return decision{kind: keepGoing, recheckAt: recheck}
}

// failureDecision applies restartPolicy and backoffLimit to a failed rank.
func failureDecision(job *mlv1.TrainingJob, p *corev1.Pod) decision {
	spec := &job.Spec
	code, why := exitOf(p)
	what := fmt.Sprintf("%s failed: %s", describePod(p), why)
	switch spec.EffectiveRestartPolicy() {
	case mlv1.RestartPolicyNever:
		return decision{kind: fail, reason: mlv1.ReasonRestartPolicyNever, message: what + "; restartPolicy is Never"}
	case mlv1.RestartPolicyExitCode:
		if code >= 1 && code <= 127 {
			return decision{kind: fail, reason: mlv1.ReasonPermanentExitCode,
				message: fmt.Sprintf("%s; exit code %d is permanent under restartPolicy ExitCode (1..127 fail at once, 128+ are retried)", what, code)}
		}
	}
	if job.Status.Restarts >= spec.EffectiveBackoffLimit() {
		return decision{kind: fail, reason: mlv1.ReasonBackoffLimitExceeded,
			message: fmt.Sprintf("%s; backoffLimit %d reached after %d restarts", what, spec.EffectiveBackoffLimit(), job.Status.Restarts)}
	}
	return decision{kind: restartForFailure, reason: mlv1.ReasonWorkerFailed, message: what}
}

// exitOf is the trainer container's exit code and a description of it. A pod
// that failed without a terminated container (for example rejected by the
// kubelet) reads as code 0 with the pod's reason.
func exitOf(p *corev1.Pod) (int32, string) {
	for _, cs := range p.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil && (cs.Name == TrainerContainerName || len(p.Status.ContainerStatuses) == 1) {
			desc := fmt.Sprintf("exit code %d", t.ExitCode)
			if t.Reason != "" {
				desc += " (" + t.Reason + ")"
			}
			return t.ExitCode, desc
		}
	}
	if p.Status.Reason != "" {
		return 0, "pod failed: " + p.Status.Reason
	}
	return 0, "pod failed"
}

// disruptionReasons are pod status reasons that mean the pod was taken away,
// not that the training failed.
var disruptionReasons = map[string]string{
	"Evicted":                  mlv1.ReasonEvicted,
	"Preempting":               mlv1.ReasonPreempted,
	"NodeLost":                 mlv1.ReasonNodeLost,
	"NodeShutdown":             mlv1.ReasonNodeLost,
	"Shutdown":                 mlv1.ReasonNodeLost,
	"Terminated":               mlv1.ReasonNodeLost,
	"UnexpectedAdmissionError": mlv1.ReasonEvicted,
}

// disruptionOf reports whether a pod was disrupted, or is about to be, and
// why. recheck is moved earlier when the pod's node is NotReady but still
// inside the grace period. With actOnCordon, an unfinished pod on a node
// cordoned for a drain is a disruption before the drain evicts it: the
// gang is ended gracefully at once, every rank with its whole
// terminationGracePeriodSeconds to save a checkpoint.
func disruptionOf(p *corev1.Pod, nodes map[string]nodeInfo, now time.Time, grace time.Duration, actOnCordon bool, recheck *time.Time) (string, string, bool) {
	who := describePod(p)
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue {
			reason := mlv1.ReasonEvicted
			if c.Reason == "PreemptionByScheduler" || c.Reason == "PreemptionByKubeScheduler" {
				reason = mlv1.ReasonPreempted
			}
			if c.Reason == "DeletionByTaintManager" {
				reason = mlv1.ReasonNodeLost
			}
			return reason, fmt.Sprintf("%s disrupted: %s %s", who, c.Reason, c.Message), true
		}
	}
	if p.Status.Phase == corev1.PodFailed {
		if reason, ok := disruptionReasons[p.Status.Reason]; ok {
			return reason, fmt.Sprintf("%s disrupted: %s %s", who, p.Status.Reason, p.Status.Message), true
		}
	}
	if p.Spec.NodeName != "" && p.Status.Phase != corev1.PodSucceeded {
		if n, ok := nodes[p.Spec.NodeName]; ok {
			lost, at := n.lost(now, grace)
			if lost {
				state := "is gone"
				if !n.gone {
					state = fmt.Sprintf("has been NotReady since %s", n.notReadySince.UTC().Format(time.RFC3339))
				}
				return mlv1.ReasonNodeLost, fmt.Sprintf("%s: node %s %s", who, p.Spec.NodeName, state), true
			}
			if !at.IsZero() && (recheck.IsZero() || at.Before(*recheck)) {
				*recheck = at
			}
			if n.cordoned != "" && actOnCordon && !isTerminal(p) {
				return mlv1.ReasonNodeCordoned, fmt.Sprintf("%s: node %s is cordoned (%s) for a drain; ending the gang gracefully before its pods are evicted",
					who, p.Spec.NodeName, n.cordoned), true
			}
		}
	}
	if p.DeletionTimestamp != nil && !isTerminal(p) {
		// The operator deletes pods of the current attempt only after moving
		// to a new attempt, so this deletion came from someone else.
		return mlv1.ReasonPodDeleted, fmt.Sprintf("%s is being deleted", who), true
	}
	return "", "", false
}

// rescaleOf reports a gang formed for another shape than the spec asks for
// now, from the shape labels each pod was created with: it must re-form at
// the new size. A pod without the labels (created before the operator
// wrote them) shows a shrink through its rank; see unlabelledGangMissing
// for a grow.
func rescaleOf(job *mlv1.TrainingJob, pods, ps []*corev1.Pod) (decision, bool) {
	want := job.AttemptWorkers()
	var cluster string
	if job.Spec.EffectiveFramework() == mlv1.FrameworkTensorFlow {
		cluster = tfClusterHash(job)
	}
	for _, p := range pods {
		formed := podNumWorkers(p)
		if rankOf(p) >= want || (formed > 0 && formed != want) {
			if formed <= 0 {
				formed = rankOf(p) + 1
			}
			return decision{kind: restartForDisruption, reason: mlv1.ReasonRescaled,
				message: fmt.Sprintf("numWorkers changed from %d to %d; re-forming the gang from the latest checkpoint", formed, want)}, true
		}
		if h := p.Labels[mlv1.LabelTFClusterHash]; cluster != "" && h != "" && h != cluster {
			return decision{kind: restartForDisruption, reason: mlv1.ReasonRescaled,
				message: "the TensorFlow cluster changed (parameterServers); re-forming the gang from the latest checkpoint"}, true
		}
	}
	return unlabelledGangMissing(job, pods, ps)
}

// unlabelledGangMissing reports a gang created by an operator version that
// did not label its shape, with a pod missing. Its size is unknown: the
// missing pod may be a rank (or parameter server) the spec added since, so
// the gang is re-formed rather than given a pod of another shape. Pods the
// current operator creates are always labelled, so this happens at most
// once per job, after an upgrade.
func unlabelledGangMissing(job *mlv1.TrainingJob, pods, ps []*corev1.Pod) (decision, bool) {
	all := append(append([]*corev1.Pod(nil), pods...), ps...)
	have := map[string]bool{}
	unlabelled := false
	for _, p := range all {
		have[p.Name] = true
		if _, ok := p.Labels[mlv1.LabelNumWorkers]; !ok {
			unlabelled = true
		}
	}
	if !unlabelled {
		return decision{}, false
	}
	want := []string{}
	for rank := int32(0); rank < job.AttemptWorkers(); rank++ {
		want = append(want, mlv1.WorkerPodName(job.Name, rank))
	}
	if job.Spec.EffectiveFramework() == mlv1.FrameworkTensorFlow {
		for i := int32(0); i < job.Spec.ParameterServers; i++ {
			want = append(want, mlv1.PSPodName(job.Name, i))
		}
	}
	for _, name := range want {
		if !have[name] {
			return decision{kind: restartForDisruption, reason: mlv1.ReasonRescaled, message: fmt.Sprintf(
				"pod %s is missing from a gang created by an earlier operator version, which did not label the gang's size; "+
					"re-forming the gang (numWorkers %d) from the latest checkpoint", name, job.AttemptWorkers())}, true
		}
	}
	return decision{}, false
}

// podNumWorkers is the numWorkers of the gang a pod was created for
// (LabelNumWorkers), 0 if unknown.
func podNumWorkers(p *corev1.Pod) int32 {
	n, err := strconv.Atoi(p.Labels[mlv1.LabelNumWorkers])
	if err != nil {
		return 0
	}
	return int32(n)
}
