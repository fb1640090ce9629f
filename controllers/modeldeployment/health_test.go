package modeldeployment

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

func pod(name string, restarts int32, ready bool) corev1.Pod {
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{
			{Name: "model-server", RestartCount: restarts, Ready: ready},
		}},
	}
}

func podCreated(name string, restarts int32, created time.Time) corev1.Pod {
	p := pod(name, restarts, false)
	p.CreationTimestamp = metav1.NewTime(created)
	return p
}

func TestEvaluateHealth(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	deadline := 10 * time.Minute
	deleting := pod("gone", 9, false)
	deleting.DeletionTimestamp = &metav1.Time{Time: start}
	cases := []struct {
		name string
		s    versionState
		now  time.Time
		want healthVerdict
	}{
		{"new version within deadline is progressing",
			versionState{Desired: 2, Ready: 0, RolloutStart: start}, start.Add(5 * time.Minute),
			healthVerdict{}},
		{"no ready pod at the deadline fails the rollout",
			versionState{Desired: 2, Ready: 0, RolloutStart: start}, start.Add(deadline),
			healthVerdict{Failure: mlv1.ReasonProgressDeadlineExceeded, Message: "no Ready pod 10m0s after the rollout started (rollout.progressDeadlineSeconds)"}},
		{"a version not rolling out (no start) has no deadline",
			versionState{Desired: 0, Ready: 0}, start.Add(24 * time.Hour),
			healthVerdict{}},
		{"one ready pod completes the rollout",
			versionState{Desired: 1, Ready: 1, RolloutStart: start}, start.Add(time.Hour),
			healthVerdict{Ready: true, RolloutComplete: true, FullyReady: true}},
		{"4 of 5 ready is exactly 80 %: healthy",
			versionState{Desired: 5, Ready: 4, RolloutStart: start, RolloutComplete: true}, start,
			healthVerdict{Ready: true, RolloutComplete: true}},
		{"3 of 4 ready is below 80 %: degraded",
			versionState{Desired: 4, Ready: 3, RolloutStart: start, RolloutComplete: true}, start,
			healthVerdict{Ready: true, RolloutComplete: true, Degraded: true}},
		{"rolled-out version with no ready pod is degraded, not a failed rollout",
			versionState{Desired: 2, Ready: 0, RolloutStart: start, RolloutComplete: true}, start.Add(time.Hour),
			healthVerdict{RolloutComplete: true, Degraded: true}},
		{"scaled to zero is neither degraded nor fully ready",
			versionState{Desired: 0, Ready: 0, RolloutStart: start, RolloutComplete: true}, start,
			healthVerdict{RolloutComplete: true}},
		{"crash loop at the threshold is remediated first",
			versionState{Desired: 2, Ready: 1, RolloutStart: start, Pods: []corev1.Pod{pod("b", 3, false), pod("a", 0, true), pod("c", 2, false)}}, start,
			healthVerdict{Ready: true, RolloutComplete: true, Degraded: true, CrashLoopPods: []string{"b"}}},
		{"a restarted but ready container is not crash-looping",
			versionState{Desired: 1, Ready: 1, RolloutStart: start, Pods: []corev1.Pod{pod("a", 7, true)}}, start,
			healthVerdict{Ready: true, RolloutComplete: true, FullyReady: true}},
		{"crash loop surviving a remediation fails the rollout",
			versionState{Desired: 1, Ready: 0, RolloutStart: start, Remediations: 1, LastRemediation: start, Pods: []corev1.Pod{podCreated("a", 4, start.Add(time.Second))}}, start,
			healthVerdict{CrashLoopPods: []string{"a"}, Failure: mlv1.ReasonCrashLoop, Message: "pods created after 1 remediation(s) crash-loop again: [a]"}},
		{"the remediated pod itself, still in a stale cache, is no failure",
			versionState{Desired: 1, Ready: 0, RolloutStart: start, Remediations: 1, LastRemediation: start, Pods: []corev1.Pod{podCreated("old", 9, start.Add(-time.Hour))}}, start,
			healthVerdict{CrashLoopPods: []string{"old"}}},
		{"terminating pods are ignored",
			versionState{Desired: 1, Ready: 0, RolloutStart: start, Remediations: 1, Pods: []corev1.Pod{deleting}}, start,
			healthVerdict{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := evaluateHealth(tc.s, tc.now, deadline, 3)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("evaluateHealth (-want +got):\n%s", diff)
			}
		})
	}
}
