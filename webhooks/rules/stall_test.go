package rules

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

// spec.failurePolicy.stallTimeout is 0s (off) or within 30s..24h, and
// stallAction one of Restart, RestartUncounted, Fail; each refusal names the
// field path and the rule.
func TestValidateFailurePolicy(t *testing.T) {
	for name, tc := range map[string]struct {
		policy mlv1.FailurePolicy
		want   string
	}{
		"off":            {mlv1.FailurePolicy{StallTimeout: &metav1.Duration{}}, ""},
		"lowest":         {mlv1.FailurePolicy{StallTimeout: &metav1.Duration{Duration: 30 * time.Second}}, ""},
		"highest":        {mlv1.FailurePolicy{StallTimeout: &metav1.Duration{Duration: 24 * time.Hour}, StallAction: mlv1.StallActionFail}, ""},
		"action only":    {mlv1.FailurePolicy{StallAction: mlv1.StallActionRestartUncounted}, ""},
		"restart":        {mlv1.FailurePolicy{StallTimeout: &metav1.Duration{Duration: 10 * time.Minute}, StallAction: mlv1.StallActionRestart}, ""},
		"below 30s":      {mlv1.FailurePolicy{StallTimeout: &metav1.Duration{Duration: 29 * time.Second}}, `spec.failurePolicy.stallTimeout: Invalid value: "29s": must be 0s (off) or between 30s and 24h`},
		"negative":       {mlv1.FailurePolicy{StallTimeout: &metav1.Duration{Duration: -time.Minute}}, `spec.failurePolicy.stallTimeout: Invalid value: "-1m0s": must be 0s (off) or between 30s and 24h`},
		"above 24h":      {mlv1.FailurePolicy{StallTimeout: &metav1.Duration{Duration: 25 * time.Hour}}, `spec.failurePolicy.stallTimeout: Invalid value: "25h0m0s": must be 0s (off) or between 30s and 24h`},
		"unknown action": {mlv1.FailurePolicy{StallAction: "Ignore"}, `spec.failurePolicy.stallAction: Unsupported value: "Ignore": supported values: "Restart", "RestartUncounted", "Fail"`},
	} {
		j := defaultedJob()
		j.Spec.FailurePolicy = &tc.policy
		assertRefusal(t, j, tc.want, name)
	}
}

// The failure policy may change while the job runs: it only decides what
// a later stall does.
func TestFailurePolicyMayChangeWhileRunning(t *testing.T) {
	old := defaultedJob()
	old.Spec.Suspend = ptr.To(false)
	job := old.DeepCopy()
	job.Spec.FailurePolicy = &mlv1.FailurePolicy{StallTimeout: &metav1.Duration{Duration: 5 * time.Minute}, StallAction: mlv1.StallActionFail}
	assert.Empty(t, ValidateTrainingJob(old, job))
}
