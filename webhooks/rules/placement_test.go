package rules

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// spec.scheduling.placementTimeout is 0s (never) or within 10s..24h, and the
// refusal names the field path and the rule.
func TestValidatePlacementTimeout(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0:                          "",
		10 * time.Second:           "",
		24 * time.Hour:             "",
		15 * time.Minute:           "",
		9 * time.Second:            `spec.scheduling.placementTimeout: Invalid value: "9s": must be 0s (never) or between 10s and 24h`,
		-time.Minute:               `spec.scheduling.placementTimeout: Invalid value: "-1m0s": must be 0s (never) or between 10s and 24h`,
		24*time.Hour + time.Second: `spec.scheduling.placementTimeout: Invalid value: "24h0m1s": must be 0s (never) or between 10s and 24h`,
	} {
		j := defaultedJob()
		j.Spec.Scheduling.PlacementTimeout = &metav1.Duration{Duration: d}
		assertRefusal(t, j, want, d)
	}
}

// placementTimeout may change while the job runs; the rest of scheduling
// only while it is suspended.
func TestPlacementTimeoutMayChangeWhileRunning(t *testing.T) {
	old := defaultedJob()
	old.Spec.Suspend = ptr.To(false)
	job := old.DeepCopy()
	job.Spec.Scheduling.PlacementTimeout = &metav1.Duration{Duration: time.Hour}
	assert.Empty(t, ValidateTrainingJob(old, job))

	job.Spec.Scheduling.PriorityClassName = "high"
	errs := ValidateTrainingJob(old, job)
	if assert.Len(t, errs, 1) {
		assert.Equal(t, "spec.scheduling: Forbidden: may only change while the job is suspended (spec.suspend: true)", errs[0].Error())
	}
}
