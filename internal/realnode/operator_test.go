package realnode

import (
	"testing"

	"github.com/stretchr/testify/assert"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// A Deployment is available as kubectl shows it: its Available condition
// True and every replica updated and available. One replica of two is not,
// nor a rollout still replacing pods.
func TestDeploymentAvailable(t *testing.T) {
	dep := func(replicas *int32, available, updated int32, cond corev1.ConditionStatus) *appsv1.Deployment {
		d := &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Replicas: replicas}}
		d.Status.AvailableReplicas, d.Status.UpdatedReplicas = available, updated
		if cond != "" {
			d.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: cond}}
		}
		return d
	}
	for _, tc := range []struct {
		name string
		dep  *appsv1.Deployment
		want bool
	}{
		{"both of two, condition True", dep(ptr.To[int32](2), 2, 2, corev1.ConditionTrue), true},
		{"one of two, condition False", dep(ptr.To[int32](2), 1, 2, corev1.ConditionFalse), false},
		{"one of two, condition True (maxUnavailable allows it)", dep(ptr.To[int32](2), 1, 2, corev1.ConditionTrue), false},
		{"both available, one not yet updated", dep(ptr.To[int32](2), 2, 1, corev1.ConditionTrue), false},
		{"no condition yet", dep(ptr.To[int32](1), 1, 1, ""), false},
		{"replicas unset means one", dep(nil, 1, 1, corev1.ConditionTrue), true},
	} {
		assert.Equal(t, tc.want, deploymentAvailable(tc.dep), tc.name)
	}
}
