package manager

import (
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
// Namespaces are the one kind cached without a label selector (they are not
// ours): the controllers watch their metadata only, to see a namespace being
// deleted before they create anything in it, and a cached namespace keeps
// only its name, UID, resourceVersion, deletion timestamp and Istio mesh
// labels (trimNamespace).
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
// drops the rest of the spec (volumes, mounts, probes, security contexts,
// tolerations, affinity, ports, commands), which they only ever write:
//
//   - all metadata but managedFields: names, labels (rank, attempt, job,
//     version), annotations, owner references, UID, creation and deletion
//     timestamps;
//   - spec.nodeName (the node-loss check and the node index);
//   - per container: name and resources (the job's allocated GPUs). Env
//     and image are dropped: a gang's shape is read from the pod's labels
//     (ml.example.com/num-workers, ml.example.com/tf-cluster-hash), never
//     from its env, and no controller reads a cached pod's image;
//   - the whole status (phase, reason, message, conditions, container
//     states and exit codes, pod IP for the progress scrape).
//
// A cached pod is never written back (pods are only created and deleted),
// so nothing dropped here can be lost on the API server.
func trimPod(pod *corev1.Pod) *corev1.Pod {
	out := &corev1.Pod{TypeMeta: pod.TypeMeta, ObjectMeta: pod.ObjectMeta, Status: pod.Status}
	out.Spec.NodeName = pod.Spec.NodeName
	out.Spec.Containers = make([]corev1.Container, 0, len(pod.Spec.Containers))
	for _, c := range pod.Spec.Containers {
		out.Spec.Containers = append(out.Spec.Containers, corev1.Container{
			Name: c.Name, Resources: c.Resources,
		})
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

var (
	_ toolscache.TransformFunc = transformPod
	_ toolscache.TransformFunc = transformNamespace
)
