// Package podgroups has a gang admitted as one unit by the gang schedulers
// the TrainingJob controller supports: Kueue's plain-pod groups (labels on
// the pods, kueue.go), the PodGroup objects of Volcano and of
// scheduler-plugins' coscheduling (this file), and Kubernetes' own
// scheduling.k8s.io/v1alpha2 Workload and PodGroup (native.go). Volcano's and
// coscheduling's objects are unstructured: the operator imports neither
// project. The package knows
// nothing of TrainingJobs: the controller describes each gang attempt as a
// Gang.
package podgroups

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Gang is one gang attempt as a gang scheduler sees it.
type Gang struct {
	// Namespace and Name of the group; a restarted gang is a new group.
	Namespace, Name string
	// Labels are the PodGroup's labels.
	Labels map[string]string
	// Siblings selects, with Owner, the groups of the same job's other
	// attempts, which Ensure deletes.
	Siblings map[string]string
	// Owner is the group's controlling owner (the job).
	Owner metav1.OwnerReference
	// MinMember is the number of pods the scheduler admits together.
	MinMember int32
	// Pods are the gang's pods; their requests add up to minResources.
	Pods []*corev1.Pod
	// PriorityClassName is the gang's priority, for schedulers whose
	// PodGroup has one.
	PriorityClassName string
}

// Scheduler is a scheduler that admits a gang through a PodGroup object.
type Scheduler struct {
	// flavour is "volcano" or "coscheduling".
	flavour string
	gvk     schema.GroupVersionKind
	// podAnnotation / podLabel is how a pod names its PodGroup.
	podAnnotation, podLabel string
	// priorityClass: the PodGroup spec has a priorityClassName (Volcano's
	// does; scheduler-plugins' has none, its CRD would prune it).
	priorityClass bool
	// native: Kubernetes' own Workload and PodGroup (native.go); pods name
	// the group in spec.schedulingGroup.
	native bool
}

var (
	// Volcano: scheduling.volcano.sh/v1beta1 PodGroup; pods carry the
	// scheduling.k8s.io/group-name annotation.
	volcano = Scheduler{
		flavour:       "volcano",
		gvk:           schema.GroupVersionKind{Group: "scheduling.volcano.sh", Version: "v1beta1", Kind: "PodGroup"},
		podAnnotation: "scheduling.k8s.io/group-name",
		priorityClass: true,
	}
	// scheduler-plugins coscheduling: scheduling.x-k8s.io/v1alpha1 PodGroup;
	// pods carry the scheduling.x-k8s.io/pod-group label.
	coscheduling = Scheduler{
		flavour:  "coscheduling",
		gvk:      schema.GroupVersionKind{Group: "scheduling.x-k8s.io", Version: "v1alpha1", Kind: "PodGroup"},
		podLabel: "scheduling.x-k8s.io/pod-group",
	}
)

// SchedulerFor is the PodGroup flavour a pod's schedulerName asks for:
// "volcano", or the scheduler-plugins names "scheduler-plugins-scheduler"
// (its Helm chart's default) and "coscheduling".
func SchedulerFor(schedulerName string) (Scheduler, bool) {
	switch schedulerName {
	case "volcano":
		return volcano, true
	case "scheduler-plugins-scheduler", "coscheduling":
		return coscheduling, true
	}
	return Scheduler{}, false
}

// Flavour is which gang scheduler s is: "volcano", "coscheduling" or
// "native" (kube-scheduler's GangScheduling plugin).
func (s Scheduler) Flavour() string { return s.flavour }

// GroupVersionKind is the scheduler's PodGroup kind.
func (s Scheduler) GroupVersionKind() schema.GroupVersionKind { return s.gvk }

// Join makes a pod name its PodGroup, group.
func (s Scheduler) Join(pod *corev1.Pod, group string) {
	if s.native {
		pod.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: &group}
		return
	}
	if s.podAnnotation != "" {
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		pod.Annotations[s.podAnnotation] = group
	}
	if s.podLabel != "" {
		if pod.Labels == nil {
			pod.Labels = map[string]string{}
		}
		pod.Labels[s.podLabel] = group
	}
}

// desired is the PodGroup of a gang: minMember, and minResources = the
// pods' total requests.
func (s Scheduler) desired(g Gang) *unstructured.Unstructured {
	pg := &unstructured.Unstructured{}
	pg.SetGroupVersionKind(s.gvk)
	pg.SetNamespace(g.Namespace)
	pg.SetName(g.Name)
	pg.SetLabels(g.Labels)
	pg.SetOwnerReferences([]metav1.OwnerReference{g.Owner})
	res := map[string]any{}
	for name, q := range requests(g.Pods) {
		res[string(name)] = q.String()
	}
	spec := map[string]any{"minMember": int64(g.MinMember)}
	if len(res) > 0 {
		spec["minResources"] = res
	}
	if g.PriorityClassName != "" && s.priorityClass {
		spec["priorityClassName"] = g.PriorityClassName
	}
	pg.Object["spec"] = spec
	return pg
}

