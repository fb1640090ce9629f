package conversion_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	mlv1alpha1 "github.com/ml-operator/ml-operator/api/v1alpha1"
	"github.com/ml-operator/ml-operator/internal/manager"
	"github.com/ml-operator/ml-operator/test/testutil"
)

// conversion is one object of one ConversionReview the webhook received.
type conversion struct {
	desired, from, name string
}

// recorder sees every ConversionReview before the webhook answers it.
type recorder struct {
	mu    sync.Mutex
	calls []conversion
}

func (r *recorder) wrap(path string, next http.Handler) http.Handler {
	if path != "/convert" {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		if err == nil {
			review := apiextensionsv1.ConversionReview{}
			if json.Unmarshal(body, &review) == nil && review.Request != nil {
				r.mu.Lock()
				for _, o := range review.Request.Objects {
					m := metav1.PartialObjectMetadata{}
					_ = json.Unmarshal(o.Raw, &m)
					r.calls = append(r.calls, conversion{desired: review.Request.DesiredAPIVersion, from: m.APIVersion, name: m.Name})
				}
				r.mu.Unlock()
			}
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		next.ServeHTTP(w, req)
	})
}

// of returns the conversions of the named object.
func (r *recorder) of(name string) []conversion {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []conversion
	for _, c := range r.calls {
		if c.name == name {
			out = append(out, c)
		}
	}
	return out
}

// startEnv starts envtest with the webhooks (conversion included) served
// by this process through rec, and kube-apiserver with flags.
func startEnv(t *testing.T, rec *recorder, flags map[string]string) *testutil.Env {
	t.Helper()
	env, err := testutil.StartEnv(testutil.EnvOptions{Webhooks: true, APIServerFlags: flags, WrapWebhook: rec.wrap})
	require.NoError(t, err)
	t.Cleanup(func() { _ = env.Stop() })
	return env
}

// lifecycle is what the operator and its users do to a TrainingJob in v1:
// create it, read it, write its status three times (Pending, Initializing,
// Running) and its spec's metadata once, while the manager's own cache
// lists and watches TrainingJobs in v1. It returns the number of writes.
func lifecycle(t *testing.T, env *testutil.Env, ns, name string) int {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	opts := testutil.CacheOptions()
	opts.Scheme = manager.NewScheme()
	c, err := cache.New(env.Config, opts)
	require.NoError(t, err)
	_, err = c.GetInformer(ctx, &mlv1.TrainingJob{})
	require.NoError(t, err)
	go func() { _ = c.Start(ctx) }()
	require.True(t, c.WaitForCacheSync(ctx))

	k8s := env.Client
	job := testutil.TrainingJob(name, ns).Obj()
	require.NoError(t, k8s.Create(ctx, job))
	writes := 1
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(job), job))
	for _, state := range []mlv1.TrainingJobState{mlv1.StatePending, mlv1.StateInitializing, mlv1.StateRunning} {
		job.Status.State = state
		require.NoError(t, k8s.Status().Update(ctx, job))
		writes++
	}
	job.Labels = map[string]string{"team": "vision"}
	require.NoError(t, k8s.Update(ctx, job))
	writes++

	testutil.Eventually(t, func() bool {
		cached := &mlv1.TrainingJob{}
		return c.Get(ctx, client.ObjectKeyFromObject(job), cached) == nil && cached.Labels["team"] == "vision"
	}, "the manager's cache sees the last write")
	list := &mlv1.TrainingJobList{}
	require.NoError(t, k8s.List(ctx, list, client.InNamespace(ns)))
	require.Len(t, list.Items, 1)
	return writes
}

// With the watch cache on (kube-apiserver's default), every write to a
// TrainingJob costs exactly one /convert call, to v1alpha1 from the stored
// v1 object, though nobody reads v1alpha1; v1 reads cost none.
func TestEveryWriteConvertsOnceToV1Alpha1(t *testing.T) {
	rec := &recorder{}
	env := startEnv(t, rec, nil)
	ns := testutil.Namespace(t, env.Client)
	writes := lifecycle(t, env, ns, "job")

	// The v1alpha1 watch cache converts the stored changes in order, one
	// at a time: once a later write's conversion has arrived, every
	// conversion of the job's writes has too.
	marker := testutil.TrainingJob("marker", ns).Obj()
	require.NoError(t, env.Client.Create(context.Background(), marker))
	testutil.Eventually(t, func() bool { return len(rec.of("marker")) > 0 }, "the marker's create converted")

	calls := rec.of("job")
	require.Len(t, calls, writes, "one /convert call per write: %+v", calls)
	for _, c := range calls {
		assert.Equal(t, mlv1alpha1.GroupVersion.String(), c.desired, "converted for the v1alpha1 watch cache")
		assert.Equal(t, mlv1.GroupVersion.String(), c.from, "from the stored v1 object")
	}
	assert.Len(t, rec.of("marker"), 1)
}

// With kube-apiserver's --watch-cache=false the same lifecycle costs no
// /convert call; a v1alpha1 read costs one, so the recorder does see them.
func TestNoConversionWithoutTheWatchCache(t *testing.T) {
	rec := &recorder{}
	env := startEnv(t, rec, map[string]string{"watch-cache": "false"})
	ns := testutil.Namespace(t, env.Client)
	lifecycle(t, env, ns, "job")
	assert.Empty(t, rec.of("job"), "a v1 lifecycle converts nothing without the watch cache")

	// Without a watch cache every conversion happens inside the request
	// that needs it, so this one is seen by the time Get returns.
	alpha := &mlv1alpha1.TrainingJob{}
	require.NoError(t, env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "job"}, alpha))
	calls := rec.of("job")
	require.Len(t, calls, 1, "a v1alpha1 read converts once: %+v", calls)
	assert.Equal(t, mlv1alpha1.GroupVersion.String(), calls[0].desired)
	assert.Equal(t, mlv1.GroupVersion.String(), calls[0].from)
}
