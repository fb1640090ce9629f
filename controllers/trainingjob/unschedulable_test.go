package trainingjob_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/test/testutil"
)

const schedulerMessage = "0/6 nodes are available: 4 Insufficient nvidia.com/gpu, 2 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }."

// unschedulable is the PodScheduled condition kube-scheduler writes.
func unschedulable(s *corev1.PodStatus) {
	s.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Reason: corev1.PodReasonUnschedulable, Message: schedulerMessage, LastTransitionTime: metav1.Now()}}
}

// A rank the scheduler cannot place shows in the Running condition, with the
// scheduler's words and the rank; once it runs, the condition moves on.
func TestUnschedulableRankShowsInRunningCondition(t *testing.T) {
	ns := testutil.Namespace(t, env.Client)
	job := create(t, testutil.TrainingJob("big", ns).Workers(2).GPUs(0))
	waitPods(t, job, 2, 0)
	setPhase(t, job, 0, corev1.PodRunning)
	setPhase(t, job, 1, corev1.PodPending, unschedulable)

	j := waitJob(t, job, "Running=False Unschedulable", func(j *mlv1.TrainingJob) bool {
		c := condition(j, mlv1.TrainingJobRunning)
		return c != nil && c.Status == "False" && c.Reason == mlv1.ReasonUnschedulable
	})
	msg := condition(j, mlv1.TrainingJobRunning).Message
	assert.Contains(t, msg, "rank 1")
	assert.Contains(t, msg, "big-worker-1")
	assert.Contains(t, msg, "4 Insufficient nvidia.com/gpu")
	assert.Equal(t, mlv1.StateInitializing, j.Status.State)

	setPhase(t, job, 1, corev1.PodRunning)
	j = waitState(t, job, mlv1.StateRunning)
	c := condition(j, mlv1.TrainingJobRunning)
	assert.Equal(t, mlv1.ReasonAllWorkersRunning, c.Reason)
	assert.False(t, strings.Contains(c.Message, "Insufficient"), c.Message)
}
