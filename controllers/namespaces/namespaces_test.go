package namespaces_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/ml-operator/ml-operator/controllers/namespaces"
)

// refusal is the error the API server's NamespaceLifecycle admission returns
// for a create in a namespace being deleted.
func refusal(ns string) error {
	err := apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "j0-worker-0",
		fmt.Errorf("unable to create new content in namespace %s because it is being terminated", ns))
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{
		Type: corev1.NamespaceTerminatingCause, Message: "namespace " + ns + " is being terminated", Field: "metadata.namespace",
	})
	return err
}

func TestRefused(t *testing.T) {
	for name, tc := range map[string]struct {
		err  error
		want bool
	}{
		"the refusal":            {refusal("tjr1"), true},
		"wrapped":                {fmt.Errorf("creating pod j0-worker-0: %w", refusal("tjr1")), true},
		"joined with others":     {errors.Join(fmt.Errorf("creating pod a: %w", refusal("tjr1")), fmt.Errorf("creating pod b: %w", refusal("tjr1"))), true},
		"no error":               {nil, false},
		"another Forbidden":      {apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "p", errors.New("exceeded quota")), false},
		"not found":              {apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "tjr1"), false},
		"a plain error":          {errors.New("connection refused"), false},
		"wrapped plain Conflict": {fmt.Errorf("x: %w", apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, "p", errors.New("c"))), false},
	} {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tc.want, namespaces.Refused(tc.err))
		})
	}
}

func TestTerminating(t *testing.T) {
	now := metav1.Now()
	c := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "live"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "going", DeletionTimestamp: &now, Finalizers: []string{"test"}}},
	).Build()
	for ns, want := range map[string]bool{"live": false, "going": true, "unknown": false} {
		got, err := namespaces.Terminating(context.Background(), c, ns)
		require.NoError(t, err, ns)
		assert.Equal(t, want, got, ns)
	}
}
