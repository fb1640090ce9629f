package modeldeployment

import (
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/internal/podsecurity"
)

// versionResult is everything one pass learned and decided about a version.
type versionResult struct {
	name string
	// requested weight, the weight after rollback (what the version is sized
	// for) and the effective, readiness-gated weight.
	requested, sizing, effective int32
	// desired replicas (spec, as the HPA set them), Ready replicas and the
	// replicas the Deployment currently has.
	desired, ready, current int32
	exists                  bool
	verdict                 healthVerdict
	// failed: rolled back at this generation (now or earlier).
	failed bool
	// metricReason/metricMessage: the version breaks the Prometheus limits.
	metricReason, metricMessage string
	draining                    bool
	// blockedReason/blockedMessage: the version's pods are not created
	// (FailedCreate, from the Deployment's ReplicaFailure condition) or
	// cannot start (ContainerCannotStart, from the kubelet).
	blockedReason, blockedMessage string
}

// failure is the version's current failure reason, from health or metrics.
func (v *versionResult) failure() (string, string) {
	if v.verdict.Failure != "" {
		return v.verdict.Failure, v.verdict.Message
	}
	return v.metricReason, v.metricMessage
}

// serving are the versions that belong to the spec and are not draining.
func serving(vs []versionResult) []versionResult {
	var out []versionResult
	for _, v := range vs {
		if !v.draining {
			out = append(out, v)
		}
	}
	return out
}

func condition(typ string, ok bool, reason, message string, generation int64) metav1.Condition {
	status := metav1.ConditionFalse
	if ok {
		status = metav1.ConditionTrue
	}
	return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: message, ObservedGeneration: generation}
}

// readyCondition: True while some version takes traffic (a removed version
// still serving while its replacement starts counts).
func readyCondition(vs []versionResult, generation int64) metav1.Condition {
	var serve, waiting []string
	for _, v := range vs {
		if v.effective > 0 {
			serve = append(serve, fmt.Sprintf("%s=%d%%", v.name, v.effective))
		} else if v.sizing > 0 && !v.draining {
			waiting = append(waiting, v.name)
		}
	}
	if len(serve) == 0 {
		return condition(mlv1.ModelDeploymentReady, false, mlv1.ReasonNoVersionReady, "no version has a Ready pod yet", generation)
	}
	msg := "serving " + strings.Join(serve, ", ")
	if len(waiting) > 0 {
		msg += "; not Ready yet: " + strings.Join(waiting, ", ")
	}
	return condition(mlv1.ModelDeploymentReady, true, mlv1.ReasonServing, msg, generation)
}

// healthyCondition: False when a version that is not rolled back is below
// 80 % Ready replicas, crash-loops, breaks its metric limits, or has pods
// that cannot be created or started (an image that cannot be pulled, a
// refused create): such a version is not healthy even before its first
// Ready pod. True otherwise; its message names versions still rolling out,
// which are not judged yet.
func healthyCondition(vs []versionResult, generation int64) metav1.Condition {
	var rolling []string
	for _, v := range serving(vs) {
		if v.failed {
			continue
		}
		switch {
		case len(v.verdict.CrashLoopPods) > 0:
			return condition(mlv1.ModelDeploymentHealthy, false, mlv1.ReasonCrashLoop,
				fmt.Sprintf("version %s: pods crash-looping: %s", v.name, strings.Join(v.verdict.CrashLoopPods, ", ")), generation)
		case v.blockedReason != "" && !v.verdict.FullyReady:
			return condition(mlv1.ModelDeploymentHealthy, false, v.blockedReason,
				fmt.Sprintf("version %s: %s", v.name, v.blockedMessage), generation)
		case v.verdict.Degraded:
			return condition(mlv1.ModelDeploymentHealthy, false, mlv1.ReasonDegraded,
				fmt.Sprintf("version %s: %d of %d replicas Ready, below %d%%", v.name, v.ready, v.desired, healthyRatioPercent), generation)
		case v.metricReason != "":
			return condition(mlv1.ModelDeploymentHealthy, false, v.metricReason, fmt.Sprintf("version %s: %s", v.name, v.metricMessage), generation)
		case v.sizing > 0 && !v.verdict.RolloutComplete:
			rolling = append(rolling, v.name)
		}
	}
	msg := "every version has at least 80% of its replicas Ready"
	if len(rolling) > 0 {
		msg = "every rolled-out version has at least 80% of its replicas Ready; not judged until their first Ready pod: " + strings.Join(rolling, ", ")
	}
	return condition(mlv1.ModelDeploymentHealthy, true, mlv1.ReasonHealthy, msg, generation)
}

