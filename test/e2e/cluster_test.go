//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/internal/localcluster"
)

func TestNodesAreReadyWithSimulatedGPUs(t *testing.T) {
	t.Parallel()
	nodes := &corev1.NodeList{}
	require.NoError(t, env.client.List(context.Background(), nodes))
	gpuNodes, cpuNodes := 0, 0
	for _, n := range nodes.Items {
		if n.Labels[poolLabel] != "" {
			// A test's own nodes (poolNodes), which it adds, deletes and
			// adds again while this test runs beside it.
			continue
		}
		ready := false
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				ready = true
			}
		}
		assert.True(t, ready, "node %s Ready", n.Name)
		gpus := n.Status.Allocatable[localcluster.GPUResource]
		if gpus.Value() == 0 {
			cpuNodes++
			continue
		}
		gpuNodes++
		assert.EqualValues(t, 8, gpus.Value(), n.Name)
		assert.Equal(t, "true", n.Labels[localcluster.GPUPresentLabel], n.Name)
		assert.Contains(t, n.Spec.Taints, corev1.Taint{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}, n.Name)
	}
	assert.GreaterOrEqual(t, gpuNodes, 4)
	assert.Equal(t, 2, cpuNodes)
}

// simPod is a bare pod shaped like a TrainingJob worker, for testing the
// scheduler and the kwok stages without the operator.
func simPod(ns, name string, gpus int64, annotations map[string]string) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: ns, Annotations: annotations,
			Labels: map[string]string{
				mlv1.LabelTrainingJob:    "sim",
				mlv1.LabelRank:           "0",
				mlv1.LabelRestartAttempt: "0",
			},
		},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "worker", Image: "example.com/trainer:1"}},
		},
	}
	if gpus > 0 {
		q := *resource.NewQuantity(gpus, resource.DecimalSI)
		pod.Spec.Containers[0].Resources = corev1.ResourceRequirements{
			Requests: corev1.ResourceList{localcluster.GPUResource: q},
			Limits:   corev1.ResourceList{localcluster.GPUResource: q},
		}
		pod.Spec.Tolerations = []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	}
	return pod
}

func getPod(t *testing.T, ns, name string) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{}
	if err := env.client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, pod); err != nil {
		return &corev1.Pod{}
	}
	return pod
}

