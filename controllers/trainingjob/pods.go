package trainingjob

import (
	"fmt"
	"sort"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

// describePod names a pod for messages: "rank 1 (pod x-worker-1)" or
// "ps 0 (pod x-ps-0)".
func describePod(p *corev1.Pod) string {
	kind := "rank"
	if isPS(p) {
		kind = "ps"
	}
	return fmt.Sprintf("%s %d (pod %s)", kind, rankOf(p), p.Name)
}

// isPS reports a TensorFlow parameter-server pod.
func isPS(p *corev1.Pod) bool { return p.Labels[mlv1.LabelReplicaType] == mlv1.ReplicaTypePS }

// isTerminal reports whether the pod has finished (Succeeded or Failed).
func isTerminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// rankOf is a pod's rank label (a parameter server's index), -1 when
// missing or malformed.
func rankOf(p *corev1.Pod) int32 {
	n, err := strconv.Atoi(p.Labels[mlv1.LabelRank])
	if err != nil {
		return -1
	}
	return int32(n)
}

// attemptOf is a pod's restart-attempt label, -1 when missing or malformed.
func attemptOf(p *corev1.Pod) int32 {
	n, err := strconv.Atoi(p.Labels[mlv1.LabelRestartAttempt])
	if err != nil {
		return -1
	}
	return int32(n)
}

// sortedByRank returns the pods ordered by rank, so decisions name the lowest
// failing rank deterministically.
func sortedByRank(pods []*corev1.Pod) []*corev1.Pod {
	out := append([]*corev1.Pod(nil), pods...)
	sort.Slice(out, func(i, j int) bool { return rankOf(out[i]) < rankOf(out[j]) })
	return out
}

// workersOnly drops parameter-server pods.
func workersOnly(pods []*corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range pods {
		if !isPS(p) {
			out = append(out, p)
		}
	}
	return out
}
