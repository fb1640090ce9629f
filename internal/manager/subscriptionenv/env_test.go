// Package subscriptionenv_test starts the manager the way cmd/main.go does,
// with its settings in the environment only, as Subscription.spec.config.env
// sets them under OLM, and checks that they take effect.
package subscriptionenv_test

import (
	"context"
	"errors"
	"flag"
	"io"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"

	"github.com/ml-operator/ml-operator/internal/manager"
	"github.com/ml-operator/ml-operator/test/testutil"
)

var env *testutil.Env

func TestMain(m *testing.M) {
	os.Exit(testutil.Main(m, testutil.EnvOptions{}, func(e *testutil.Env) (func(), error) {
		env = e
		return nil, nil
	}))
}

// TestEnvironmentConfiguresTheManager: with no flags at all, the
// ML_OPERATOR_* variables move the metrics endpoint (plain HTTP on a
// chosen address), turn off leader election and webhooks, and put the GPU
// node selector on a GPU job's worker pods.
func TestEnvironmentConfiguresTheManager(t *testing.T) {
	metricsAddr := testutil.FreeAddr(t)
	for name, value := range map[string]string{
		manager.EnvName("metrics-bind-address"):      metricsAddr,
		manager.EnvName("metrics-secure"):            "false",
		manager.EnvName("health-probe-bind-address"): "0",
		manager.EnvName("leader-elect"):              "false",
		manager.EnvName("enable-webhooks"):           "false",
		manager.EnvName("gpu-node-selector"):         "accelerator=nvidia-a100,pool=training",
		manager.EnvName("max-concurrent-reconciles"): "3",
	} {
		t.Setenv(name, value)
	}
	opts, err := manager.ParseArgs(flag.NewFlagSet("manager", flag.ContinueOnError), nil, os.LookupEnv)
	require.NoError(t, err)
	require.Equal(t, 3, opts.MaxConcurrentReconciles)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- manager.Run(ctx, env.Config, opts) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("manager exited: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("manager did not stop within 30s")
		}
	})

	// Metrics over plain HTTP on the address from the environment.
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + metricsAddr + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode == http.StatusOK && len(body) > 0
	}, 20*time.Second, 100*time.Millisecond, "no plain-HTTP metrics on %s", metricsAddr)

	c := env.Client
	ns := testutil.Namespace(t, c)
	require.NoError(t, c.Create(ctx, testutil.TrainingJob("gpu", ns).Workers(2).GPUs(1).Obj()))
	require.NoError(t, c.Create(ctx, testutil.TrainingJob("cpu", ns).Workers(1).GPUs(0).Obj()))

	podsOf := func(job string) []corev1.Pod {
		var pods corev1.PodList
		require.NoError(t, c.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{mlv1.LabelTrainingJob: job}))
		return pods.Items
	}
	require.Eventually(t, func() bool { return len(podsOf("gpu")) == 2 && len(podsOf("cpu")) == 1 },
		30*time.Second, 100*time.Millisecond, "the manager did not create the workers")
	for _, p := range podsOf("gpu") {
		assert.Equal(t, "nvidia-a100", p.Spec.NodeSelector["accelerator"], "GPU worker %s", p.Name)
		assert.Equal(t, "training", p.Spec.NodeSelector["pool"], "GPU worker %s", p.Name)
	}
	for _, p := range podsOf("cpu") {
		assert.NotContains(t, p.Spec.NodeSelector, "accelerator", "CPU worker %s", p.Name)
	}
}
