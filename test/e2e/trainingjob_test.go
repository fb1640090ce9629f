//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/internal/localcluster"
	"github.com/ml-operator/ml-operator/test/testutil"
)

// jobTimeout bounds every wait on a TrainingJob; it covers one gang restart
// with the operator's first backoff (10 s).
const jobTimeout = 90 * time.Second

// simJob is a TrainingJob whose workers the kwok stages drive through the
// sim.ml.example.com annotations (docs/local-cluster.md).
func simJob(ns, name string, workers, gpus int32, sim map[string]string) *mlv1.TrainingJob {
	tj := testutil.TrainingJob(name, ns).Image("example.com/trainer:1").Workers(workers).GPUs(gpus).Obj()
	tj.Spec.Template.Annotations = sim
	return tj
}

func getJob(t *testing.T, tj *mlv1.TrainingJob) *mlv1.TrainingJob {
	t.Helper()
	got := &mlv1.TrainingJob{}
	if err := env.client.Get(context.Background(), client.ObjectKeyFromObject(tj), got); err != nil {
		return &mlv1.TrainingJob{}
	}
	return got
}

func describeJob(j *mlv1.TrainingJob) string {
	var conds []string
	for _, c := range j.Status.Conditions {
		conds = append(conds, fmt.Sprintf("%s=%s(%s: %s)", c.Type, c.Status, c.Reason, c.Message))
	}
	return fmt.Sprintf("state=%q restarts=%d disruptions=%d workers=%+v conditions=[%s]",
		j.Status.State, j.Status.Restarts, j.Status.Disruptions, j.Status.Workers, strings.Join(conds, "; "))
}

func waitState(t *testing.T, tj *mlv1.TrainingJob, state mlv1.TrainingJobState) *mlv1.TrainingJob {
	t.Helper()
	var got *mlv1.TrainingJob
	waitFor(t, jobTimeout, fmt.Sprintf("TrainingJob %s %s", tj.Name, state), func() (bool, string) {
		got = getJob(t, tj)
		return got.Status.State == state, describeJob(got)
	})
	return got
}

// workerPods lists the job's pods of the given restart attempt, by rank.
func workerPods(t *testing.T, tj *mlv1.TrainingJob, attempt string) []corev1.Pod {
	t.Helper()
	pods := &corev1.PodList{}
	require.NoError(t, env.client.List(context.Background(), pods, client.InNamespace(tj.Namespace),
		client.MatchingLabels{mlv1.LabelTrainingJob: tj.Name, mlv1.LabelRestartAttempt: attempt}))
	sort.Slice(pods.Items, func(i, j int) bool {
		return pods.Items[i].Labels[mlv1.LabelRank] < pods.Items[j].Labels[mlv1.LabelRank]
	})
	return pods.Items
}

// assertCompletedByRecreatedGang checks that a job disrupted at least once
// completed with a whole new gang: the attempt its counters point at.
// Usually that is attempt 1. kwok finishes a deletion by name, with no UID
// precondition (a kubelet sends one), so a delete it still has queued for a
// pod of attempt 0 can, once in a while, hit the attempt 1 pod of the same
// name: one more disruption (seen in the kwok log as a second "Delete pod"
// for the name), never a restart, which the callers assert separately.
func assertCompletedByRecreatedGang(t *testing.T, tj, done *mlv1.TrainingJob, ranks int) {
	t.Helper()
	final := fmt.Sprint(done.Status.Attempt())
	assert.NotEqual(t, "0", final, describeJob(done))
	assert.Len(t, workerPods(t, tj, final), ranks, "the gang was recreated and attempt %s completed: %s", final, describeJob(done))
}

