package podgroups

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1alpha2 "k8s.io/api/scheduling/v1alpha2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Kubernetes' native gang scheduling (1.35+, alpha): the API server serves
// scheduling.k8s.io/v1alpha2 Workloads and PodGroups (feature gate
// GenericWorkload), and kube-scheduler's GangScheduling plugin (feature gate
// GangScheduling) binds the pods that name a PodGroup with a gang policy,
// through spec.schedulingGroup, only when minCount of them fit at once.
//
// Each gang attempt gets a Workload with one PodGroupTemplate and a PodGroup
// made from it, both named like the attempt's group and owned by the job,
// as the Job controller of kube-controller-manager (WorkloadWithJob) does
// for a Job. Both are immutable, so a gang of another size is a new attempt
// with new objects; Ensure deletes the earlier attempts' ones.

// NativeTemplateName is the name of the Workload's only PodGroupTemplate.
const NativeTemplateName = "gang"

// NativeGangWaiting is what kube-scheduler's GangScheduling plugin (Permit
// and PreEnqueue) says of a gang member it could place but holds back
// because the rest of the gang cannot be placed yet: not the reason the gang
// waits, which is on the member that did not fit. A held-back member's
// PodScheduled message reads, in 1.36, "pod group is unschedulable, waiting
// for minCount pods from a gang to be scheduled, one or more plugins asked
// to wait and no plugin rejected pod".
const NativeGangWaiting = "waiting for minCount pods from a gang"

var (
	// native: pods name their PodGroup in spec.schedulingGroup.
	native = Scheduler{
		flavour: "native",
		gvk:     schedulingv1alpha2.SchemeGroupVersion.WithKind("PodGroup"),
		native:  true,
	}
	workloadGVK = schedulingv1alpha2.SchemeGroupVersion.WithKind("Workload")
)

// IsDefaultScheduler says whether a pod's schedulerName leaves it to
// kube-scheduler's default profile, the one the GangScheduling plugin runs in.
func IsDefaultScheduler(schedulerName string) bool {
	return schedulerName == "" || schedulerName == corev1.DefaultSchedulerName
}

// IsNativeGangWaiting says whether a pod's Unschedulable message is the
// GangScheduling plugin holding back a member it could place.
func IsNativeGangWaiting(message string) bool {
	return strings.Contains(message, NativeGangWaiting)
}

// desiredWorkload is the Workload of a gang attempt: one PodGroupTemplate
// with a gang policy of minCount = every pod of the attempt, controlled by
// the job (spec.controllerRef names it too, for tools).
func desiredWorkload(g Gang) *schedulingv1alpha2.Workload {
	gv, _ := schema.ParseGroupVersion(g.Owner.APIVersion)
	return &schedulingv1alpha2.Workload{
		TypeMeta: metav1.TypeMeta{APIVersion: schedulingv1alpha2.SchemeGroupVersion.String(), Kind: "Workload"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       g.Namespace,
			Name:            g.Name,
			Labels:          g.Labels,
			OwnerReferences: []metav1.OwnerReference{g.Owner},
		},
		Spec: schedulingv1alpha2.WorkloadSpec{
			ControllerRef: &schedulingv1alpha2.TypedLocalObjectReference{
				APIGroup: gv.Group, Kind: g.Owner.Kind, Name: g.Owner.Name,
			},
			PodGroupTemplates: []schedulingv1alpha2.PodGroupTemplate{{
				Name:             NativeTemplateName,
				SchedulingPolicy: gangPolicy(g),
			}},
		},
	}
}

