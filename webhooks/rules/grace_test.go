package rules

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/utils/ptr"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

// spec.template.terminationGracePeriodSeconds (the time a trainer has to
// save its checkpoint at SIGTERM) is 0 to 3600 when set; a refusal names
// the field path and the rule. Like the rest of template, it may change
// only while the job is suspended.
func TestValidateTerminationGracePeriod(t *testing.T) {
	for name, tc := range map[string]struct {
		grace *int64
		want  string
	}{
		"unset":    {nil, ""},
		"zero":     {ptr.To[int64](0), ""},
		"an hour":  {ptr.To[int64](mlv1.MaxTerminationGracePeriodSeconds), ""},
		"negative": {ptr.To[int64](-1), "spec.template.terminationGracePeriodSeconds: Invalid value: -1: must be between 0 and 3600"},
		"two hours": {ptr.To[int64](7200),
			"spec.template.terminationGracePeriodSeconds: Invalid value: 7200: must be between 0 and 3600"},
	} {
		j := defaultedJob()
		j.Spec.Template.TerminationGracePeriodSeconds = tc.grace
		assertRefusal(t, j, tc.want, name)
	}

	old := defaultedJob()
	old.Spec.Suspend = ptr.To(false)
	job := old.DeepCopy()
	job.Spec.Template.TerminationGracePeriodSeconds = ptr.To[int64](120)
	assert.Equal(t, []string{"spec.template: Forbidden: may only change while the job is suspended (spec.suspend: true)"}, validationErrors(old, job))
	old.Spec.Suspend = ptr.To(true)
	assert.Empty(t, ValidateTrainingJob(old, job), "a suspended job may take a new grace period")
}