func TestTwoRankGPUJobRunsAndCompletes(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	tj := simJob(ns, "two-ranks", 2, 2, map[string]string{"sim.ml.example.com/complete-after": "6s"})
	require.NoError(t, env.client.Create(context.Background(), tj))

	waitFor(t, jobTimeout, "both ranks Running on GPU nodes", func() (bool, string) {
		pods := workerPods(t, tj, "0")
		var seen []string
		running := 0
		for _, p := range pods {
			seen = append(seen, fmt.Sprintf("%s %s on %q", p.Name, p.Status.Phase, p.Spec.NodeName))
			if p.Status.Phase == corev1.PodRunning && strings.HasPrefix(p.Spec.NodeName, "gpu-node-") {
				running++
			}
		}
		return running == 2, strings.Join(seen, ", ")
	})
	for _, p := range workerPods(t, tj, "0") {
		gpus := p.Spec.Containers[0].Resources.Limits[localcluster.GPUResource]
		assert.EqualValues(t, 2, gpus.Value(), "%s GPU limit", p.Name)
	}
	running := waitState(t, tj, mlv1.StateRunning)
	assert.True(t, meta.IsStatusConditionTrue(running.Status.Conditions, "Running"), describeJob(running))

	done := waitState(t, tj, mlv1.StateCompleted)
	assert.True(t, meta.IsStatusConditionTrue(done.Status.Conditions, "Succeeded"), describeJob(done))
	assert.EqualValues(t, 0, done.Status.Restarts)
	assert.NotNil(t, done.Status.CompletionTime)
}

// TestJobWaitsForGPUCapacity asks for more GPUs than the cluster has: the job
// waits, says why, and starts once a node is added. It takes every GPU, so
// it runs alone (before the parallel tests).
func TestJobWaitsForGPUCapacity(t *testing.T) {
	ns := namespace(t)
	ctx := context.Background()
	gpusInCluster := int32(0)
	nodes := &corev1.NodeList{}
	require.NoError(t, env.client.List(ctx, nodes))
	for _, n := range nodes.Items {
		q := n.Status.Allocatable[localcluster.GPUResource]
		gpusInCluster += int32(q.Value())
	}
	workers := gpusInCluster/8 + 1
	// Real ranks block at rendezvous until the whole gang is up; simulated ones
	// would just finish, so they run "forever" here.
	tj := simJob(ns, "too-big", workers, 8, map[string]string{"sim.ml.example.com/complete-after": "1h"})
	require.NoError(t, env.client.Create(ctx, tj))

	waitFor(t, jobTimeout, "one rank Unschedulable for want of GPUs", func() (bool, string) {
		for _, p := range workerPods(t, tj, "0") {
			if c := podCondition(&p, corev1.PodScheduled); c != nil && c.Reason == corev1.PodReasonUnschedulable {
				return true, c.Message
			}
		}
		return false, fmt.Sprintf("%d pods", len(workerPods(t, tj, "0")))
	})
	var waiting *mlv1.TrainingJob
	waitFor(t, jobTimeout, "the job waiting, with a condition naming the missing GPUs", func() (bool, string) {
		waiting = getJob(t, tj)
		// Any condition will do, as long as it tells the user why: the
		// scheduler's own words name the resource that is short.
		for _, c := range waiting.Status.Conditions {
			if strings.Contains(c.Message, "nvidia.com/gpu") || strings.Contains(strings.ToLower(c.Message), "unschedulable") {
				return true, describeJob(waiting)
			}
		}
		return false, describeJob(waiting)
	})
	assert.Contains(t, []mlv1.TrainingJobState{mlv1.StatePending, mlv1.StateInitializing}, waiting.Status.State, describeJob(waiting))

	require.NoError(t, env.cluster.AddNodes(ctx, localcluster.GPUNode(fmt.Sprintf("gpu-node-extra-%s", ns), 8)))
	running := waitState(t, tj, mlv1.StateRunning)
	assert.EqualValues(t, workers, running.Status.Workers.Active, describeJob(running))

	// Give the GPUs back before the parallel tests start.
	require.NoError(t, env.client.Delete(ctx, tj))
	waitFor(t, jobTimeout, "the job's pods gone", func() (bool, string) {
		n := len(workerPods(t, tj, "0"))
		return n == 0, fmt.Sprintf("%d pods left", n)
	})
}

