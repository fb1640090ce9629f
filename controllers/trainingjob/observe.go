package trainingjob

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

// observation is what a pass sees of the job's pods: the pods it controls
// (from the cache) and the nodes they are bound to.
type observation struct {
	pods  []*corev1.Pod
	nodes map[string]nodeInfo
}

// observe lists the job's pods and looks up their nodes. Pods stuck
// Terminating on a lost node are force-deleted on the way: whatever deleted
// them (a restart, suspend, cleanup or someone else), they must not block
// the job.
func (r *Reconciler) observe(ctx context.Context, p *pass) (*observation, error) {
	pods, err := r.listPods(ctx, p.job)
	if err != nil {
		return nil, err
	}
	nodes, err := r.nodeInfos(ctx, pods)
	if err != nil {
		return nil, err
	}
	if err := r.forceDeleteStuck(ctx, p, pods, nodes); err != nil {
		return nil, err
	}
	return &observation{pods: pods, nodes: nodes}, nil
}

// attemptPods are the job's pods sorted by the current attempt.
type attemptPods struct {
	attempt int32
	// current are the attempt's worker pods, ps its TensorFlow parameter
	// servers, and stale the pods of older attempts, which are deleted.
	current, ps, stale []*corev1.Pod
}

// splitByAttempt sorts pods by the attempt label they carry.
func splitByAttempt(pods []*corev1.Pod, attempt int32) attemptPods {
	g := attemptPods{attempt: attempt}
	for _, pod := range pods {
		switch {
		case attemptOf(pod) != attempt:
			g.stale = append(g.stale, pod)
		case isPS(pod):
			g.ps = append(g.ps, pod)
		default:
			g.current = append(g.current, pod)
		}
	}
	return g
}

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