// desiredNativePodGroup is the PodGroup of a gang attempt, made from its
// Workload's template: the pods name it in spec.schedulingGroup.
func desiredNativePodGroup(g Gang) *schedulingv1alpha2.PodGroup {
	return &schedulingv1alpha2.PodGroup{
		TypeMeta: metav1.TypeMeta{APIVersion: schedulingv1alpha2.SchemeGroupVersion.String(), Kind: "PodGroup"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       g.Namespace,
			Name:            g.Name,
			Labels:          g.Labels,
			OwnerReferences: []metav1.OwnerReference{g.Owner},
		},
		Spec: schedulingv1alpha2.PodGroupSpec{
			PodGroupTemplateRef: &schedulingv1alpha2.PodGroupTemplateReference{
				Workload: &schedulingv1alpha2.WorkloadPodGroupTemplateReference{
					WorkloadName: g.Name, PodGroupTemplateName: NativeTemplateName,
				},
			},
			SchedulingPolicy: gangPolicy(g),
		},
	}
}

func gangPolicy(g Gang) schedulingv1alpha2.PodGroupSchedulingPolicy {
	return schedulingv1alpha2.PodGroupSchedulingPolicy{
		Gang: &schedulingv1alpha2.GangSchedulingPolicy{MinCount: g.MinMember},
	}
}

// nativeRecheck is how long a "not served" answer for
// scheduling.k8s.io/v1alpha2 is kept: the RESTMapper asks the API server
// again on every look-up of a version it does not serve, and every job
// using the default scheduler looks on every pass.
const nativeRecheck = time.Minute

// nativeDiscovery remembers whether the API server serves the native
// PodGroup kind.
type nativeDiscovery struct {
	mu        sync.Mutex
	served    bool
	checkedAt time.Time
}

// nativeServed reports whether the API server serves scheduling.k8s.io/v1alpha2
// PodGroups. A served kind stays in the RESTMapper's cache; an unserved one
// is asked again after nativeRecheck.
func (c *Client) nativeServed() (bool, error) {
	d := &c.nativeDiscovery
	d.mu.Lock()
	defer d.mu.Unlock()
	now := c.now()
	if !d.served && !d.checkedAt.IsZero() && now.Sub(d.checkedAt) < nativeRecheck {
		return false, nil
	}
	_, err := c.client.RESTMapper().RESTMapping(native.gvk.GroupKind(), native.gvk.Version)
	switch {
	case err == nil:
		d.served = true
	case meta.IsNoMatchError(err):
		d.served = false
	default:
		return false, fmt.Errorf("discovering %s: %w", native.gvk.GroupVersion(), err)
	}
	d.checkedAt = now
	return d.served, nil
}

// ensureNative creates a gang attempt's Workload, then its PodGroup (the
// API server's PodGroupWorkloadExists admission refuses a PodGroup whose
// Workload does not exist), and deletes the earlier attempts' ones.
func (c *Client) ensureNative(ctx context.Context, g Gang) error {
	wl, pg := desiredWorkload(g), desiredNativePodGroup(g)
	if err := c.client.Create(ctx, wl); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating Workload %s: %w", wl.Name, err)
	}
	if err := c.client.Create(ctx, pg); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating PodGroup %s: %w", pg.Name, err)
	}
	// The PodGroup first: the scheduler reads it, and a Workload's deletion
	// would only take its PodGroups along through the garbage collector.
	for _, gvk := range []schema.GroupVersionKind{native.gvk, workloadGVK} {
		if err := c.deleteSiblings(ctx, gvk, g); err != nil {
			return err
		}
	}
	return nil
}

// deleteSiblings deletes the objects of kind gvk that g's job controls and
// that belong to its other attempts. The list is read from the API server
// (unstructured objects bypass the manager's cache, which has no informer
// for these kinds).
func (c *Client) deleteSiblings(ctx context.Context, gvk schema.GroupVersionKind, g Gang) error {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := c.client.List(ctx, list, client.InNamespace(g.Namespace), client.MatchingLabels(g.Siblings)); err != nil {
		return fmt.Errorf("listing %s of the job: %w", gvk.Kind, err)
	}
	for i := range list.Items {
		old := &list.Items[i]
		if old.GetName() == g.Name || !controlledBy(old, g.Owner) || old.GetDeletionTimestamp() != nil {
			continue
		}
		if err := c.client.Delete(ctx, old); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting %s %s of an earlier attempt: %w", gvk.Kind, old.GetName(), err)
		}
	}
	return nil
}