// TestGangRestartAfterRankFailure fails rank 1 on the first attempt: every
// rank is replaced, the restart is counted, and the second attempt completes.
func TestGangRestartAfterRankFailure(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	tj := simJob(ns, "gang", 2, 1, map[string]string{
		"sim.ml.example.com/fail-rank":      "1",
		"sim.ml.example.com/fail-attempt":   "0",
		"sim.ml.example.com/fail-after":     "2s",
		"sim.ml.example.com/exit-code":      "137",
		"sim.ml.example.com/complete-after": "5s",
	})
	require.NoError(t, env.client.Create(context.Background(), tj))

	var first []corev1.Pod
	waitFor(t, jobTimeout, "attempt 0 running", func() (bool, string) {
		first = workerPods(t, tj, "0")
		return len(first) == 2, fmt.Sprintf("%d pods", len(first))
	})
	done := waitState(t, tj, mlv1.StateCompleted)
	assert.EqualValues(t, 1, done.Status.Restarts, describeJob(done))

	second := workerPods(t, tj, "1")
	require.Len(t, second, 2, "the whole gang came back as attempt 1")
	for i, p := range second {
		assert.NotEqual(t, first[i].UID, p.UID, "rank %d is a new pod", i)
		assert.Equal(t, corev1.PodSucceeded, p.Status.Phase, p.Name)
	}
	assert.Empty(t, workerPods(t, tj, "0"), "attempt 0's pods are deleted")
}

// TestEvictionSpendsNoBackoff evicts rank 0 (as a kubelet under node pressure
// does): the gang restarts as a disruption, and backoffLimit 0 is not spent.
func TestEvictionSpendsNoBackoff(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	tj := simJob(ns, "evicted", 2, 1, map[string]string{
		"sim.ml.example.com/evict-rank":     "0",
		"sim.ml.example.com/evict-attempt":  "0",
		"sim.ml.example.com/evict-after":    "2s",
		"sim.ml.example.com/complete-after": "5s",
	})
	tj.Spec.BackoffLimit = ptr.To(int32(0))
	require.NoError(t, env.client.Create(context.Background(), tj))

	done := waitState(t, tj, mlv1.StateCompleted)
	assert.EqualValues(t, 0, done.Status.Restarts, "an eviction is not a failure: %s", describeJob(done))
	assert.GreaterOrEqual(t, done.Status.Disruptions, int32(1), describeJob(done))
	assertCompletedByRecreatedGang(t, tj, done, 2)
}

// TestPermanentExitCodeFailsAtOnce: with restartPolicy ExitCode, a rank
// exiting 1..127 fails the job without a restart.
func TestPermanentExitCodeFailsAtOnce(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	tj := simJob(ns, "bad-config", 2, 0, map[string]string{
		"sim.ml.example.com/fail-rank":      "0",
		"sim.ml.example.com/exit-code":      "2",
		"sim.ml.example.com/fail-after":     "1s",
		"sim.ml.example.com/complete-after": "1h",
	})
	tj.Spec.RestartPolicy = mlv1.RestartPolicyExitCode
	require.NoError(t, env.client.Create(context.Background(), tj))

	failed := waitState(t, tj, mlv1.StateFailed)
	c := meta.FindStatusCondition(failed.Status.Conditions, "Failed")
	require.NotNil(t, c, describeJob(failed))
	assert.Equal(t, metav1.ConditionTrue, c.Status)
	assert.Equal(t, "PermanentExitCode", c.Reason, describeJob(failed))
	assert.EqualValues(t, 0, failed.Status.Restarts, describeJob(failed))
	assert.Empty(t, workerPods(t, tj, "1"), "no second attempt")
}

// TestEvictionAPIRestartsGangWithoutBackoff drains a rank through the
// Eviction API, as `kubectl drain` does: the API server marks the pod
// DisruptionTarget and deletes it; the gang restarts without spending backoff.
func TestEvictionAPIRestartsGangWithoutBackoff(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	ctx := context.Background()
	tj := simJob(ns, "drained", 2, 1, map[string]string{"sim.ml.example.com/complete-after": "8s"})
	tj.Spec.BackoffLimit = ptr.To(int32(0))
	require.NoError(t, env.client.Create(ctx, tj))

	waitState(t, tj, mlv1.StateRunning)
	victim := &corev1.Pod{}
	require.NoError(t, env.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: mlv1.WorkerPodName(tj.Name, 0)}, victim))
	require.Equal(t, "0", victim.Labels[mlv1.LabelRestartAttempt], "still the first attempt")
	require.NoError(t, env.client.SubResource("eviction").Create(ctx, victim, &policyv1.Eviction{}))

	done := waitState(t, tj, mlv1.StateCompleted)
	assert.EqualValues(t, 0, done.Status.Restarts, "an eviction is not a failure: %s", describeJob(done))
	assert.GreaterOrEqual(t, done.Status.Disruptions, int32(1), describeJob(done))
	assertCompletedByRecreatedGang(t, tj, done, 2)
}
