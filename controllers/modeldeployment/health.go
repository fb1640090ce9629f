package modeldeployment

import (
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

// healthyRatioPercent is the share of desired replicas that must be Ready for
// a rolled-out version to count as healthy.
const healthyRatioPercent = 80

// versionState is what the health evaluation sees of one version.
type versionState struct {
	// Desired replicas of the Deployment (as the HPA set them) and Ready ones.
	Desired, Ready int32
	// RolloutStart is when the current template was applied.
	RolloutStart time.Time
	// RolloutComplete is true if the version already had a Ready pod since RolloutStart.
	RolloutComplete bool
	// Remediations done since the version was last fully Ready, the last at
	// LastRemediation.
	Remediations    int32
	LastRemediation time.Time
	// Pods of the version.
	Pods []corev1.Pod
}

// healthVerdict is the outcome of evaluating one version.
type healthVerdict struct {
	// Ready: at least one pod is Ready, so the version may get traffic.
	Ready bool
	// RolloutComplete: the version has been Ready at least once in this rollout.
	RolloutComplete bool
	// Degraded: rolled out, but fewer than 80 % of the desired replicas are Ready.
	Degraded bool
	// FullyReady: every desired replica is Ready.
	FullyReady bool
	// CrashLoopPods are pods to delete: a container restarted at least
	// failureThreshold times and is not Ready.
	CrashLoopPods []string
	// Failure is a rollout failure reason (empty when none) with a message.
	Failure, Message string
}

// evaluateHealth judges one version at now. A version that has never been
// Ready since its rollout started is progressing, not degraded, until the
// progress deadline; a crash loop that is still there after a remediation is
// a failed rollout.
func evaluateHealth(s versionState, now time.Time, progressDeadline time.Duration, failureThreshold int32) healthVerdict {
	v := healthVerdict{Ready: s.Ready > 0}
	v.RolloutComplete = s.RolloutComplete || v.Ready
	v.FullyReady = s.Desired > 0 && s.Ready >= s.Desired
	v.Degraded = v.RolloutComplete && s.Desired > 0 && s.Ready*100 < healthyRatioPercent*s.Desired
	v.CrashLoopPods = crashLoopingPods(s.Pods, failureThreshold)

	switch {
	case !v.RolloutComplete && !s.RolloutStart.IsZero() && now.Sub(s.RolloutStart) >= progressDeadline:
		v.Failure = mlv1.ReasonProgressDeadlineExceeded
		v.Message = fmt.Sprintf("no Ready pod %s after the rollout started (rollout.progressDeadlineSeconds)", progressDeadline)
	case s.Remediations > 0 && len(replacements(s.Pods, v.CrashLoopPods, s.LastRemediation)) > 0:
		v.Failure = mlv1.ReasonCrashLoop
		v.Message = fmt.Sprintf("pods created after %d remediation(s) crash-loop again: %v",
			s.Remediations, replacements(s.Pods, v.CrashLoopPods, s.LastRemediation))
	}
	return v
}

// replacements are the named pods created at or after since: the pods that
// replaced remediated ones. A remediated pod still in a stale cache does not
// count.
func replacements(pods []corev1.Pod, names []string, since time.Time) []string {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	var out []string
	for i := range pods {
		if want[pods[i].Name] && !pods[i].CreationTimestamp.Time.Before(since) {
			out = append(out, pods[i].Name)
		}
	}
	sort.Strings(out)
	return out
}

// crashLoopingPods returns, sorted, the pods with a container that restarted
// at least threshold times and is not Ready now.
func crashLoopingPods(pods []corev1.Pod, threshold int32) []string {
	var names []string
	for i := range pods {
		p := &pods[i]
		if p.DeletionTimestamp != nil {
			continue
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.RestartCount >= threshold && !cs.Ready {
				names = append(names, p.Name)
				break
			}
		}
	}
	sort.Strings(names)
	return names
}
