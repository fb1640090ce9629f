package v1_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/test/testutil"
)

// elasticJob is a pytorch job of numWorkers ranks with spec.elastic.
func elasticJob(name, ns string, numWorkers, minWorkers, maxWorkers int32) *mlv1.TrainingJob {
	j := testutil.TrainingJob(name, ns).Workers(numWorkers).Obj()
	j.Spec.Elastic = &mlv1.ElasticSpec{MinWorkers: minWorkers, MaxWorkers: maxWorkers}
	return j
}

// Without the webhooks, the schema alone refuses elastic bounds outside
// 1..100, minWorkers above maxWorkers, a numWorkers outside the bounds
// (the default 1 included), a framework other than pytorch, and a change
// of the bounds while the job runs.
func TestSchemaElastic(t *testing.T) {
	ns := testutil.Namespace(t, k8s)
	ctx := context.Background()
	tf := elasticJob("elastic-tf", ns, 3, 2, 3)
	tf.Spec.Framework = mlv1.FrameworkTensorFlow
	unset := elasticJob("elastic-unset", ns, 0, 2, 3)
	for name, tc := range map[string]struct {
		job  *mlv1.TrainingJob
		want string
	}{
		"min above max":        {elasticJob("upside-down", ns, 3, 5, 3), "spec.elastic.minWorkers: Invalid value: must be less than or equal to maxWorkers"},
		"max above 100":        {elasticJob("too-big", ns, 3, 2, 101), "spec.elastic.maxWorkers: Invalid value: 101: spec.elastic.maxWorkers in body should be less than or equal to 100"},
		"min below 1":          {elasticJob("too-small", ns, 3, 0, 3), "spec.elastic.minWorkers: Invalid value: 0: spec.elastic.minWorkers in body should be greater than or equal to 1"},
		"numWorkers above max": {elasticJob("above", ns, 4, 2, 3), "spec.numWorkers: Invalid value: must be between spec.elastic.minWorkers and spec.elastic.maxWorkers"},
		"numWorkers defaulted": {unset, "spec.numWorkers: Invalid value: must be between spec.elastic.minWorkers and spec.elastic.maxWorkers"},
		"tensorflow":           {tf, "spec.elastic: Invalid value: elastic is only supported with framework pytorch"},
	} {
		t.Run(name, func(t *testing.T) {
			assert.Contains(t, invalidCauses(t, k8s.Create(ctx, tc.job)), tc.want)
		})
	}

	job := elasticJob("running", ns, 3, 2, 4)
	require.NoError(t, k8s.Create(ctx, job))
	job.Spec.NumWorkers = 4
	require.NoError(t, k8s.Update(ctx, job), "numWorkers within the bounds changes at any time")
	job.Spec.Elastic.MinWorkers = 1
	assert.Contains(t, invalidCauses(t, k8s.Update(ctx, job)),
		"spec.elastic: Invalid value: may only change while the job is suspended (spec.suspend: true)")

	suspended := elasticJob("suspended", ns, 3, 2, 3)
	suspended.Spec.Suspend = ptr.To(true)
	require.NoError(t, k8s.Create(ctx, suspended))
	suspended.Spec.Elastic = nil
	suspended.Spec.NumWorkers = 1
	require.NoError(t, k8s.Update(ctx, suspended), "a suspended job may drop elastic")
}

// The rules ValidateElastic applies, with the field paths.
func TestValidateElastic(t *testing.T) {
	p := field.NewPath("spec")
	spec := func(n, lo, hi int32, fw mlv1.Framework) *mlv1.TrainingJobSpec {
		return &mlv1.TrainingJobSpec{Framework: fw, NumWorkers: n, Elastic: &mlv1.ElasticSpec{MinWorkers: lo, MaxWorkers: hi}}
	}
	errs := func(s *mlv1.TrainingJobSpec) []string {
		var out []string
		for _, e := range s.ValidateElastic(p) {
			out = append(out, e.Error())
		}
		return out
	}
	assert.Empty(t, errs(&mlv1.TrainingJobSpec{NumWorkers: 3}), "no elastic")
	assert.Empty(t, errs(spec(3, 2, 3, "")), "framework unset is pytorch")
	assert.Equal(t, []string{"spec.elastic.minWorkers: Invalid value: 5: must be less than or equal to spec.elastic.maxWorkers (3)"},
		errs(spec(3, 5, 3, mlv1.FrameworkPyTorch)))
	assert.Equal(t, []string{
		"spec.elastic.minWorkers: Invalid value: 0: must be between 1 and 100",
		"spec.elastic.maxWorkers: Invalid value: 101: must be between 1 and 100",
	}, errs(spec(3, 0, 101, mlv1.FrameworkPyTorch)))
	assert.Equal(t, []string{
		"spec.elastic: Forbidden: only supported with framework pytorch (torchrun's elastic rendezvous), not xgboost",
		"spec.numWorkers: Invalid value: 9: must be between spec.elastic.minWorkers (2) and spec.elastic.maxWorkers (3): it is the size an elastic gang starts at and grows back to",
	}, errs(spec(9, 2, 3, mlv1.FrameworkXGBoost)))
}

