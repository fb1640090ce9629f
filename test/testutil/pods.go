package testutil

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// envtest has no kubelet or scheduler: these helpers play their part, the way
// jobset's integration tests write Job status by hand.

// PodStatusOption changes a pod status before it is written.
type PodStatusOption func(*corev1.PodStatus)

// WithPodIP sets status.podIP.
func WithPodIP(ip string) PodStatusOption {
	return func(s *corev1.PodStatus) { s.PodIP = ip; s.PodIPs = []corev1.PodIP{{IP: ip}} }
}

// WithExitCode marks the named container terminated with code and reason.
func WithExitCode(container string, code int32, reason string) PodStatusOption {
	return func(s *corev1.PodStatus) {
		s.ContainerStatuses = []corev1.ContainerStatus{{Name: container, Image: "img", ImageID: "img",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason}}}}
	}
}

// WithPodCondition adds a pod condition with status True.
func WithPodCondition(t corev1.PodConditionType, reason string) PodStatusOption {
	return func(s *corev1.PodStatus) {
		s.Conditions = append(s.Conditions, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, Reason: reason,
			LastTransitionTime: metav1.Now()})
	}
}

// WithPodReason sets status.reason and status.message.
func WithPodReason(reason, message string) PodStatusOption {
	return func(s *corev1.PodStatus) { s.Reason, s.Message = reason, message }
}

// SetPodPhase writes a pod's phase (and options) through the status subresource.
func SetPodPhase(ctx context.Context, c client.Client, namespace, name string, phase corev1.PodPhase, opts ...PodStatusOption) error {
	pod := &corev1.Pod{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, pod); err != nil {
		return err
	}
	pod.Status.Phase = phase
	for _, o := range opts {
		o(&pod.Status)
	}
	if err := c.Status().Update(ctx, pod); err != nil {
		return fmt.Errorf("writing status of pod %s: %w", name, err)
	}
	return nil
}

// BindPod binds a pod to a node, as the scheduler would.
func BindPod(ctx context.Context, c client.Client, namespace, name, node string) error {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	return c.SubResource("binding").Create(ctx, pod, &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Target:     corev1.ObjectReference{Kind: "Node", Name: node},
	})
}

// ReadyNode creates a Node whose Ready condition is True.
func ReadyNode(ctx context.Context, c client.Client, name string, labels map[string]string) (*corev1.Node, error) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	if err := c.Create(ctx, node); err != nil {
		return nil, err
	}
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
		LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
	return node, c.Status().Update(ctx, node)
}

// FinishTerminatingPods force-deletes the pods matching the selector that
// are being deleted, as a kubelet confirming their termination would.
func FinishTerminatingPods(ctx context.Context, c client.Client, namespace string, selector client.MatchingLabels) error {
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(namespace), selector); err != nil {
		return err
	}
	for i := range pods.Items {
		if pods.Items[i].DeletionTimestamp == nil {
			continue
		}
		if err := client.IgnoreNotFound(c.Delete(ctx, &pods.Items[i], client.GracePeriodSeconds(0))); err != nil {
			return err
		}
	}
	return nil
}