func podCondition(pod *corev1.Pod, typ corev1.PodConditionType) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == typ {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

func TestSchedulerPlacesGPUPods(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	ctx := context.Background()
	require.NoError(t, env.client.Create(ctx, simPod(ns, "two-gpus", 2, map[string]string{"sim.ml.example.com/complete-after": "1h"})))
	require.NoError(t, env.client.Create(ctx, simPod(ns, "nine-gpus", 9, nil)))
	cpu := simPod(ns, "cpu-only", 0, map[string]string{"sim.ml.example.com/complete-after": "1h"})
	require.NoError(t, env.client.Create(ctx, cpu))

	waitFor(t, 30*time.Second, "the 2-GPU pod Running on a GPU node", func() (bool, string) {
		pod := getPod(t, ns, "two-gpus")
		return pod.Status.Phase == corev1.PodRunning && strings.HasPrefix(pod.Spec.NodeName, "gpu-node-"),
			fmt.Sprintf("phase %q on %q", pod.Status.Phase, pod.Spec.NodeName)
	})
	waitFor(t, 30*time.Second, "the CPU pod Running on a CPU node (GPU nodes are tainted)", func() (bool, string) {
		pod := getPod(t, ns, "cpu-only")
		return pod.Status.Phase == corev1.PodRunning && strings.HasPrefix(pod.Spec.NodeName, "cpu-node-"),
			fmt.Sprintf("phase %q on %q", pod.Status.Phase, pod.Spec.NodeName)
	})
	waitFor(t, 30*time.Second, "the 9-GPU pod Unschedulable (no node has 9)", func() (bool, string) {
		pod := getPod(t, ns, "nine-gpus")
		c := podCondition(pod, corev1.PodScheduled)
		if c == nil {
			return false, "no PodScheduled condition"
		}
		return c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable && pod.Spec.NodeName == "",
			c.Reason + ": " + c.Message
	})
	assert.Contains(t, podCondition(getPod(t, ns, "nine-gpus"), corev1.PodScheduled).Message, "nvidia.com/gpu")
}

// TestStagesDriveWorkerPods checks the kwok stages of hack/kwok/stages.yaml
// that the TrainingJob tests rely on, on bare pods.
func TestStagesDriveWorkerPods(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	ctx := context.Background()
	pods := map[string]map[string]string{
		"completes":     {"sim.ml.example.com/complete-after": "2s"},
		"fails":         {"sim.ml.example.com/fail-rank": "0", "sim.ml.example.com/exit-code": "3", "sim.ml.example.com/fail-after": "1s"},
		"fails-any":     {"sim.ml.example.com/fail-rank": "*", "sim.ml.example.com/fail-after": "1s"},
		"evicted":       {"sim.ml.example.com/evict-rank": "0", "sim.ml.example.com/evict-after": "1s"},
		"other-attempt": {"sim.ml.example.com/fail-rank": "0", "sim.ml.example.com/fail-attempt": "1", "sim.ml.example.com/complete-after": "2s"},
		"other-rank":    {"sim.ml.example.com/fail-rank": "1", "sim.ml.example.com/complete-after": "2s"},
		"keeps-running": {"sim.ml.example.com/complete-after": "1h"},
	}
	for name, ann := range pods {
		require.NoError(t, env.client.Create(ctx, simPod(ns, name, 1, ann)))
	}
	ps := simPod(ns, "parameter-server", 0, map[string]string{"sim.ml.example.com/complete-after": "1s"})
	ps.Labels[mlv1.LabelReplicaType] = mlv1.ReplicaTypePS
	require.NoError(t, env.client.Create(ctx, ps))
	terminated := func(pod *corev1.Pod) *corev1.ContainerStateTerminated {
		if len(pod.Status.ContainerStatuses) == 0 {
			return nil
		}
		return pod.Status.ContainerStatuses[0].State.Terminated
	}
	waitPhase := func(name string, phase corev1.PodPhase) *corev1.Pod {
		var pod *corev1.Pod
		waitFor(t, 30*time.Second, name+" "+string(phase), func() (bool, string) {
			pod = getPod(t, ns, name)
			return pod.Status.Phase == phase, string(pod.Status.Phase)
		})
		return pod
	}

	for _, name := range []string{"completes", "other-attempt", "other-rank"} {
		pod := waitPhase(name, corev1.PodSucceeded)
		require.NotNil(t, terminated(pod), name)
		assert.EqualValues(t, 0, terminated(pod).ExitCode, name)
	}

	pod := waitPhase("fails", corev1.PodFailed)
	require.NotNil(t, terminated(pod))
	assert.EqualValues(t, 3, terminated(pod).ExitCode, "sim.ml.example.com/exit-code")
	assert.Nil(t, podCondition(pod, corev1.DisruptionTarget), "a failure is not a disruption")

	pod = waitPhase("fails-any", corev1.PodFailed)
	assert.EqualValues(t, 1, terminated(pod).ExitCode, "the default exit code")

	pod = waitPhase("evicted", corev1.PodFailed)
	assert.Equal(t, "Evicted", pod.Status.Reason)
	c := podCondition(pod, corev1.DisruptionTarget)
	require.NotNil(t, c, "evicted pods carry DisruptionTarget, as the kubelet writes it")
	assert.Equal(t, corev1.ConditionTrue, c.Status)

	pod = getPod(t, ns, "keeps-running")
	assert.Equal(t, corev1.PodRunning, pod.Status.Phase, "complete-after=1h keeps it running")
	// By now the 2s workers have finished; a 1s parameter server would have too.
	pod = getPod(t, ns, "parameter-server")
	assert.Equal(t, corev1.PodRunning, pod.Status.Phase, "parameter servers never finish on their own")
}
