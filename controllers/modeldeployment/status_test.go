package modeldeployment

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

func cond(typ string, ok bool, reason, msg string) metav1.Condition {
	return condition(typ, ok, reason, msg, 7)
}

func TestReadyCondition(t *testing.T) {
	cases := []struct {
		name string
		vs   []versionResult
		want metav1.Condition
	}{
		{"nothing ready", []versionResult{{name: "v1", sizing: 100}},
			cond(mlv1.ModelDeploymentReady, false, mlv1.ReasonNoVersionReady, "no version has a Ready pod yet")},
		{"stable serves, canary warming", []versionResult{{name: "v1", sizing: 80, effective: 100}, {name: "v2", sizing: 20}},
			cond(mlv1.ModelDeploymentReady, true, mlv1.ReasonServing, "serving v1=100%; not Ready yet: v2")},
		{"draining versions are not counted", []versionResult{{name: "v1", sizing: 100, effective: 100}, {name: "old", draining: true}},
			cond(mlv1.ModelDeploymentReady, true, mlv1.ReasonServing, "serving v1=100%")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, readyCondition(tc.vs, 7)); diff != "" {
				t.Error(diff)
			}
		})
	}
}

func TestHealthyCondition(t *testing.T) {
	cases := []struct {
		name string
		vs   []versionResult
		want metav1.Condition
	}{
		{"healthy", []versionResult{{name: "v1", desired: 5, ready: 4}},
			cond(mlv1.ModelDeploymentHealthy, true, mlv1.ReasonHealthy, "every version has at least 80% of its replicas Ready")},
		{"degraded", []versionResult{{name: "v1", desired: 4, ready: 3, verdict: healthVerdict{Degraded: true}}},
			cond(mlv1.ModelDeploymentHealthy, false, mlv1.ReasonDegraded, "version v1: 3 of 4 replicas Ready, below 80%")},
		{"crash loop first", []versionResult{{name: "v1", verdict: healthVerdict{Degraded: true, CrashLoopPods: []string{"p1", "p2"}}}},
			cond(mlv1.ModelDeploymentHealthy, false, mlv1.ReasonCrashLoop, "version v1: pods crash-looping: p1, p2")},
		{"metrics", []versionResult{{name: "v2", metricReason: mlv1.ReasonLatency, metricMessage: "slow"}},
			cond(mlv1.ModelDeploymentHealthy, false, mlv1.ReasonLatency, "version v2: slow")},
		{"an image that cannot be pulled is unhealthy before any pod is Ready", []versionResult{{name: "v1", sizing: 100, desired: 1,
			blockedReason: mlv1.ReasonContainerCannotStart, blockedMessage: "pod p1 cannot start: container server: ImagePullBackOff"}},
			cond(mlv1.ModelDeploymentHealthy, false, mlv1.ReasonContainerCannotStart, "version v1: pod p1 cannot start: container server: ImagePullBackOff")},
		{"a refused create is unhealthy", []versionResult{{name: "v1", sizing: 100, desired: 2, ready: 1, verdict: healthVerdict{RolloutComplete: true},
			blockedReason: mlv1.ReasonFailedCreate, blockedMessage: "exceeded quota"}},
			cond(mlv1.ModelDeploymentHealthy, false, mlv1.ReasonFailedCreate, "version v1: exceeded quota")},
		{"a version rolling out is named, not judged", []versionResult{{name: "v1", sizing: 90, desired: 2, ready: 2, verdict: healthVerdict{RolloutComplete: true, FullyReady: true}}, {name: "v2", sizing: 10, desired: 1}},
			cond(mlv1.ModelDeploymentHealthy, true, mlv1.ReasonHealthy, "every rolled-out version has at least 80% of its replicas Ready; not judged until their first Ready pod: v2")},
		{"a rolled-back version does not make the deployment unhealthy", []versionResult{{name: "v2", failed: true, verdict: healthVerdict{Degraded: true}}},
			cond(mlv1.ModelDeploymentHealthy, true, mlv1.ReasonHealthy, "every version has at least 80% of its replicas Ready")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, healthyCondition(tc.vs, 7)); diff != "" {
				t.Error(diff)
			}
		})
	}
}

func TestScaledCondition(t *testing.T) {
	if diff := cmp.Diff(cond(mlv1.ModelDeploymentScaled, false, mlv1.ReasonScaling, "scaling: v1 2/5"),
		scaledCondition([]versionResult{{name: "v1", exists: true, current: 2, desired: 5}, {name: "v2", exists: true, current: 1, desired: 1}}, 7)); diff != "" {
		t.Error(diff)
	}
	if diff := cmp.Diff(cond(mlv1.ModelDeploymentScaled, true, mlv1.ReasonScalingComplete, "every version has its desired replicas"),
		scaledCondition([]versionResult{{name: "v1", exists: true, current: 3, desired: 3}, {name: "new"}}, 7)); diff != "" {
		t.Error(diff)
	}
}

