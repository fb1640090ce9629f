package trainingjob_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/test/testutil"
)

// A failed rank of a TensorFlow job with parameter servers restarts the
// whole gang, parameter servers included: the attempt-0 ps pod goes with
// the ranks and an attempt-1 ps pod comes back with them. Every pod of the
// new attempt has the chief/worker/ps TF_CONFIG.
func TestParameterServerGangRestart(t *testing.T) {
	ns := testutil.Namespace(t, env.Client)
	job := create(t, testutil.TrainingJob("tfgang", ns).Framework(mlv1.FrameworkTensorFlow).Workers(2).GPUs(0).ParameterServers(1))
	waitPods(t, job, 3, 0)
	require.NoError(t, testutil.SetPodPhase(ctx, env.Client, ns, "tfgang-ps-0", corev1.PodRunning))
	setAll(t, job, 2, corev1.PodRunning)
	waitState(t, job, mlv1.StateRunning)

	setPhase(t, job, 1, corev1.PodFailed, testutil.WithExitCode("trainer", 1, "Error"))
	waitState(t, job, mlv1.StateRestarting)
	waitPods(t, job, 0, 0) // the running ps of attempt 0 is deleted too

	step(t, job, 10*time.Second)
	got := waitPods(t, job, 3, 1)
	tasks := map[string]string{}
	for _, p := range got {
		var cfg struct {
			Cluster map[string][]string `json:"cluster"`
			Task    struct {
				Type  string `json:"type"`
				Index int    `json:"index"`
			} `json:"task"`
		}
		require.NoError(t, json.Unmarshal([]byte(testutil.EnvOf(&p)["TF_CONFIG"]), &cfg), p.Name)
		assert.Len(t, cfg.Cluster["chief"], 1, p.Name)
		assert.Len(t, cfg.Cluster["worker"], 1, p.Name)
		assert.Len(t, cfg.Cluster["ps"], 1, p.Name)
		tasks[p.Name] = cfg.Task.Type
		assert.Equal(t, 0, cfg.Task.Index, p.Name)
	}
	assert.Equal(t, map[string]string{"tfgang-worker-0": "chief", "tfgang-worker-1": "worker", "tfgang-ps-0": "ps"}, tasks)
	ps := &corev1.Pod{}
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "tfgang-ps-0"}, ps))
	assert.Equal(t, "1", ps.Labels[mlv1.LabelRestartAttempt])
	assert.Equal(t, int32(1), get(t, job).Status.Restarts)
}
