package reliability_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ml-operator/ml-operator/internal/manager"
	"github.com/ml-operator/ml-operator/test/testutil"
)

var (
	k8s  client.Client
	cfg  *rest.Config
	ctx  = context.Background()
	imgs = manager.DefaultFrameworkImages()
)

func TestMain(m *testing.M) {
	os.Exit(testutil.Main(m, testutil.EnvOptions{Webhooks: true, DefaultImages: imgs}, func(env *testutil.Env) (func(), error) {
		k8s, cfg = env.Client, env.Config
		return nil, nil
	}))
}

// cachedClient reads what the manager's cache would hold (testutil.CacheView):
// the reconcilers' client, which the interceptor wraps.
func cachedClient(t *testing.T) client.WithWatch {
	t.Helper()
	return testutil.NewCacheView(t, cfg)
}

// directClient is an uncached client with watch: the TrainingJob
// reconciler's API reader, as in the manager.
func directClient(t *testing.T) client.WithWatch {
	t.Helper()
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: manager.NewScheme()})
	require.NoError(t, err)
	return c
}

// transientErrors are the answers an API server gives under load or while
// restarting: every one must be retried, none may fail a job.
func transientErrors() []error {
	gr := schema.GroupResource{Resource: "pods"}
	return []error{
		apierrors.NewServiceUnavailable("etcd leader changed"),
		apierrors.NewTooManyRequests("the server is rate limiting", 1),
		apierrors.NewServerTimeout(gr, "create", 1),
		apierrors.NewInternalError(fmt.Errorf("connection reset by peer")),
		apierrors.NewTimeoutError("request did not complete within 60s", 1),
	}
}

// faults hands out injected errors: the next n calls fail, one error each,
// then calls go through. It counts what it injected.
type faults struct {
	mu       sync.Mutex
	pending  []error
	injected int
}

func (f *faults) arm(errs ...error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pending = append(f.pending, errs...)
}

// next is the error to inject now, or nil.
func (f *faults) next() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.pending) == 0 {
		return nil
	}
	err := f.pending[0]
	f.pending = f.pending[1:]
	f.injected++
	return err
}

func (f *faults) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.injected
}