func TestProgressingCondition(t *testing.T) {
	cases := []struct {
		name string
		vs   []versionResult
		want metav1.Condition
	}{
		{"rolling out", []versionResult{{name: "v1", sizing: 100, verdict: healthVerdict{RolloutComplete: true}}, {name: "v2", sizing: 10}},
			cond(mlv1.ModelDeploymentProgressing, true, mlv1.ReasonRolloutInProgress, "rolling out: v2")},
		{"weight-0 version does not hold the rollout", []versionResult{{name: "v1", sizing: 100, verdict: healthVerdict{RolloutComplete: true}}, {name: "v2"}},
			cond(mlv1.ModelDeploymentProgressing, false, mlv1.ReasonRolloutComplete, "every version is rolled out")},
		{"draining", []versionResult{{name: "v1", sizing: 100, verdict: healthVerdict{RolloutComplete: true}}, {name: "v0", draining: true}},
			cond(mlv1.ModelDeploymentProgressing, true, mlv1.ReasonDraining, "draining removed versions: v0")},
		{"failing without a rollback", []versionResult{{name: "v1", sizing: 100, verdict: healthVerdict{Failure: mlv1.ReasonProgressDeadlineExceeded, Message: "late"}}},
			cond(mlv1.ModelDeploymentProgressing, false, mlv1.ReasonProgressDeadlineExceeded, "version v1: late")},
		{"rolled back", []versionResult{{name: "v1", sizing: 100, verdict: healthVerdict{RolloutComplete: true}}, {name: "v2", failed: true}},
			cond(mlv1.ModelDeploymentProgressing, false, mlv1.ReasonRolloutFailed, "rolled back: v2; a spec change retries")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, progressingCondition(tc.vs, 7)); diff != "" {
				t.Error(diff)
			}
		})
	}
}

func TestRolledBackCondition(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 11, 22, 3, 0, 0, 0, time.UTC))
	if diff := cmp.Diff(cond(mlv1.ModelDeploymentRolledBack, false, mlv1.ReasonNoRollback, "no version is rolled back"),
		rolledBackCondition(nil, "", 7)); diff != "" {
		t.Error(diff)
	}
	got := rolledBackCondition([]mlv1.FailedVersion{{Name: "v2", Generation: 7, Reason: mlv1.ReasonErrorRate, Message: "error rate 0.3", Time: at}}, "v1", 7)
	want := cond(mlv1.ModelDeploymentRolledBack, true, mlv1.ReasonErrorRate,
		"version v2 rolled back at 2026-11-22T03:00:00Z (ErrorRate): error rate 0.3; its traffic goes to v1")
	if diff := cmp.Diff(want, got); diff != "" {
		t.Error(diff)
	}
}

func TestPhase(t *testing.T) {
	ready := cond(mlv1.ModelDeploymentReady, true, mlv1.ReasonServing, "")
	notReady := cond(mlv1.ModelDeploymentReady, false, mlv1.ReasonNoVersionReady, "")
	healthy := cond(mlv1.ModelDeploymentHealthy, true, mlv1.ReasonHealthy, "")
	unhealthy := cond(mlv1.ModelDeploymentHealthy, false, mlv1.ReasonDegraded, "")
	cases := []struct {
		name           string
		vs             []versionResult
		ready, healthy metav1.Condition
		want           mlv1.ModelDeploymentPhase
	}{
		{"starting", []versionResult{{name: "v1"}}, notReady, healthy, mlv1.PhasePending},
		{"nothing ready and the rollout failed", []versionResult{{name: "v1", verdict: healthVerdict{Failure: mlv1.ReasonProgressDeadlineExceeded}}}, notReady, healthy, mlv1.PhaseFailed},
		{"serving", []versionResult{{name: "v1"}}, ready, healthy, mlv1.PhaseRunning},
		{"serving but degraded", []versionResult{{name: "v1"}}, ready, unhealthy, mlv1.PhaseDegraded},
	}
	for _, tc := range cases {
		if got := phase(tc.vs, tc.ready, tc.healthy); got != tc.want {
			t.Errorf("%s: phase = %s, want %s", tc.name, got, tc.want)
		}
	}
}

// A storage initializer that failed (and has not succeeded since) blocks
// the version with its termination message; one that succeeded after
// earlier failures does not; without a message the exit code is given.
func TestBlockedByAFailedFetch(t *testing.T) {
	initStatus := func(state, last corev1.ContainerState) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "fraud-v3-x"}, Status: corev1.PodStatus{
			InitContainerStatuses: []corev1.ContainerStatus{{Name: "storage-initializer", State: state, LastTerminationState: last}},
		}}
	}
	failed := corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error",
		Message: "GET http://store/fraud-v3.json: 404 Not Found\n"}}
	backOff := corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}
	done := corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}
	silent := corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}}

	want := "pod fraud-v3-x: the storage initializer could not fetch the model: GET http://store/fraud-v3.json: 404 Not Found"
	for name, pod := range map[string]corev1.Pod{
		"Init:Error":            initStatus(failed, corev1.ContainerState{}),
		"Init:CrashLoopBackOff": initStatus(backOff, failed),
	} {
		reason, msg := blocked(nil, []corev1.Pod{pod})
		assert.Equal(t, mlv1.ReasonModelFetchFailed, reason, name)
		assert.Equal(t, want, msg, name)
	}
	reason, _ := blocked(nil, []corev1.Pod{initStatus(done, failed)})
	assert.Empty(t, reason, "fetched after an earlier failure")
	_, msg := blocked(nil, []corev1.Pod{initStatus(silent, corev1.ContainerState{})})
	assert.Equal(t, "pod fraud-v3-x: the storage initializer could not fetch the model: exit code 137 (OOMKilled)", msg)

	// The conditions quote it.
	vs := []versionResult{{name: "v3", sizing: 10, blockedReason: mlv1.ReasonModelFetchFailed, blockedMessage: want}}
	assert.Equal(t, cond(mlv1.ModelDeploymentProgressing, false, mlv1.ReasonModelFetchFailed, "version v3: "+want), progressingCondition(vs, 7))
	assert.Equal(t, cond(mlv1.ModelDeploymentHealthy, false, mlv1.ReasonModelFetchFailed, "version v3: "+want), healthyCondition(vs, 7))
}
