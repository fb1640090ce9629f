package trainingjob_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/test/testutil"
)

// The flow of a job created suspended for a queue (Kueue's documented flow
// for jobs it admits): nothing runs until the queue controller sets
// suspend to false; then every rank carries the queue label and the
// pod-group label and total-count annotation, so Kueue admits the gang
// (2 ranks + 1 parameter server) as one unit.
func TestKueueQueuedJob(t *testing.T) {
	ns := testutil.Namespace(t, env.Client)
	w := testutil.TrainingJob("queued", ns).Framework(mlv1.FrameworkTensorFlow).Workers(2).GPUs(0).ParameterServers(1).Suspend(true)
	w.Spec.Scheduling.QueueName = "team-a"
	job := create(t, w)
	j := waitState(t, job, mlv1.StateSuspended)
	assert.Equal(t, "True", condition(j, "Suspended").Status)
	assert.Empty(t, pods(t, job), "a suspended job creates no pods")

	update(t, job, func(j *mlv1.TrainingJob) { j.Spec.Suspend = ptrTo(false) })
	testutil.Eventually(t, func() bool { return len(pods(t, job)) == 3 }, "2 workers and 1 ps after resume")
	for _, p := range pods(t, job) {
		attempt := p.Labels[mlv1.LabelRestartAttempt]
		assert.Equal(t, "team-a", p.Labels["kueue.x-k8s.io/queue-name"], p.Name)
		assert.Equal(t, "queued-"+attempt, p.Labels["kueue.x-k8s.io/pod-group-name"], p.Name)
		assert.Equal(t, "3", p.Annotations["kueue.x-k8s.io/pod-group-total-count"], p.Name)
	}
	setAll(t, job, 2, corev1.PodRunning)
	j = waitState(t, job, mlv1.StateRunning)
	assert.Equal(t, "Resumed", condition(j, "Suspended").Reason)
}
