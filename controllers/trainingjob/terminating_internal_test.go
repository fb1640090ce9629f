package trainingjob

import (
	"context"
	"fmt"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

// namespaceTerminatingRefusal is what the API server's NamespaceLifecycle
// admission answers a create in a namespace being deleted.
func namespaceTerminatingRefusal(obj client.Object) error {
	err := apierrors.NewForbidden(schema.GroupResource{Resource: fmt.Sprintf("%T", obj)}, obj.GetName(),
		fmt.Errorf("unable to create new content in namespace %s because it is being terminated", obj.GetNamespace()))
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{
		Type: corev1.NamespaceTerminatingCause, Message: "namespace " + obj.GetNamespace() + " is being terminated", Field: "metadata.namespace",
	})
	return err
}

// The backstop: when the namespace cache has not yet seen the namespace
// being deleted, the API server's refusal of the first create ends the
// pass, with no error (so no retry), no error counted, no event and no
// status write.
func TestRefusedCreateEndsThePassQuietly(t *testing.T) {
	s := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(s))
	require.NoError(t, mlv1.AddToScheme(s))
	job := testJob(mlv1.FrameworkPyTorch)
	job.Namespace = "tjr1"
	job.Status.State = mlv1.StatePending
	var creates int
	c := fake.NewClientBuilder().WithScheme(s).WithStatusSubresource(&mlv1.TrainingJob{}).
		WithObjects(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tjr1"}}, job).
		WithInterceptorFuncs(interceptor.Funcs{
			Create: func(_ context.Context, _ client.WithWatch, obj client.Object, _ ...client.CreateOption) error {
				creates++
				return namespaceTerminatingRefusal(obj)
			},
		}).Build()
	rec := events.NewFakeRecorder(10)
	r := NewReconciler(c, c, rec, Config{Clock: clocktesting.NewFakeClock(t0)})
	errorsBefore := reconcileErrorsOf(t, "tjr1")
	stored := &mlv1.TrainingJob{}
	require.NoError(t, c.Get(context.Background(), client.ObjectKeyFromObject(job), stored))

	res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(job)})
	require.NoError(t, err)
	assert.Equal(t, ctrl.Result{}, res, "no retry")
	assert.Equal(t, 1, creates, "the pass ends at the first refused create")
	assert.Empty(t, rec.Events, "no event")
	assert.Equal(t, errorsBefore, reconcileErrorsOf(t, "tjr1"), "trainingjob_operator_errors_total")
	after := &mlv1.TrainingJob{}
	require.NoError(t, c.Get(context.Background(), client.ObjectKeyFromObject(job), after))
	assert.Equal(t, stored.ResourceVersion, after.ResourceVersion, "no status write")
}

// reconcileErrorsOf reads trainingjob_operator_errors_total for a
// namespace, over every error_type.
func reconcileErrorsOf(t *testing.T, ns string) float64 {
	t.Helper()
	total := 0.0
	for _, typ := range []string{"Conflict", "NotFound", "Forbidden", "Invalid", "Timeout", "Canceled", "DeadlineExceeded", "Other"} {
		m := &dto.Metric{}
		require.NoError(t, reconcileErrors.WithLabelValues(ns, ns, typ).Write(m))
		total += m.GetCounter().GetValue()
	}
	return total
}
