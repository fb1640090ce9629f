package rules

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

// spec.elastic: both bounds within 1..100, minWorkers <= maxWorkers,
// pytorch only, and numWorkers within the bounds; every refusal names the
// field path and the rule.
func TestValidateElastic(t *testing.T) {
	for name, tc := range map[string]struct {
		min, max, workers int32
		framework         mlv1.Framework
		want              []string
	}{
		"fixed size within":   {2, 3, 3, mlv1.FrameworkPyTorch, nil},
		"one to a hundred":    {1, 100, 100, mlv1.FrameworkPyTorch, nil},
		"min equals max":      {3, 3, 3, mlv1.FrameworkPyTorch, nil},
		"numWorkers at min":   {2, 4, 2, mlv1.FrameworkPyTorch, nil},
		"min above max":       {5, 3, 3, mlv1.FrameworkPyTorch, []string{"spec.elastic.minWorkers: Invalid value: 5: must be less than or equal to spec.elastic.maxWorkers (3)"}},
		"min zero":            {0, 3, 3, mlv1.FrameworkPyTorch, []string{"spec.elastic.minWorkers: Invalid value: 0: must be between 1 and 100"}},
		"max past numWorkers": {1, 101, 3, mlv1.FrameworkPyTorch, []string{"spec.elastic.maxWorkers: Invalid value: 101: must be between 1 and 100"}},
		"numWorkers below min": {2, 3, 1, mlv1.FrameworkPyTorch, []string{
			"spec.numWorkers: Invalid value: 1: must be between spec.elastic.minWorkers (2) and spec.elastic.maxWorkers (3): it is the size an elastic gang starts at and grows back to"}},
		"numWorkers above max": {2, 3, 4, mlv1.FrameworkPyTorch, []string{
			"spec.numWorkers: Invalid value: 4: must be between spec.elastic.minWorkers (2) and spec.elastic.maxWorkers (3): it is the size an elastic gang starts at and grows back to"}},
		"jax": {2, 3, 3, mlv1.FrameworkJAX, []string{
			"spec.elastic: Forbidden: only supported with framework pytorch (torchrun's elastic rendezvous), not jax"}},
	} {
		t.Run(name, func(t *testing.T) {
			j := defaultedJob()
			j.Spec.Framework = tc.framework
			j.Spec.NumWorkers = tc.workers
			j.Spec.Elastic = &mlv1.ElasticSpec{MinWorkers: tc.min, MaxWorkers: tc.max}
			assert.Equal(t, tc.want, validationErrors(nil, j))
		})
	}
}

// An elastic job's spec.env may not set the rendezvous variables the
// operator sets for it; another job may (they are torchrun's options).
func TestElasticReservesTheRendezvousEnv(t *testing.T) {
	env := []corev1.EnvVar{{Name: "PET_RDZV_BACKEND", Value: "etcd"}, {Name: "PET_MAX_RESTARTS", Value: "3"}}
	fixed := defaultedJob()
	fixed.Spec.Env = env
	assert.Empty(t, validationErrors(nil, fixed))

	elastic := fixed.DeepCopy()
	elastic.Spec.Elastic = &mlv1.ElasticSpec{MinWorkers: 1, MaxWorkers: 1}
	assert.Equal(t, []string{
		`spec.env[0].name: Invalid value: "PET_RDZV_BACKEND": is set by the operator and cannot be overridden`,
		`spec.env[1].name: Invalid value: "PET_MAX_RESTARTS": is set by the operator and cannot be overridden`,
	}, validationErrors(nil, elastic))
}

// spec.elastic changes only while the job is suspended; numWorkers may
// change at any time within its bounds.
func TestElasticMayOnlyChangeWhileSuspended(t *testing.T) {
	old := defaultedJob()
	old.Spec.NumWorkers = 3
	old.Spec.Elastic = &mlv1.ElasticSpec{MinWorkers: 2, MaxWorkers: 4}
	old.Spec.Suspend = ptr.To(false)

	job := old.DeepCopy()
	job.Spec.NumWorkers = 4
	assert.Empty(t, validationErrors(old, job), "numWorkers within the bounds")

	job = old.DeepCopy()
	job.Spec.Elastic.MinWorkers = 1
	assert.Equal(t, []string{"spec.elastic: Forbidden: may only change while the job is suspended (spec.suspend: true)"},
		validationErrors(old, job))

	old.Spec.Suspend = ptr.To(true)
	assert.Empty(t, validationErrors(old, job), "suspended")
}
