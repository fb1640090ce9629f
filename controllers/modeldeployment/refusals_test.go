package modeldeployment_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	mdctrl "github.com/ml-operator/ml-operator/controllers/modeldeployment"
	"github.com/ml-operator/ml-operator/test/testutil"
)

// progressing returns the Progressing condition.
func progressing(t *testing.T, md *mlv1.ModelDeployment) metav1.Condition {
	t.Helper()
	for _, c := range md.Status.Conditions {
		if c.Type == mlv1.ModelDeploymentProgressing {
			return c
		}
	}
	t.Fatalf("no Progressing condition in %+v", md.Status.Conditions)
	return metav1.Condition{}
}

// A child the namespace's quota refuses (here the version's Service) is
// visible: Progressing=False FailedCreate and a Warning FailedCreate
// event, both quoting the API server. Once the quota allows it, the next
// pass applies it.
func TestQuotaRefusingAChildIsVisible(t *testing.T) {
	h := newHarness(t)
	testutil.ExhaustedQuota(t, k8s, h.ns, corev1.ResourceServices)
	h.create(testutil.ModelDeployment("q", "").Router(mlv1.RouterService).Version("v1", -1, "s3://m/v1").Obj())
	h.reconcile("q")

	c := progressing(t, h.md("q"))
	assert.Equal(t, metav1.ConditionFalse, c.Status)
	assert.Equal(t, mlv1.ReasonFailedCreate, c.Reason)
	assert.Contains(t, c.Message, `services "q-v1" is forbidden: exceeded quota: exhausted`)
	evs := h.events()
	assert.True(t, hasEvent(evs, "Warning FailedCreate", `Error creating: applying Service of version v1: services "q-v1" is forbidden: exceeded quota`), "events: %v", evs)

	require.NoError(t, k8s.Delete(context.Background(), &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "exhausted", Namespace: h.ns}}))
	h.reconcile("q")
	get(t, h.ns, "q-v1", &corev1.Service{})
	assert.NotEqual(t, mlv1.ReasonFailedCreate, progressing(t, h.md("q")).Reason)
}

// A denying admission webhook refusing the Deployment is visible the same
// way, with the webhook's message.
func TestWebhookRefusingTheDeploymentIsVisible(t *testing.T) {
	h := newHarness(t)
	testutil.DenyingWebhook(t, k8s, h.ns, []string{"deployments"}, "model servers need an owner label")
	h.create(testutil.ModelDeployment("w", "").Router(mlv1.RouterService).Version("v1", -1, "s3://m/v1").Obj())
	h.reconcile("w")

	c := progressing(t, h.md("w"))
	assert.Equal(t, mlv1.ReasonFailedCreate, c.Reason)
	assert.Contains(t, c.Message, `admission webhook "deny.policy.example.com" denied the request: model servers need an owner label`)
	evs := h.events()
	assert.True(t, hasEvent(evs, "Warning FailedCreate", "model servers need an owner label"), "events: %v", evs)
}

// Pods the ReplicaSet controller cannot create (Pod Security, quota: the
// Deployment's ReplicaFailure condition) are visible on the
// ModelDeployment, with one Warning event.
func TestReplicaFailureIsVisible(t *testing.T) {
	h := newHarness(t)
	h.create(testutil.ModelDeployment("rf", "").Router(mlv1.RouterService).Version("v1", -1, "s3://m/v1").Obj())
	h.reconcile("rf")
	h.events()
	msg := `pods "rf-v1-5d8f7c9b4-x2x9q" is forbidden: violates PodSecurity "restricted:latest": privileged (container "model-server" must not set securityContext.privileged=true)`
	d := h.deployment("rf-v1")
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Conditions: []appsv1.DeploymentCondition{{
		Type: appsv1.DeploymentReplicaFailure, Status: corev1.ConditionTrue, Reason: "FailedCreate", Message: msg,
	}}}
	require.NoError(t, k8s.Status().Update(context.Background(), d))
	require.Eventually(t, func() bool {
		h.reconcile("rf")
		return progressing(t, h.md("rf")).Reason == mlv1.ReasonFailedCreate
	}, testutil.Timeout, testutil.Interval)
	assert.Equal(t, "version v1: "+msg, progressing(t, h.md("rf")).Message)
	evs := h.events()
	assert.True(t, hasEvent(evs, "Warning FailedCreate", msg), "events: %v", evs)
	h.reconcile("rf")
	assert.False(t, hasEvent(h.events(), "Warning FailedCreate", ""), "the event is emitted once, when the condition turns")
}

