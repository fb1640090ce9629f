package trainingjob

import (
	"context"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

// +kubebuilder:rbac:groups=scheduling.volcano.sh,resources=podgroups,verbs=get;list;create;delete
// +kubebuilder:rbac:groups=scheduling.x-k8s.io,resources=podgroups,verbs=get;list;create;delete

// gangScheduler is a scheduler that admits a gang through a PodGroup object.
// The objects are unstructured: the operator does not import those projects.
type gangScheduler struct {
	gvk schema.GroupVersionKind
	// podAnnotation / podLabel is how a pod names its PodGroup.
	podAnnotation, podLabel string
	// priorityClass: the PodGroup spec has a priorityClassName (Volcano's
	// does; scheduler-plugins' has none, its CRD would prune it).
	priorityClass bool
}

var (
	// Volcano: scheduling.volcano.sh/v1beta1 PodGroup; pods carry the
	// scheduling.k8s.io/group-name annotation.
	volcanoScheduler = gangScheduler{
		gvk:           schema.GroupVersionKind{Group: "scheduling.volcano.sh", Version: "v1beta1", Kind: "PodGroup"},
		podAnnotation: "scheduling.k8s.io/group-name",
		priorityClass: true,
	}
	// scheduler-plugins coscheduling: scheduling.x-k8s.io/v1alpha1 PodGroup;
	// pods carry the scheduling.x-k8s.io/pod-group label.
	coschedulingScheduler = gangScheduler{
		gvk:      schema.GroupVersionKind{Group: "scheduling.x-k8s.io", Version: "v1alpha1", Kind: "PodGroup"},
		podLabel: "scheduling.x-k8s.io/pod-group",
	}
)

// gangSchedulerFor is the PodGroup flavour spec.scheduling.schedulerName
// asks for: "volcano", or the scheduler-plugins names
// "scheduler-plugins-scheduler" (its Helm chart's default) and "coscheduling".
func gangSchedulerFor(schedulerName string) (gangScheduler, bool) {
	switch schedulerName {
	case "volcano":
		return volcanoScheduler, true
	case "scheduler-plugins-scheduler", "coscheduling":
		return coschedulingScheduler, true
	}
	return gangScheduler{}, false
}

// podGroupName is the PodGroup of one gang attempt: a restarted (or
// rescaled) gang is a new group, as for Kueue.
func podGroupName(job *mlv1.TrainingJob, attempt int32) string {
	return fmt.Sprintf("%s-%d", job.Name, attempt)
}

// gangRequests is the sum of the gang's pods' requests (a limit counts as the
// request where none is set, as the API server defaults it).
func gangRequests(pods []*corev1.Pod) corev1.ResourceList {
	total := corev1.ResourceList{}
	for _, p := range pods {
		for _, c := range p.Spec.Containers {
			req := c.Resources.Requests
			for name, q := range c.Resources.Limits {
				if _, ok := req[name]; !ok {
					add(total, name, q)
				}
			}
			for name, q := range req {
				add(total, name, q)
			}
		}
	}
	return total
}

func add(l corev1.ResourceList, name corev1.ResourceName, q resource.Quantity) {
	sum := l[name]
	sum.Add(q)
	l[name] = sum
}

// desiredPodGroup is the PodGroup of a gang attempt: minMember = every pod of
// the gang (ranks and parameter servers), minResources = their total requests.
func desiredPodGroup(job *mlv1.TrainingJob, gs gangScheduler, attempt int32, gang []*corev1.Pod) *unstructured.Unstructured {
	pg := &unstructured.Unstructured{}
	pg.SetGroupVersionKind(gs.gvk)
	pg.SetNamespace(job.Namespace)
	pg.SetName(podGroupName(job, attempt))
	l := childLabels(job)
	l[mlv1.LabelRestartAttempt] = strconv.Itoa(int(attempt))
	pg.SetLabels(l)
	pg.SetOwnerReferences([]metav1.OwnerReference{ownerRef(job)})
	res := map[string]any{}
	for name, q := range gangRequests(gang) {
		res[string(name)] = q.String()
	}
	spec := map[string]any{"minMember": int64(gangSize(&job.Spec))}
	if len(res) > 0 {
		spec["minResources"] = res
	}
	if job.Spec.Scheduling.PriorityClassName != "" && gs.priorityClass {
		spec["priorityClassName"] = job.Spec.Scheduling.PriorityClassName
	}
	pg.Object["spec"] = spec
	return pg
}

// annotateForPodGroup makes a pod name its PodGroup.
func annotateForPodGroup(pod *corev1.Pod, gs gangScheduler, name string) {
	if gs.podAnnotation != "" {
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		pod.Annotations[gs.podAnnotation] = name
	}
	if gs.podLabel != "" {
		pod.Labels[gs.podLabel] = name
	}
}

// ensurePodGroup creates the PodGroup of the attempt before its pods, and
// deletes the groups of earlier attempts. It returns the scheduler and group
// name to put on the pods, or ok=false when the job uses no gang scheduler or
// its PodGroup CRD is not installed (discovery), in which case the pods are
// created without one.
func (r *Reconciler) ensurePodGroup(ctx context.Context, job *mlv1.TrainingJob, attempt int32, gang []*corev1.Pod) (gangScheduler, string, bool, error) {
	gs, ok := gangSchedulerFor(job.Spec.Scheduling.SchedulerName)
	if !ok {
		return gangScheduler{}, "", false, nil
	}
	if _, err := r.client.RESTMapper().RESTMapping(gs.gvk.GroupKind(), gs.gvk.Version); err != nil {
		if meta.IsNoMatchError(err) {
			return gangScheduler{}, "", false, nil
		}
		return gangScheduler{}, "", false, fmt.Errorf("discovering %s: %w", gs.gvk.GroupKind(), err)
	}
	want := desiredPodGroup(job, gs, attempt, gang)
	if err := r.client.Create(ctx, want); err != nil && !apierrors.IsAlreadyExists(err) {
		return gangScheduler{}, "", false, fmt.Errorf("creating %s %s (spec.scheduling.schedulerName %s): %w",
			gs.gvk.Kind, want.GetName(), job.Spec.Scheduling.SchedulerName, err)
	}
	// Earlier attempts' groups would hold minMember for pods that no longer exist.
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gs.gvk.GroupVersion().WithKind(gs.gvk.Kind + "List"))
	if err := r.client.List(ctx, list, client.InNamespace(job.Namespace), client.MatchingLabels{mlv1.LabelTrainingJob: job.Name}); err != nil {
		return gangScheduler{}, "", false, fmt.Errorf("listing %s of the job: %w", gs.gvk.Kind, err)
	}
	for i := range list.Items {
		old := &list.Items[i]
		if old.GetName() == want.GetName() || !metav1.IsControlledBy(old, job) {
			continue
		}
		if err := r.client.Delete(ctx, old); err != nil && !apierrors.IsNotFound(err) {
			return gangScheduler{}, "", false, fmt.Errorf("deleting %s %s of an earlier attempt: %w", gs.gvk.Kind, old.GetName(), err)
		}
	}
	return gs, want.GetName(), true, nil
}
