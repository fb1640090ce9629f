// Package refusal tells a create the API server refused (and would refuse
// again) from one worth retrying at once, and words the Warning event
// (mlv1.EventFailedCreate) both controllers emit for it, as the Job
// controller does.
package refusal

import (
	"errors"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Is reports whether err is the API server refusing a create or apply: a
// 4xx answer other than a conflict, an existing object or throttling —
// quota, Pod Security, an admission webhook's denial, an invalid object, a
// missing ServiceAccount. Other errors are retried with the controller's
// backoff; a refusal because the namespace is being deleted is not one.
func Is(err error) bool {
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		return false
	}
	if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
		// The namespace is being deleted: the controllers end such a pass
		// quietly (controllers/*/terminating.go), nobody is left to tell.
		return false
	}
	code := st.Status().Code
	return code >= 400 && code < 500 && !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) && !apierrors.IsTooManyRequests(err)
}

// Note is the event's text for a refused create: "Error creating: " and
// the API server's answer, as the Job controller writes it.
func Note(err error) string { return "Error creating: " + err.Error() }