// A model server the kubelet will not start (TorchServe's image, whose
// USER is the name model-server, under runAsNonRoot) is visible with the
// kubelet's message and the fix.
func TestModelServerTheKubeletRefusesIsVisible(t *testing.T) {
	h := newHarness(t)
	h.create(testutil.ModelDeployment("ts", "").Router(mlv1.RouterService).Version("v1", -1, "s3://m/v1").Obj())
	h.reconcile("ts")
	ctx := context.Background()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "ts-v1-abcde", Namespace: h.ns, Labels: map[string]string{
			mlv1.LabelModelDeployment: "ts", mlv1.LabelModelVersion: "v1", mlv1.LabelManagedBy: mlv1.ManagedByValue,
		}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: mdctrl.ContainerName, Image: "docker.io/pytorch/torchserve:0.12.0-cpu"}}},
	}
	require.NoError(t, k8s.Create(ctx, p))
	kubelet := `container has runAsNonRoot and image has non-numeric user (model-server), cannot verify user is non-root (pod: "ts-v1-abcde_` + h.ns + `", container: model-server)`
	p.Status = corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{
		Name: mdctrl.ContainerName, Image: p.Spec.Containers[0].Image,
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CreateContainerConfigError", Message: kubelet}},
	}}}
	require.NoError(t, k8s.Status().Update(ctx, p))
	require.Eventually(t, func() bool {
		h.reconcile("ts")
		return progressing(t, h.md("ts")).Reason == mlv1.ReasonContainerCannotStart
	}, testutil.Timeout, testutil.Interval)
	c := progressing(t, h.md("ts"))
	assert.Equal(t, metav1.ConditionFalse, c.Status)
	assert.True(t, strings.HasPrefix(c.Message, "version v1: pod ts-v1-abcde cannot start: container model-server: CreateContainerConfigError: "+kubelet), c.Message)
	assert.Contains(t, c.Message, "spec.podSecurityContext.runAsUser")
	// Not healthy either, though no pod was ever Ready.
	hc := meta.FindStatusCondition(h.md("ts").Status.Conditions, mlv1.ModelDeploymentHealthy)
	require.NotNil(t, hc)
	assert.Equal(t, metav1.ConditionFalse, hc.Status)
	assert.Equal(t, mlv1.ReasonContainerCannotStart, hc.Reason)
}

// A model the storage initializer cannot fetch is visible with the
// initializer's own message (its termination message, as the kubelet
// reports it in the pod's init container status).
func TestFailedModelFetchIsVisible(t *testing.T) {
	h := newHarness(t)
	h.create(testutil.ModelDeployment("mf", "").Router(mlv1.RouterService).Version("v1", -1, "http://store.models.svc/fraud-v3.json").Obj())
	h.reconcile("mf")
	d := h.deployment("mf-v1")
	require.Len(t, d.Spec.Template.Spec.InitContainers, 1)
	require.Equal(t, mlv1.StorageInitializerContainerName, d.Spec.Template.Spec.InitContainers[0].Name)
	ctx := context.Background()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "mf-v1-abcde", Namespace: h.ns, Labels: map[string]string{
			mlv1.LabelModelDeployment: "mf", mlv1.LabelModelVersion: "v1", mlv1.LabelManagedBy: mlv1.ManagedByValue,
		}},
		Spec: d.Spec.Template.Spec,
	}
	require.NoError(t, k8s.Create(ctx, p))
	const msg = "GET http://store.models.svc/fraud-v3.json: 404 Not Found"
	p.Status = corev1.PodStatus{Phase: corev1.PodPending,
		InitContainerStatuses: []corev1.ContainerStatus{{
			Name: mlv1.StorageInitializerContainerName, Image: p.Spec.InitContainers[0].Image, RestartCount: 2,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff",
				Message: "back-off 20s restarting failed container=storage-initializer"}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: 1, Reason: "Error", Message: msg}},
		}},
		ContainerStatuses: []corev1.ContainerStatus{{
			Name: mdctrl.ContainerName, Image: p.Spec.Containers[0].Image,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}},
		}},
	}
	require.NoError(t, k8s.Status().Update(ctx, p))
	require.Eventually(t, func() bool {
		h.reconcile("mf")
		return progressing(t, h.md("mf")).Reason == mlv1.ReasonModelFetchFailed
	}, testutil.Timeout, testutil.Interval)
	c := progressing(t, h.md("mf"))
	assert.Equal(t, metav1.ConditionFalse, c.Status)
	assert.Equal(t, "version v1: pod mf-v1-abcde: the storage initializer could not fetch the model: "+msg, c.Message)
	hc := meta.FindStatusCondition(h.md("mf").Status.Conditions, mlv1.ModelDeploymentHealthy)
	require.NotNil(t, hc)
	assert.Equal(t, metav1.ConditionFalse, hc.Status)
	assert.Equal(t, mlv1.ReasonModelFetchFailed, hc.Reason)
	assert.Equal(t, c.Message, hc.Message)
}
