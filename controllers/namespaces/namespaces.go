// Package namespaces tells the controllers whether a namespace is being
// deleted, so that they stop creating children there instead of fighting
// the namespace controller.
//
// When a namespace is deleted, the API server sets its deletion timestamp
// and its NamespaceLifecycle admission refuses every create in it; the
// namespace controller then deletes its contents. A controller that
// re-created a deleted pod or Deployment there would only collect refusals
// (and count each as a failed pass, and retry it). The controllers read the
// namespace from a cache of Namespace metadata (Watch) before a pass, and
// take a refusal that comes anyway (Refused) as the end of the pass.
package namespaces

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch

// Terminating reports whether the namespace is being deleted: it has a
// deletion timestamp (its status.phase is Terminating). c should be the
// manager's cached client, which reads the metadata-only informer Watch
// registers. A namespace c does not know is not called terminating: a
// cache that has not yet seen a new namespace must not stop its first
// objects; if it was deleted, the creates are refused and Refused ends the
// pass.
func Terminating(ctx context.Context, c client.Reader, name string) (bool, error) {
	ns := &metav1.PartialObjectMetadata{}
	ns.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	if err := c.Get(ctx, client.ObjectKey{Name: name}, ns); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("reading namespace %s: %w", name, err)
	}
	return ns.DeletionTimestamp != nil, nil
}

// Refused reports whether err (or an error it wraps or joins) is the API
// server's refusal to create an object in a namespace being deleted:
// `unable to create new content in namespace X because it is being
// terminated`, a Forbidden whose cause is NamespaceTerminating.
func Refused(err error) bool {
	return err != nil && apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause)
}

// Watch adds the metadata-only watch of Namespaces that keeps Terminating's
// cache filled. It triggers no reconcile: nothing is done when a namespace
// starts terminating, and what is no longer done is decided at each pass.
// A controller waits for its watches to sync before its first pass, so
// after a restart no pass misses a namespace already terminating.
func Watch(b *builder.Builder) *builder.Builder {
	return b.WatchesMetadata(&corev1.Namespace{}, &handler.Funcs{},
		builder.WithPredicates(predicate.NewPredicateFuncs(func(client.Object) bool { return false })))
}
