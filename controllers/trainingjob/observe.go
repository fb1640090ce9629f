package trainingjob

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

// seenRanks are the ranks whose pod a previous pass observed in the current attempt.
func seenRanks(st *mlv1.TrainingJobStatus) map[int32]bool {
	seen := map[int32]bool{}
	for _, ws := range st.WorkerStatuses {
		if ws.Phase != "" {
			seen[ws.Rank] = true
		}
	}
	return seen
}

// listPods returns the pods the job controls, from the narrow cache.
func (r *Reconciler) listPods(ctx context.Context, job *mlv1.TrainingJob) ([]*corev1.Pod, error) {
	var list corev1.PodList
	if err := r.client.List(ctx, &list, client.InNamespace(job.Namespace),
		client.MatchingLabels{mlv1.LabelTrainingJob: job.Name, mlv1.LabelManagedBy: mlv1.ManagedByValue}); err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	pods := make([]*corev1.Pod, 0, len(list.Items))
	for i := range list.Items {
		pod := &list.Items[i]
		// A job recreated under the same name must not adopt its
		// predecessor's pods.
		if metav1.IsControlledBy(pod, job) {
			pods = append(pods, pod)
		}
	}
	r.expect.observe(job.UID, pods)
	return pods, nil
}