// The current attempt's size: numWorkers, unless an elastic job's
// status.worldSize.current says it runs shrunk (within minWorkers and
// numWorkers).
func TestAttemptWorkers(t *testing.T) {
	job := func(n int32, elastic *mlv1.ElasticSpec, current, desired int32) *mlv1.TrainingJob {
		j := &mlv1.TrainingJob{Spec: mlv1.TrainingJobSpec{NumWorkers: n, Elastic: elastic, NProcPerNode: ptr.To[int32](4)}}
		if current > 0 {
			j.Status.WorldSize = &mlv1.WorldSize{Current: current, Desired: desired}
		}
		return j
	}
	el := &mlv1.ElasticSpec{MinWorkers: 2, MaxWorkers: 4}
	for name, tc := range map[string]struct {
		job  *mlv1.TrainingJob
		want int32
	}{
		"fixed size":                           {job(3, nil, 0, 0), 3},
		"fixed size ignores status":            {job(3, nil, 2, 3), 3},
		"elastic, never shrunk":                {job(3, el, 0, 0), 3},
		"elastic, shrunk":                      {job(3, el, 2, 3), 2},
		"elastic, below min":                   {job(3, el, 1, 3), 3},
		"elastic, numWorkers lowered":          {job(2, el, 3, 3), 2},
		"elastic, numWorkers raised":           {job(4, el, 3, 3), 4},
		"elastic, shrunk, numWorkers raised":   {job(4, el, 2, 3), 4},
		"elastic, unset numWorkers is 1":       {job(0, &mlv1.ElasticSpec{MinWorkers: 1, MaxWorkers: 1}, 0, 0), 1},
		"elastic, shrunk, status of numWorker": {job(4, el, 3, 4), 3},
	} {
		assert.Equal(t, tc.want, tc.job.AttemptWorkers(), name)
		assert.Equal(t, tc.want*4, tc.job.AttemptWorldSize(), name)
		assert.Equal(t, &mlv1.WorldSize{Current: tc.want, Desired: tc.job.Spec.EffectiveNumWorkers()}, tc.job.ObservedWorldSize(), name)
	}
}

// torchrun's --nnodes: min:max for an elastic job, the attempt's ranks
// otherwise; the rendezvous names are reserved for elastic jobs only.
func TestTorchrunElasticContract(t *testing.T) {
	fixed := &mlv1.TrainingJobSpec{NumWorkers: 3}
	elastic := &mlv1.TrainingJobSpec{NumWorkers: 3, Elastic: &mlv1.ElasticSpec{MinWorkers: 2, MaxWorkers: 5}}
	assert.Equal(t, "3", fixed.TorchrunNNodes(3))
	assert.Equal(t, "2:5", elastic.TorchrunNNodes(2))
	assert.Equal(t, "lab-worker-0.lab-workers.team.svc:29500", elastic.ElasticRendezvousEndpoint("lab", "team"))
	for _, name := range mlv1.ElasticEnvNames {
		assert.False(t, fixed.ReservesEnvName(name), name)
		assert.True(t, elastic.ReservesEnvName(name), name)
		assert.False(t, mlv1.IsReservedEnvName(name), name)
	}
	assert.True(t, fixed.ReservesEnvName(mlv1.EnvPETNNodes))
	assert.Equal(t, "c10d", mlv1.ElasticRendezvousBackend)
}
