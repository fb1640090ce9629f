package podgroups

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
)

// Kueue's plain-pod group integration: pods labelled with a queue and a
// group name, and annotated with the group's size, are admitted as one
// workload once all of them exist.
const (
	// KueueQueueLabel names the LocalQueue.
	KueueQueueLabel = "kueue.x-k8s.io/queue-name"
	// KueuePodGroupLabel names the group.
	KueuePodGroupLabel = "kueue.x-k8s.io/pod-group-name"
	// KueueGroupTotalCountAnnotation is the number of pods in the group.
	KueueGroupTotalCountAnnotation = "kueue.x-k8s.io/pod-group-total-count"
)

// JoinKueueGroup makes pod a member of the Kueue pod group named group, of
// size pods, queued in queue.
func JoinKueueGroup(pod *corev1.Pod, queue, group string, size int32) {
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[KueueQueueLabel] = queue
	pod.Labels[KueuePodGroupLabel] = group
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[KueueGroupTotalCountAnnotation] = strconv.Itoa(int(size))
}
