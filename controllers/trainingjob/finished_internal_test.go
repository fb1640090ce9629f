package trainingjob

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

// Which pods a finished job deletes: cleanPodPolicy decides for the ranks;
// a live parameter server goes under every policy.
func TestFinishedJobDeletes(t *testing.T) {
	pod := func(replicaType string, phase corev1.PodPhase) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{mlv1.LabelReplicaType: replicaType}},
			Status:     corev1.PodStatus{Phase: phase},
		}
	}
	type row struct {
		policy      mlv1.CleanPodPolicy
		replicaType string
		phase       corev1.PodPhase
		want        bool
	}
	rows := []row{
		{mlv1.CleanPodPolicyAll, mlv1.ReplicaTypeWorker, corev1.PodSucceeded, true},
		{mlv1.CleanPodPolicyAll, mlv1.ReplicaTypeWorker, corev1.PodRunning, true},
		{mlv1.CleanPodPolicyAll, mlv1.ReplicaTypePS, corev1.PodFailed, true},
		{mlv1.CleanPodPolicyRunning, mlv1.ReplicaTypeWorker, corev1.PodRunning, true},
		{mlv1.CleanPodPolicyRunning, mlv1.ReplicaTypeWorker, corev1.PodPending, true},
		{mlv1.CleanPodPolicyRunning, mlv1.ReplicaTypeWorker, corev1.PodSucceeded, false},
		{mlv1.CleanPodPolicyRunning, mlv1.ReplicaTypeWorker, corev1.PodFailed, false},
		{mlv1.CleanPodPolicyRunning, mlv1.ReplicaTypePS, corev1.PodRunning, true},
		{mlv1.CleanPodPolicyNone, mlv1.ReplicaTypeWorker, corev1.PodRunning, false},
		{mlv1.CleanPodPolicyNone, mlv1.ReplicaTypeWorker, corev1.PodSucceeded, false},
		{mlv1.CleanPodPolicyNone, mlv1.ReplicaTypePS, corev1.PodRunning, true},
		{mlv1.CleanPodPolicyNone, mlv1.ReplicaTypePS, corev1.PodPending, true},
		{mlv1.CleanPodPolicyNone, mlv1.ReplicaTypePS, corev1.PodFailed, false},
	}
	for _, r := range rows {
		t.Run(fmt.Sprintf("%s/%s/%s", r.policy, r.replicaType, r.phase), func(t *testing.T) {
			assert.Equal(t, r.want, finishedJobDeletes(r.policy, pod(r.replicaType, r.phase)))
		})
	}
}
