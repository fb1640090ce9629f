package manager

import (
	"unique"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/ml-operator/ml-operator/controllers/modeldeployment"
)

// The informer cache holds every object the controllers watch for as long as
// it exists, so what it keeps of each object is the manager's memory. Two
// transforms run on each object before it is stored (and indexed):
//
//   - every kind loses metadata.managedFields, which neither controller reads
//     and which is about half of a worker pod as the API server sends it
//     (the kubelet's, the scheduler's and the operator's field sets). Update
//     and Patch stay safe: the API server keeps the stored managedFields
//     when a write leaves them out.
//   - a pod keeps only what the controllers read from it (trimPod).
//
// Namespaces and Nodes are the kinds cached without a label selector (they
// are not ours). The controllers watch namespaces' metadata only, to see a
// namespace being deleted before they create anything in it, and a cached
// namespace keeps only its name, UID, resourceVersion, deletion timestamp
// and Istio mesh labels (trimNamespace). A cached Node keeps only its
// identity and whether it is cordoned (trimNode).
var (
	stripManagedFields = cache.TransformStripManagedFields()
)

// transformObject is the cache's DefaultTransform.
func transformObject(obj any) (any, error) {
	return stripManagedFields(obj)
}

// transformPod is the cache's transform for Pods.
func transformPod(obj any) (any, error) {
	obj, err := stripManagedFields(obj)
	if err != nil {
		return obj, err
	}
	if pod, ok := obj.(*corev1.Pod); ok {
		return trimPod(pod), nil
	}
	// A tombstone (DeletedFinalStateUnknown) or anything else passes as is.
	return obj, nil
}

// trimPod keeps the parts of a pod the controllers read from the cache, and
// drops the rest, which they only ever write or never look at:
//
//   - metadata but managedFields and annotations: names, labels (rank,
//     attempt, job, version, the gang's shape), owner references, UID,
//     resourceVersion, creation and deletion timestamps. No controller
//     reads a pod's annotations back (the template's are copied onto the
//     pods it creates, and that is all);
//   - spec.nodeName (the node-loss check and the node index);
//   - per container, only its resource limits, and only for a container
//     that has some: the job's allocated GPUs are summed from the limits
//     (trainingjob's allocation), and nothing else reads a cached pod's
//     containers. Env, image, command, requests, mounts, probes and the
//     security context are dropped: a gang's shape is read from the pod's
//     labels (ml.example.com/num-workers, ml.example.com/tf-cluster-hash),
//     never from its env;
//   - of the status: phase, reason, message, pod IP (the progress scrape),
//     the conditions (scheduling, readiness, disruption), and per container
//     and init container its name, readiness, restart count, state and last
//     state (exit codes, termination messages, why it is waiting). Host
//     IPs, pod IPs, QoS class, start time, images and container IDs go.
//
// The short strings many pods share (label keys and values, owner kinds
// and API versions, the namespace, the node name, condition types, statuses
// and reasons, phases and container names) are interned (unique.Make): the
// pods decoded between two garbage collections share one copy of each,
// instead of each holding its own.
//
// A cached pod is never written back (pods are only created and deleted),
// so nothing dropped here can be lost on the API server.
func trimPod(pod *corev1.Pod) *corev1.Pod {
	out := &corev1.Pod{TypeMeta: pod.TypeMeta, ObjectMeta: pod.ObjectMeta}
	out.Annotations = nil
	out.Namespace = intern(out.Namespace)
	out.Labels = internMap(out.Labels)
	for i := range out.OwnerReferences {
		o := &out.OwnerReferences[i]
		o.APIVersion, o.Kind = intern(o.APIVersion), intern(o.Kind)
	}
	out.Spec.NodeName = intern(pod.Spec.NodeName)
	for _, c := range pod.Spec.Containers {
		if len(c.Resources.Limits) > 0 {
			out.Spec.Containers = append(out.Spec.Containers, corev1.Container{
				Resources: corev1.ResourceRequirements{Limits: c.Resources.Limits},
			})
		}
	}
	st := &pod.Status
	out.Status = corev1.PodStatus{
		Phase: corev1.PodPhase(intern(string(st.Phase))), Reason: st.Reason, Message: st.Message, PodIP: st.PodIP,
		Conditions:            trimConditions(st.Conditions),
		InitContainerStatuses: trimContainerStatuses(st.InitContainerStatuses),
		ContainerStatuses:     trimContainerStatuses(st.ContainerStatuses),
	}
	return out
}

