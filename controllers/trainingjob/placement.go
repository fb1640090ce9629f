package trainingjob

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

// All-or-nothing placement. A gang scheduler (Kueue, Volcano,
// coscheduling, or kube-scheduler itself with native gang scheduling) binds
// every pod of an attempt or none. Without one, the
// default scheduler binds ranks one by one, and the ranks it placed hold
// their GPUs while the others wait; there the operator bounds the wait with
// spec.scheduling.placementTimeout and releases the whole gang when it
// expires (docs/trainingjob.md, "All-or-nothing placement").

// gangPlacementOf is how a job's gang is placed: a queue name means Kueue;
// a gang scheduler whose PodGroup kind is installed (flavour "volcano" or
// "coscheduling") places it next; then kube-scheduler's native gangs
// (flavour "native": the default scheduler, and scheduling.k8s.io/v1alpha2
// served); otherwise the placement timeout, or nothing when it is 0. flavour
// is empty when no gang scheduler applies.
func gangPlacementOf(job *mlv1.TrainingJob, flavour string, adminTimeout time.Duration) mlv1.GangPlacement {
	switch {
	case job.Spec.Scheduling.QueueName != "":
		return mlv1.GangPlacementKueue
	case flavour == "volcano":
		return mlv1.GangPlacementVolcano
	case flavour == "coscheduling":
		return mlv1.GangPlacementCoscheduling
	case flavour == "native":
		return mlv1.GangPlacementNative
	case job.Spec.EffectivePlacementTimeout(adminTimeout) > 0:
		return mlv1.GangPlacementTimeout
	}
	return mlv1.GangPlacementNone
}

// observePlacement records in status how the gang is placed. It costs a
// (cached) discovery look-up, unless the job names a queue or a scheduler
// that is neither a gang scheduler nor the default one.
func (r *Reconciler) observePlacement(ctx context.Context, p *pass) error {
	flavour := ""
	if p.job.Spec.Scheduling.QueueName == "" {
		s, ok, err := r.podGroups.Installed(ctx, p.job.Spec.Scheduling.SchedulerName)
		if err != nil {
			return err
		}
		if ok {
			flavour = s.Flavour()
		}
	}
	p.job.Status.GangPlacement = gangPlacementOf(p.job, flavour, r.cfg.PlacementTimeout)
	return nil
}

// markPlacementStart starts the current attempt's placement clock the first
// time a pass sees (or creates) its pods: placementTimeout runs from here.
// A job whose pods predate the field starts it when first seen.
func markPlacementStart(st *mlv1.TrainingJobStatus, pods int, now time.Time) {
	if st.PlacementStartTime == nil && pods > 0 {
		t := metav1.NewTime(now)
		st.PlacementStartTime = &t
	}
}

// placementTimeoutOf decides, under GangPlacementTimeout, whether the
// current attempt has waited too long for a rank to be placed: some pod is
// still unschedulable (PodScheduled=False, reason Unschedulable) at
// placementStartTime + placementTimeout. Before that, it asks for a look
// again at the expiry. Pods the scheduler has not tried yet count as
// unplaced but not as unschedulable.
func placementTimeoutOf(g gangState) (d decision, recheck time.Time, expired bool) {
	st := &g.job.Status
	if st.GangPlacement != mlv1.GangPlacementTimeout || g.placementTimeout <= 0 || st.PlacementStartTime == nil {
		return decision{}, time.Time{}, false
	}
	var stuck []*corev1.Pod
	held := 0
	for _, p := range append(sortedByRank(g.pods), sortedByRank(g.ps)...) {
		switch {
		case p.Spec.NodeName != "":
			held++
		case p.DeletionTimestamp == nil && unschedulableMessage(p) != "":
			stuck = append(stuck, p)
		}
	}
	if len(stuck) == 0 {
		return decision{}, time.Time{}, false
	}
	expiry := st.PlacementStartTime.Add(g.placementTimeout)
	if g.now.Before(expiry) {
		return decision{}, expiry, false
	}
	names := make([]string, 0, len(stuck))
	for _, p := range stuck {
		names = append(names, describePod(p))
	}
	msg := fmt.Sprintf("%s still unschedulable %s after the gang's pods were created (placementTimeout %s): %s; "+
		"releasing the whole gang (%d pods placed) and retrying",
		strings.Join(names, ", "), g.now.Sub(st.PlacementStartTime.Time).Round(time.Second), g.placementTimeout,
		unschedulableMessage(stuck[0]), held)
	return decision{kind: restartForPlacement, reason: mlv1.ReasonPlacementTimeout, message: msg}, time.Time{}, true
}

// unschedulableMessage is the scheduler's message on a pod it could not
// place (PodScheduled=False, reason Unschedulable), empty otherwise.
func unschedulableMessage(p *corev1.Pod) string {
	if p.Spec.NodeName != "" {
		return ""
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			if c.Message == "" {
				return "no message from the scheduler"
			}
			return c.Message
		}
	}
	return ""
}
