package trainingjob_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/controllers/trainingjob"
	"github.com/ml-operator/ml-operator/test/testutil"
)

// A pod create the namespace's quota refuses is visible on the job: a
// Warning FailedCreate event and Running=False FailedCreate, both quoting
// the API server. Once the quota allows it, the pods are created.
func TestQuotaRefusingPodsIsVisible(t *testing.T) {
	ns := testutil.Namespace(t, env.Client)
	testutil.ExhaustedQuota(t, env.Client, ns, corev1.ResourcePods)
	job := create(t, testutil.TrainingJob("quota", ns).Workers(2).GPUs(0))

	j := waitJob(t, job, "Running=False FailedCreate", func(j *mlv1.TrainingJob) bool {
		c := condition(j, mlv1.TrainingJobRunning)
		return c != nil && c.Reason == mlv1.ReasonFailedCreate
	})
	c := condition(j, mlv1.TrainingJobRunning)
	assert.Equal(t, "False", c.Status)
	assert.Contains(t, c.Message, `pods "quota-worker-0" is forbidden: exceeded quota: exhausted`)
	ev := waitEvents(t, job, mlv1.EventFailedCreate)
	assert.True(t, strings.HasPrefix(ev[mlv1.EventFailedCreate], `Error creating: pods "quota-worker-0" is forbidden: exceeded quota: exhausted`),
		ev[mlv1.EventFailedCreate])
	assert.Contains(t, ev[mlv1.EventFailedCreate], "(and 1 more pods refused)")
	assert.Empty(t, pods(t, job))

	require.NoError(t, env.Client.Delete(ctx, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "exhausted", Namespace: ns}}))
	step(t, job, trainingjob.DefaultBackoffBase)
	waitPods(t, job, 2, 0)
	j = waitJob(t, job, "Running=False WorkersPending", func(j *mlv1.TrainingJob) bool {
		c := condition(j, mlv1.TrainingJobRunning)
		return c != nil && c.Reason == mlv1.ReasonWorkersPending
	})
	assert.NotContains(t, condition(j, mlv1.TrainingJobRunning).Message, "refused")
}

// A denying admission webhook (a policy engine) refusing the pods is
// visible the same way, with the webhook's own message.
func TestWebhookRefusingPodsIsVisible(t *testing.T) {
	ns := testutil.Namespace(t, env.Client)
	testutil.DenyingWebhook(t, env.Client, ns, []string{"pods"}, "images must come from the approved registry")
	job := create(t, testutil.TrainingJob("policy", ns).Workers(1).GPUs(0))

	j := waitJob(t, job, "Running=False FailedCreate", func(j *mlv1.TrainingJob) bool {
		c := condition(j, mlv1.TrainingJobRunning)
		return c != nil && c.Reason == mlv1.ReasonFailedCreate
	})
	want := `admission webhook "deny.policy.example.com" denied the request: images must come from the approved registry`
	assert.Contains(t, condition(j, mlv1.TrainingJobRunning).Message, want)
	ev := waitEvents(t, job, mlv1.EventFailedCreate)
	assert.Contains(t, ev[mlv1.EventFailedCreate], want)
	assert.Equal(t, "True", condition(j, mlv1.TrainingJobCreated).Status, "the Service, ConfigMap and PVC were allowed")
}

// A refused Service (or ConfigMap, or checkpoint PVC) sets Created=False
// FailedCreate with the API server's message, and no pod is created.
func TestWebhookRefusingTheServiceIsVisible(t *testing.T) {
	ns := testutil.Namespace(t, env.Client)
	testutil.DenyingWebhook(t, env.Client, ns, []string{"services"}, "Services need a cost-center label")
	job := create(t, testutil.TrainingJob("svc", ns).Workers(1).GPUs(0))

	j := waitJob(t, job, "Created=False FailedCreate", func(j *mlv1.TrainingJob) bool {
		c := condition(j, mlv1.TrainingJobCreated)
		return c != nil && c.Reason == mlv1.ReasonFailedCreate
	})
	c := condition(j, mlv1.TrainingJobCreated)
	assert.Equal(t, "False", c.Status)
	assert.Contains(t, c.Message, "Services need a cost-center label")
	ev := waitEvents(t, job, mlv1.EventFailedCreate)
	assert.Contains(t, ev[mlv1.EventFailedCreate], "Services need a cost-center label")
	var list corev1.PodList
	require.NoError(t, env.Client.List(ctx, &list, client.InNamespace(ns)))
	assert.Empty(t, list.Items)
}

// A rank whose container the kubelet will not start (a root image under
// runAsNonRoot) turns Running=False into ContainerCannotStart with the
// kubelet's message and what to do about it.
func TestContainerTheKubeletRefusesIsVisible(t *testing.T) {
	ns := testutil.Namespace(t, env.Client)
	job := create(t, testutil.TrainingJob("rootimg", ns).Workers(2).GPUs(0))
	ps := waitPods(t, job, 2, 0)
	msg := "container has runAsNonRoot and image will run as root (pod: \"rootimg-worker-1_" + ns + "(" + string(ps[1].UID) + ")\", container: trainer)"
	p := &ps[1]
	p.Status.Phase = corev1.PodPending
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{
		Name: "trainer", Image: "img",
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CreateContainerConfigError", Message: msg}},
	}}
	require.NoError(t, env.Client.Status().Update(ctx, p))

	j := waitJob(t, job, "Running=False ContainerCannotStart", func(j *mlv1.TrainingJob) bool {
		c := condition(j, mlv1.TrainingJobRunning)
		return c != nil && c.Reason == mlv1.ReasonContainerCannotStart
	})
	c := condition(j, mlv1.TrainingJobRunning)
	assert.Contains(t, c.Message, "rank 1 (pod rootimg-worker-1) cannot start: container trainer: CreateContainerConfigError: "+msg)
	assert.Contains(t, c.Message, "spec.template.podSecurityContext.runAsUser")
}
