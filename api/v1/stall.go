package v1

import "time"

// Bounds of spec.failurePolicy.stallTimeout besides 0s (off); the CRD's CEL
// rule on the field spells the same bounds. The lower bound leaves room for
// two scrapes of rank 0 (at most one every 15 s) inside the timeout.
const (
	MinStallTimeout = 30 * time.Second
	MaxStallTimeout = 24 * time.Hour
)

// EffectiveStallTimeout is spec.failurePolicy.stallTimeout; 0 means off.
func (s *TrainingJobSpec) EffectiveStallTimeout() time.Duration {
	if s.FailurePolicy == nil || s.FailurePolicy.StallTimeout == nil {
		return 0
	}
	return s.FailurePolicy.StallTimeout.Duration
}

// EffectiveStallAction is spec.failurePolicy.stallAction, Restart when unset.
func (s *TrainingJobSpec) EffectiveStallAction() StallAction {
	if s.FailurePolicy == nil || s.FailurePolicy.StallAction == "" {
		return StallActionRestart
	}
	return s.FailurePolicy.StallAction
}