// scaledCondition: True when every version's Deployment has the replicas it wants.
func scaledCondition(vs []versionResult, generation int64) metav1.Condition {
	var pending []string
	for _, v := range serving(vs) {
		if v.exists && v.current != v.desired {
			pending = append(pending, fmt.Sprintf("%s %d/%d", v.name, v.current, v.desired))
		}
	}
	if len(pending) > 0 {
		return condition(mlv1.ModelDeploymentScaled, false, mlv1.ReasonScaling, "scaling: "+strings.Join(pending, ", "), generation)
	}
	return condition(mlv1.ModelDeploymentScaled, true, mlv1.ReasonScalingComplete, "every version has its desired replicas", generation)
}

// progressingCondition: True while a version that should take traffic has not
// completed its rollout or a removed version drains; False with the failure
// reason when a rollout failed.
func progressingCondition(vs []versionResult, generation int64) metav1.Condition {
	var rolling, draining, failed []string
	for _, v := range vs {
		switch {
		case v.draining:
			draining = append(draining, v.name)
		case v.failed:
			failed = append(failed, v.name)
		case v.verdict.Failure != "":
			return condition(mlv1.ModelDeploymentProgressing, false, v.verdict.Failure,
				fmt.Sprintf("version %s: %s", v.name, v.verdict.Message), generation)
		case v.blockedReason != "" && !v.verdict.RolloutComplete:
			return condition(mlv1.ModelDeploymentProgressing, false, v.blockedReason,
				fmt.Sprintf("version %s: %s", v.name, v.blockedMessage), generation)
		case v.sizing > 0 && !v.verdict.RolloutComplete:
			rolling = append(rolling, v.name)
		}
	}
	switch {
	case len(failed) > 0:
		return condition(mlv1.ModelDeploymentProgressing, false, mlv1.ReasonRolloutFailed,
			"rolled back: "+strings.Join(failed, ", ")+"; a spec change retries", generation)
	case len(rolling) > 0:
		return condition(mlv1.ModelDeploymentProgressing, true, mlv1.ReasonRolloutInProgress, "rolling out: "+strings.Join(rolling, ", "), generation)
	case len(draining) > 0:
		return condition(mlv1.ModelDeploymentProgressing, true, mlv1.ReasonDraining, "draining removed versions: "+strings.Join(draining, ", "), generation)
	}
	return condition(mlv1.ModelDeploymentProgressing, false, mlv1.ReasonRolloutComplete, "every version is rolled out", generation)
}

// refusedCondition is Progressing=False FailedCreate when the API server
// refused to apply a child, quoting it.
func refusedCondition(err error, generation int64) metav1.Condition {
	return condition(mlv1.ModelDeploymentProgressing, false, mlv1.ReasonFailedCreate, err.Error(), generation)
}

