package trainingjob

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

// nodeInfo is what the controller knows about the node of a pod.
type nodeInfo struct {
	// gone: the Node object no longer exists.
	gone bool
	// notReadySince is when the node's Ready condition stopped being True;
	// zero when it is ready or unknown.
	notReadySince time.Time
	// cordoned says how the node was cordoned for a drain
	// (cordonOf); empty when it is schedulable.
	cordoned string
}

// cordonOf says how a node is cordoned: "spec.unschedulable" (kubectl
// cordon and kubectl drain set it), "taint node.kubernetes.io/unschedulable"
// (what the node lifecycle controller mirrors it into, and what some
// drain tools set alone), or "" for a schedulable node. Only these two
// fields of a Node are cached (internal/manager's node transform).
func cordonOf(node *corev1.Node) string {
	if node.Spec.Unschedulable {
		return "spec.unschedulable"
	}
	for _, t := range node.Spec.Taints {
		if t.Key == corev1.TaintNodeUnschedulable && t.Effect == corev1.TaintEffectNoSchedule {
			return "taint " + corev1.TaintNodeUnschedulable
		}
	}
	return ""
}

// toleratesCordon reports tolerations that let the scheduler place a pod
// on a cordoned node (the node.kubernetes.io/unschedulable NoSchedule
// taint, which carries no value): such a gang would come back to the
// node it was taken off, so a cordon is not acted on for it (a drain's
// evictions still are).
func toleratesCordon(tolerations []corev1.Toleration) bool {
	for _, t := range tolerations {
		if t.Effect != "" && t.Effect != corev1.TaintEffectNoSchedule {
			continue
		}
		switch {
		case t.Key == "" && t.Operator == corev1.TolerationOpExists:
			return true
		case t.Key == corev1.TaintNodeUnschedulable &&
			(t.Operator == corev1.TolerationOpExists || t.Value == ""):
			return true
		}
	}
	return false
}

// lost reports whether a node counts as lost at now, and when it will if it
// is NotReady but still inside the grace period.
func (n nodeInfo) lost(now time.Time, grace time.Duration) (bool, time.Time) {
	if n.gone {
		return true, time.Time{}
	}
	if n.notReadySince.IsZero() {
		return false, time.Time{}
	}
	at := n.notReadySince.Add(grace)
	if !now.Before(at) {
		return true, time.Time{}
	}
	return false, at
}

// forceDeleteStuck force-deletes pods stuck Terminating on a lost node once
// their own grace period has passed: no kubelet will ever confirm them.
func (r *Reconciler) forceDeleteStuck(ctx context.Context, p *pass, pods []*corev1.Pod, nodes map[string]nodeInfo) error {
	var errs []error
	var forced []string
	for _, pod := range pods {
		if pod.DeletionTimestamp == nil {
			continue
		}
		n, ok := nodes[pod.Spec.NodeName]
		if !ok {
			continue
		}
		lost, at := n.lost(p.now, r.cfg.NodeLostGracePeriod)
		if !lost {
			p.requeue(at)
			continue
		}
		if p.now.Before(pod.DeletionTimestamp.Time) {
			p.requeue(pod.DeletionTimestamp.Time)
			continue
		}
		err := r.client.Delete(ctx, pod, client.GracePeriodSeconds(0), client.Preconditions{UID: &pod.UID})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			errs = append(errs, fmt.Errorf("force-deleting pod %s on lost node %s: %w", pod.Name, pod.Spec.NodeName, err))
			continue
		}
		forced = append(forced, fmt.Sprintf("%s (node %s)", pod.Name, pod.Spec.NodeName))
	}
	if len(forced) > 0 {
		p.actionEvent(corev1.EventTypeWarning, mlv1.EventForceDeleted, "force-deleted %d pods stuck terminating on lost nodes: %s",
			len(forced), strings.Join(forced, ", "))
	}
	return errors.Join(errs...)
}

// nodeInfos looks up the nodes the pods are bound to. Presence and the
// cordon come from the cache, which keeps of a Node only its identity,
// spec.unschedulable and the unschedulable taint (a node missing there is
// confirmed uncached before it is called gone); readiness is read uncached,
// and only for nodes whose running pods lost their Ready condition, which
// the node lifecycle controller does when a node goes NotReady.
func (r *Reconciler) nodeInfos(ctx context.Context, pods []*corev1.Pod) (map[string]nodeInfo, error) {
	suspect := map[string]bool{}
	names := map[string]bool{}
	for _, pod := range pods {
		if pod.Spec.NodeName == "" {
			continue
		}
		names[pod.Spec.NodeName] = true
		if pod.Status.Phase == corev1.PodRunning && podReadyFalse(pod) {
			suspect[pod.Spec.NodeName] = true
		}
	}
	infos := make(map[string]nodeInfo, len(names))
	for name := range names {
		cached := &corev1.Node{}
		err := r.client.Get(ctx, client.ObjectKey{Name: name}, cached)
		if apierrors.IsNotFound(err) {
			node := &corev1.Node{}
			err = r.apiReader.Get(ctx, client.ObjectKey{Name: name}, node)
			if apierrors.IsNotFound(err) {
				infos[name] = nodeInfo{gone: true}
				continue
			}
			if err == nil {
				infos[name] = infoOf(node)
				continue
			}
		}
		if err != nil {
			return nil, fmt.Errorf("reading node %s: %w", name, err)
		}
		if !suspect[name] {
			infos[name] = nodeInfo{cordoned: cordonOf(cached)}
			continue
		}
		node := &corev1.Node{}
		if err := r.apiReader.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
			if apierrors.IsNotFound(err) {
				infos[name] = nodeInfo{gone: true}
				continue
			}
			return nil, fmt.Errorf("reading node %s: %w", name, err)
		}
		infos[name] = infoOf(node)
	}
	return infos, nil
}

// infoOf is what a whole Node (read uncached) says: its readiness and cordon.
func infoOf(node *corev1.Node) nodeInfo {
	info := readinessOf(node)
	info.cordoned = cordonOf(node)
	return info
}

// readinessOf is when a node's Ready condition stopped being True.
func readinessOf(node *corev1.Node) nodeInfo {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status != corev1.ConditionTrue {
			return nodeInfo{notReadySince: c.LastTransitionTime.Time}
		}
	}
	return nodeInfo{}
}

// podReadyFalse reports a pod whose Ready condition is False.
func podReadyFalse(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionFalse
		}
	}
	return false
}
