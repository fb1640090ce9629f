package integration_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/test/testutil"
)

// A job stored while the webhooks were away, breaking a rule the schema
// cannot check, can still be relabelled, have its finalizer removed and be
// deleted once they are back; an update that adds a problem is refused.
func TestStoredProblemsDoNotBlockUpdates(t *testing.T) {
	ctx := context.Background()
	ns := testutil.Namespace(t, k8s)

	withoutWebhooks(t, func() {
		legacy := testutil.TrainingJob("legacy", ns).Env("RANK", "0").Obj()
		legacy.Finalizers = []string{"example.com/keep"}
		testutil.Eventually(t, func() bool { return k8s.Create(ctx, legacy.DeepCopy()) == nil },
			"the API server stops calling the removed webhooks")
	})
	probe := 0
	testutil.Eventually(t, func() bool {
		probe++
		job := testutil.TrainingJob(fmt.Sprintf("probe-%d", probe), ns).Env("RANK", "0").Obj()
		return isInvalid(k8s.Create(ctx, job))
	}, "the API server calls the restored webhooks")

	job := &mlv1.TrainingJob{}
	key := client.ObjectKey{Namespace: ns, Name: "legacy"}
	require.NoError(t, k8s.Get(ctx, key, job))

	worse := job.DeepCopy()
	worse.Spec.Suspend = nil
	worse.Spec.NumWorkers = 2
	worse.Spec.Hyperparameters = map[string]mlv1.HyperparameterValue{"learning-rate": mlv1.NewHyperparameter(0.1)}
	requireInvalid(t, k8s.Update(ctx, worse), tjDenial("legacy",
		`spec.hyperparameters[learning-rate]: Invalid value: "learning-rate": must consist of letters, digits and '_', so that HYPERPARAM_LEARNING-RATE is a valid environment variable name`))

	job.Labels = map[string]string{"team": "vision"}
	job.Spec.NumWorkers = 2
	require.NoError(t, k8s.Update(ctx, job), "relabel and rescale a job with a stored problem")
	require.NoError(t, k8s.Delete(ctx, job))
	require.NoError(t, k8s.Get(ctx, key, job))
	job.Finalizers = nil
	require.NoError(t, k8s.Update(ctx, job), "remove the finalizer of a job with a stored problem")
	assert.Equal(t, []corev1.EnvVar{{Name: "RANK", Value: "0"}}, job.Spec.Env)
}

// withoutWebhooks runs fn with the admission webhook configurations removed,
// and puts them back.
func withoutWebhooks(t *testing.T, fn func()) {
	t.Helper()
	ctx := context.Background()
	mutating := &admissionregistrationv1.MutatingWebhookConfiguration{}
	validating := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Name: "mutating-webhook-configuration"}, mutating))
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Name: "validating-webhook-configuration"}, validating))
	restore := func() {
		for _, o := range []client.Object{mutating.DeepCopy(), validating.DeepCopy()} {
			o.SetResourceVersion("")
			o.SetUID("")
			if err := k8s.Create(ctx, o); err != nil && !isAlreadyExists(err) {
				t.Errorf("restoring %s: %v", o.GetName(), err)
			}
		}
	}
	defer restore()
	require.NoError(t, k8s.Delete(ctx, mutating.DeepCopy()))
	require.NoError(t, k8s.Delete(ctx, validating.DeepCopy()))
	fn()
}