// blocked is why a version's pods do not come up on their own: the
// ReplicaSet controller could not create them (the Deployment's
// ReplicaFailure condition, with the API server's message), the storage
// initializer could not fetch the model (its termination message), or the
// kubelet will not start a container (with the kubelet's message).
func blocked(dep *appsv1.Deployment, pods []corev1.Pod) (reason, message string) {
	if dep != nil {
		for _, c := range dep.Status.Conditions {
			if c.Type == appsv1.DeploymentReplicaFailure && c.Status == corev1.ConditionTrue {
				return mlv1.ReasonFailedCreate, c.Message
			}
		}
	}
	for i := range pods {
		if pods[i].DeletionTimestamp != nil {
			continue
		}
		if msg, ok := fetchFailure(&pods[i]); ok {
			return mlv1.ReasonModelFetchFailed, fmt.Sprintf("pod %s: the storage initializer could not fetch the model: %s", pods[i].Name, msg)
		}
	}
	for i := range pods {
		if pods[i].DeletionTimestamp != nil {
			continue
		}
		if msg, ok := podsecurity.NotStarting(&pods[i], runAsNonRootFix); ok {
			return mlv1.ReasonContainerCannotStart, fmt.Sprintf("pod %s cannot start: %s", pods[i].Name, msg)
		}
	}
	return "", ""
}

// fetchFailure is the storage initializer's last failure in pod, while it
// has not succeeded since: its termination message (one line, written by
// the initializer; the log's tail when it wrote none), or its exit code.
func fetchFailure(pod *corev1.Pod) (string, bool) {
	for _, cs := range pod.Status.InitContainerStatuses {
		if cs.Name != mlv1.StorageInitializerContainerName {
			continue
		}
		t := cs.State.Terminated
		if t != nil && t.ExitCode == 0 {
			return "", false
		}
		if t == nil {
			t = cs.LastTerminationState.Terminated
		}
		if t == nil || t.ExitCode == 0 {
			return "", false
		}
		if msg := strings.TrimSpace(t.Message); msg != "" {
			return msg, true
		}
		return fmt.Sprintf("exit code %d (%s)", t.ExitCode, t.Reason), true
	}
	return "", false
}

// runAsNonRootFix is what to do when the kubelet refuses an image under
// runAsNonRoot.
const runAsNonRootFix = "the image runs as root or as a user name (TorchServe's model-server): " +
	"set spec.podSecurityContext.runAsUser to the image's UID, use an image with a numeric non-root USER, or ask the admin for --pod-run-as-user"

// rolledBackCondition: True while a version of this generation is rolled back.
func rolledBackCondition(failed []mlv1.FailedVersion, target string, generation int64) metav1.Condition {
	if len(failed) == 0 {
		return condition(mlv1.ModelDeploymentRolledBack, false, mlv1.ReasonNoRollback, "no version is rolled back", generation)
	}
	parts := make([]string, 0, len(failed))
	for _, f := range failed {
		parts = append(parts, fmt.Sprintf("version %s rolled back at %s (%s): %s",
			f.Name, f.Time.UTC().Format("2006-01-02T15:04:05Z"), f.Reason, f.Message))
	}
	msg := strings.Join(parts, "; ")
	if target != "" {
		msg += "; its traffic goes to " + target
	}
	return condition(mlv1.ModelDeploymentRolledBack, true, failed[0].Reason, msg, generation)
}

// phase summarises the conditions: Pending until a version takes traffic
// (Failed if a rollout failed meanwhile), Degraded when unhealthy, else Running.
func phase(vs []versionResult, ready, healthy metav1.Condition) mlv1.ModelDeploymentPhase {
	if ready.Status != metav1.ConditionTrue {
		for _, v := range serving(vs) {
			if reason, _ := v.failure(); reason != "" || v.failed {
				return mlv1.PhaseFailed
			}
		}
		return mlv1.PhasePending
	}
	if healthy.Status != metav1.ConditionTrue {
		return mlv1.PhaseDegraded
	}
	return mlv1.PhaseRunning
}

// setConditions writes the five conditions into status, keeping transition
// times of conditions whose status did not change.
func setConditions(status *mlv1.ModelDeploymentStatus, conds ...metav1.Condition) {
	for _, c := range conds {
		meta.SetStatusCondition(&status.Conditions, c)
	}
}