// requests is the sum of the pods' requests (a limit counts as the request
// where none is set, as the API server defaults it).
func requests(pods []*corev1.Pod) corev1.ResourceList {
	total := corev1.ResourceList{}
	add := func(name corev1.ResourceName, q resource.Quantity) {
		sum := total[name]
		sum.Add(q)
		total[name] = sum
	}
	for _, p := range pods {
		for _, c := range p.Spec.Containers {
			req := c.Resources.Requests
			for name, q := range c.Resources.Limits {
				if _, ok := req[name]; !ok {
					add(name, q)
				}
			}
			for name, q := range req {
				add(name, q)
			}
		}
	}
	return total
}

// Ensurer creates the PodGroup of a gang attempt before its pods exist.
type Ensurer interface {
	// Ensure creates g's PodGroup when schedulerName is a gang scheduler
	// whose PodGroup kind is installed, and deletes the groups of g's
	// siblings. ok reports whether the pods must join the group (with
	// Scheduler.Join); it is false when there is no such scheduler or kind,
	// and the pods are created without one.
	Ensure(ctx context.Context, schedulerName string, g Gang) (s Scheduler, ok bool, err error)
	// Installed reports whether schedulerName is a gang scheduler whose
	// PodGroup kind the API server serves, or the default scheduler and the
	// API server serves scheduling.k8s.io/v1alpha2 PodGroups (native gang
	// scheduling): then that scheduler places the gang all-or-nothing.
	Installed(ctx context.Context, schedulerName string) (s Scheduler, ok bool, err error)
}

// Client is the Ensurer that writes PodGroups through the API server.
type Client struct {
	client client.Client
	// now is the clock of the native discovery's negative cache.
	now             func() time.Time
	nativeDiscovery nativeDiscovery
}

var _ Ensurer = &Client{}

// NewClient returns an Ensurer writing through c, whose RESTMapper tells
// which PodGroup kinds are installed; now is the clock (time.Now when nil).
func NewClient(c client.Client, now func() time.Time) *Client {
	if now == nil {
		now = time.Now
	}
	return &Client{client: c, now: now}
}

// Installed implements Ensurer. A gang scheduler's name costs a discovery
// look-up (which the RESTMapper caches); the default scheduler's costs one
// per nativeRecheck while the native kind is not served.
func (c *Client) Installed(_ context.Context, schedulerName string) (Scheduler, bool, error) {
	if IsDefaultScheduler(schedulerName) {
		served, err := c.nativeServed()
		if !served || err != nil {
			return Scheduler{}, false, err
		}
		return native, true, nil
	}
	s, ok := SchedulerFor(schedulerName)
	if !ok {
		return Scheduler{}, false, nil
	}
	if _, err := c.client.RESTMapper().RESTMapping(s.gvk.GroupKind(), s.gvk.Version); err != nil {
		if meta.IsNoMatchError(err) {
			return Scheduler{}, false, nil
		}
		return Scheduler{}, false, fmt.Errorf("discovering %s: %w", s.gvk.GroupKind(), err)
	}
	return s, true, nil
}

// Ensure implements Ensurer.
func (c *Client) Ensure(ctx context.Context, schedulerName string, g Gang) (Scheduler, bool, error) {
	s, ok, err := c.Installed(ctx, schedulerName)
	if !ok || err != nil {
		return Scheduler{}, false, err
	}
	if s.native {
		if err := c.ensureNative(ctx, g); err != nil {
			return Scheduler{}, false, err
		}
		return s, true, nil
	}
	want := s.desired(g)
	if err := c.client.Create(ctx, want); err != nil && !apierrors.IsAlreadyExists(err) {
		return Scheduler{}, false, fmt.Errorf("creating %s %s (spec.scheduling.schedulerName %s): %w",
			s.gvk.Kind, want.GetName(), schedulerName, err)
	}
	// Earlier attempts' groups would hold minMember for pods that no longer exist.
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(s.gvk.GroupVersion().WithKind(s.gvk.Kind + "List"))
	if err := c.client.List(ctx, list, client.InNamespace(g.Namespace), client.MatchingLabels(g.Siblings)); err != nil {
		return Scheduler{}, false, fmt.Errorf("listing %s of the job: %w", s.gvk.Kind, err)
	}
	for i := range list.Items {
		old := &list.Items[i]
		if old.GetName() == want.GetName() || !controlledBy(old, g.Owner) {
			continue
		}
		if err := c.client.Delete(ctx, old); err != nil && !apierrors.IsNotFound(err) {
			return Scheduler{}, false, fmt.Errorf("deleting %s %s of an earlier attempt: %w", s.gvk.Kind, old.GetName(), err)
		}
	}
	return s, true, nil
}

// controlledBy reports whether owner is obj's controller.
func controlledBy(obj metav1.Object, owner metav1.OwnerReference) bool {
	ref := metav1.GetControllerOf(obj)
	return ref != nil && ref.UID == owner.UID
}
