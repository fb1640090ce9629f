package testutil

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/ml-operator/ml-operator/internal/manager"
)

// The controllers read through the manager's cache, which holds only what
// manager.CacheOptions keeps: the children this operator labels, without
// managedFields, pods trimmed to what the controllers read, namespaces to
// their deletion timestamp. Every envtest suite that runs a controller reads
// through the same options, so a controller that read a field the cache
// strips fails in its suite as it would in production:
//
//   - a suite that runs a controller in a manager builds the manager with
//     ManagerOptions (its cache is built from CacheOptions);
//   - a suite that calls a reconciler pass by pass gives it CacheView, which
//     answers each read at once with what that cache would hold (a real
//     cache would see a test's write only a moment later).
//
// internal/manager's cache test shows the two agree and that the stripped
// fields are absent.

// CacheOptions are the manager's cache options (manager.CacheOptions with
// the default Options).
func CacheOptions() cache.Options {
	return manager.CacheOptions(manager.NewOptions())
}

// ManagerOptions are the options of a manager a suite runs its controllers
// in: the manager's scheme and cache (CacheOptions), no metrics or probe
// listeners.
func ManagerOptions() ctrl.Options {
	return ctrl.Options{
		Scheme:                 manager.NewScheme(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  CacheOptions(),
	}
}

// CacheView wraps a direct client: its reads answer what a cache built from
// opts would hold, with each object as the cache's transforms leave it; an
// object the cache's label selectors leave out is not found and not listed.
// Writes go to the API server unchanged. Field selectors and namespace
// restrictions in opts are not supported (the manager uses neither).
func CacheView(c client.WithWatch, opts cache.Options) (client.WithWatch, error) {
	if opts.DefaultLabelSelector != nil || opts.DefaultFieldSelector != nil || len(opts.DefaultNamespaces) > 0 {
		return nil, fmt.Errorf("CacheView: default selectors and namespaces are not supported")
	}
	v := &cacheView{WithWatch: c, byGVK: map[schema.GroupVersionKind]cache.ByObject{}, defaultTransform: opts.DefaultTransform}
	for obj, by := range opts.ByObject {
		if by.Field != nil || len(by.Namespaces) > 0 {
			return nil, fmt.Errorf("CacheView: field selectors and namespaces (%T) are not supported", obj)
		}
		gvk, err := apiutil.GVKForObject(obj, c.Scheme())
		if err != nil {
			return nil, err
		}
		v.byGVK[gvk] = by
	}
	return v, nil
}

// NewCacheView is CacheView, with the manager's cache options, of a new
// direct client of the API server at cfg with the manager's scheme.
func NewCacheView(t testing.TB, cfg *rest.Config) client.WithWatch {
	t.Helper()
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: manager.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	v, err := CacheView(c, CacheOptions())
	if err != nil {
		t.Fatal(err)
	}
	return v
}

type cacheView struct {
	client.WithWatch
	byGVK            map[schema.GroupVersionKind]cache.ByObject
	defaultTransform toolscache.TransformFunc
}

func (v *cacheView) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := v.WithWatch.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	gvk, err := apiutil.GVKForObject(obj, v.Scheme())
	if err != nil {
		return err
	}
	kept, err := v.cached(obj, gvk)
	if err != nil {
		return err
	}
	if !kept {
		return apierrors.NewNotFound(schema.GroupResource{Group: gvk.Group, Resource: strings.ToLower(gvk.Kind)}, key.Name)
	}
	return nil
}

func (v *cacheView) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := v.WithWatch.List(ctx, list, opts...); err != nil {
		return err
	}
	listGVK, err := apiutil.GVKForObject(list, v.Scheme())
	if err != nil {
		return err
	}
	gvk := listGVK.GroupVersion().WithKind(strings.TrimSuffix(listGVK.Kind, "List"))
	items, err := meta.ExtractList(list)
	if err != nil {
		return err
	}
	kept := items[:0]
	for _, item := range items {
		ok, err := v.cached(item, gvk)
		if err != nil {
			return err
		}
		if ok {
			kept = append(kept, item)
		}
	}
	return meta.SetList(list, kept)
}

// cached applies the cache's rules for gvk to obj in place: false when its
// label selector leaves obj out, else obj as its transform leaves it.
func (v *cacheView) cached(obj runtime.Object, gvk schema.GroupVersionKind) (bool, error) {
	by := v.byGVK[gvk]
	if by.Label != nil {
		m, err := meta.Accessor(obj)
		if err != nil {
			return false, err
		}
		if !by.Label.Matches(labels.Set(m.GetLabels())) {
			return false, nil
		}
	}
	transform := by.Transform
	if transform == nil {
		transform = v.defaultTransform
	}
	if transform == nil {
		return true, nil
	}
	// A metadata-only list's items carry no kind of their own; the
	// transforms tell the kind from it, as in an informer.
	if p, ok := obj.(*metav1.PartialObjectMetadata); ok && p.Kind == "" {
		p.SetGroupVersionKind(gvk)
	}
	out, err := transform(obj)
	if err != nil {
		return false, err
	}
	if out != any(obj) {
		dst, src := reflect.ValueOf(obj), reflect.ValueOf(out)
		if dst.Type() != src.Type() {
			return false, fmt.Errorf("the cache's transform for %s returned a %T for a %T", gvk, out, obj)
		}
		dst.Elem().Set(src.Elem())
	}
	return true, nil
}
