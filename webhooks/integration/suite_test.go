package integration_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ml-operator/ml-operator/internal/manager"
	"github.com/ml-operator/ml-operator/test/testutil"
)

var (
	k8s client.Client
	cfg *rest.Config
	// images are the operator's default images in this suite: every
	// framework but jax, so that the "no image" rule can be seen.
	images = func() map[string]string {
		m := manager.DefaultFrameworkImages()
		delete(m, "jax")
		return m
	}()
)

func TestMain(m *testing.M) {
	os.Exit(testutil.Main(m, testutil.EnvOptions{Webhooks: true, DefaultImages: images}, func(env *testutil.Env) (func(), error) {
		k8s, cfg = env.Client, env.Config
		return nil, nil
	}))
}

// denial is the full text kubectl prints when the named webhook refuses an
// object with these causes.
func denial(webhook, kind, name string, causes ...string) string {
	body := causes[0]
	if len(causes) > 1 {
		body = "[" + strings.Join(causes, ", ") + "]"
	}
	return fmt.Sprintf("admission webhook %q denied the request: %s.ml.example.com %q is invalid: %s", webhook, kind, name, body)
}

// tjDenial and mdDenial: the defaulting webhook is the first to answer.
func tjDenial(name string, causes ...string) string {
	return denial("mtrainingjob.ml.example.com", "TrainingJob", name, causes...)
}

func mdDenial(name string, causes ...string) string {
	return denial("mmodeldeployment.ml.example.com", "ModelDeployment", name, causes...)
}

// requireInvalid asserts err is the API server's Invalid answer with exactly want.
func requireInvalid(t *testing.T, err error, want string) {
	t.Helper()
	require.Error(t, err)
	require.Truef(t, apierrors.IsInvalid(err), "want an Invalid error, got %v", err)
	require.Equal(t, want, err.Error())
}

func isAlreadyExists(err error) bool { return apierrors.IsAlreadyExists(err) }

func isInvalid(err error) bool { return apierrors.IsInvalid(err) }

// warnings records the warnings the API server sends.
type warnings struct {
	mu  sync.Mutex
	all []string
}

func (w *warnings) HandleWarningHeaderWithContext(_ context.Context, _ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.all = append(w.all, text)
}

func (w *warnings) list() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.all...)
}

// clientWithWarnings is a direct client whose warnings land in w.
func clientWithWarnings(t *testing.T, w *warnings) client.Client {
	t.Helper()
	c := rest.CopyConfig(cfg)
	c.WarningHandlerWithContext = w
	cl, err := client.New(c, client.Options{Scheme: manager.NewScheme()})
	require.NoError(t, err)
	return cl
}