// trimConditions is a copy of a pod's conditions with their type, status
// and reason interned.
func trimConditions(in []corev1.PodCondition) []corev1.PodCondition {
	if len(in) == 0 {
		return nil
	}
	out := make([]corev1.PodCondition, len(in))
	for i, c := range in {
		c.Type = corev1.PodConditionType(intern(string(c.Type)))
		c.Status = corev1.ConditionStatus(intern(string(c.Status)))
		c.Reason = intern(c.Reason)
		out[i] = c
	}
	return out
}

// trimContainerStatuses keeps what the controllers read of a container's
// status: its name, readiness, restart count, state and last state.
func trimContainerStatuses(in []corev1.ContainerStatus) []corev1.ContainerStatus {
	if len(in) == 0 {
		return nil
	}
	out := make([]corev1.ContainerStatus, len(in))
	for i, c := range in {
		out[i] = corev1.ContainerStatus{Name: intern(c.Name), Ready: c.Ready, RestartCount: c.RestartCount,
			State: c.State, LastTerminationState: c.LastTerminationState}
	}
	return out
}

// intern returns the canonical copy of s (unique.Make). The canonical copy
// lives as long as anything refers to it; the table's entry for it is
// dropped at a garbage collection once no handle is left, so interning
// never keeps a string alive by itself.
func intern(s string) string {
	if s == "" {
		return s
	}
	return unique.Make(s).Value()
}

// internMap is a copy of m with interned keys and values.
func internMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[intern(k)] = intern(v)
	}
	return out
}

// transformNamespace is the cache's transform for Namespaces.
func transformNamespace(obj any) (any, error) {
	obj, err := stripManagedFields(obj)
	if err != nil {
		return obj, err
	}
	if ns, ok := obj.(*metav1.PartialObjectMetadata); ok {
		return trimNamespace(ns), nil
	}
	// A full Namespace (no controller reads one) or a tombstone passes as is.
	return obj, nil
}

// trimNamespace keeps what the controllers read from a namespace's metadata:
// its deletion timestamp (controllers/namespaces), the Istio mesh labels
// router auto reads (modeldeployment.NamespaceLabels), and the identity an
// informer needs. Other labels and the annotations (a
// last-applied-configuration can be large) are dropped.
func trimNamespace(ns *metav1.PartialObjectMetadata) *metav1.PartialObjectMetadata {
	var labels map[string]string
	for _, k := range modeldeployment.NamespaceLabels {
		if v, ok := ns.Labels[k]; ok {
			if labels == nil {
				labels = map[string]string{}
			}
			labels[k] = v
		}
	}
	return &metav1.PartialObjectMetadata{TypeMeta: ns.TypeMeta, ObjectMeta: metav1.ObjectMeta{
		Name: ns.Name, UID: ns.UID, ResourceVersion: ns.ResourceVersion, DeletionTimestamp: ns.DeletionTimestamp, Labels: labels,
	}}
}

// transformNode is the cache's transform for Nodes.
func transformNode(obj any) (any, error) {
	if node, ok := obj.(*corev1.Node); ok {
		return trimNode(node), nil
	}
	// A tombstone passes as is.
	return obj, nil
}

// trimNode keeps what the TrainingJob controller reads from a cached Node:
// that it exists (name, UID, resourceVersion, deletion timestamp) and
// whether it is cordoned for a drain, spec.unschedulable and the
// node.kubernetes.io/unschedulable taint (trainingjob's cordonOf). Labels,
// annotations, the other taints and the whole status (conditions,
// addresses, images, capacity: most of a Node, and what its heartbeats
// change) are dropped; the rare readiness check reads a Node uncached.
func trimNode(node *corev1.Node) *corev1.Node {
	out := &corev1.Node{TypeMeta: node.TypeMeta, ObjectMeta: metav1.ObjectMeta{
		Name: node.Name, UID: node.UID, ResourceVersion: node.ResourceVersion, DeletionTimestamp: node.DeletionTimestamp,
	}}
	out.Spec.Unschedulable = node.Spec.Unschedulable
	for _, t := range node.Spec.Taints {
		if t.Key == corev1.TaintNodeUnschedulable {
			out.Spec.Taints = append(out.Spec.Taints, t)
		}
	}
	return out
}

var (
	_ toolscache.TransformFunc = transformPod
	_ toolscache.TransformFunc = transformNamespace
	_ toolscache.TransformFunc = transformNode
)
