package v1

import (
	"time"
)

// GangPlacement is how a TrainingJob's gang is placed all-or-nothing
// (status.gangPlacement). docs/trainingjob.md documents the order in which
// the operator picks one when several are available.
type GangPlacement string

// The gang placements, from the first the operator picks to the last.
const (
	// GangPlacementKueue: spec.scheduling.queueName is set; Kueue admits the
	// pod group (every rank) as one workload.
	GangPlacementKueue GangPlacement = "Kueue"
	// GangPlacementVolcano: spec.scheduling.schedulerName is volcano and
	// Volcano's PodGroup kind is installed; Volcano binds minMember pods or none.
	GangPlacementVolcano GangPlacement = "Volcano"
	// GangPlacementCoscheduling: spec.scheduling.schedulerName is a
	// scheduler-plugins scheduler and its PodGroup kind is installed; the
	// coscheduling plugin binds minMember pods or none.
	GangPlacementCoscheduling GangPlacement = "Coscheduling"
	// GangPlacementNative: no gang scheduler is named, the pods use the
	// default scheduler and the API server serves scheduling.k8s.io/v1alpha2
	// (feature gate GenericWorkload): each attempt gets a Workload and a
	// PodGroup with a gang policy, and kube-scheduler's GangScheduling plugin
	// binds every pod of the attempt or none.
	GangPlacementNative GangPlacement = "Native"
	// GangPlacementTimeout: no gang scheduler; the default scheduler binds
	// ranks one by one, and the operator releases the whole gang when a
	// rank is still unschedulable at spec.scheduling.placementTimeout.
	GangPlacementTimeout GangPlacement = "PlacementTimeout"
	// GangPlacementNone: no gang scheduler and placementTimeout 0s: placed
	// ranks wait, holding their GPUs, for as long as the others do.
	GangPlacementNone GangPlacement = "None"
)

// Bounds of spec.scheduling.placementTimeout besides 0s (never); the CRD's
// CEL rule on the field spells the same bounds.
const (
	MinPlacementTimeout = 10 * time.Second
	MaxPlacementTimeout = 24 * time.Hour
)

// EffectivePlacementTimeout is spec.scheduling.placementTimeout, or
// adminDefault (the manager's --placement-timeout) when unset; 0 means never.
func (s *TrainingJobSpec) EffectivePlacementTimeout(adminDefault time.Duration) time.Duration {
	if t := s.Scheduling.PlacementTimeout; t != nil {
		return t.Duration
	}
	return adminDefault
}
