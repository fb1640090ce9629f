package trainingjob_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/test/testutil"
)

// cordonNode changes a node as kubectl cordon (or a drain tool) does.
func cordonNode(t *testing.T, name string, cordon func(*corev1.Node)) {
	t.Helper()
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n := &corev1.Node{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, n); err != nil {
			return err
		}
		cordon(n)
		return env.Client.Update(ctx, n)
	}))
}

// runOnNode creates a job's attempt-0 gang of n ranks on node, Running.
func runOnNode(t *testing.T, job *mlv1.TrainingJob, n int32, node string) {
	t.Helper()
	waitPods(t, job, int(n), 0)
	for r := range n {
		require.NoError(t, testutil.BindPod(ctx, env.Client, job.Namespace, mlv1.WorkerPodName(job.Name, r), node))
	}
	setAll(t, job, n, corev1.PodRunning, testutil.WithPodCondition(corev1.PodReady, ""))
	waitState(t, job, mlv1.StateRunning)
}

// A worker's node cordoned for a drain (spec.unschedulable, or the
// node.kubernetes.io/unschedulable taint alone) ends the gang before the
// drain evicts it, as a disruption: no restart counted, no backoff. Every
// pod of the attempt is deleted gracefully with the job's
// template.terminationGracePeriodSeconds (so each rank gets SIGTERM and
// that long to save its checkpoint), never forced; the next attempt is
// created once they are gone and waits unbound, which the cordon does not
// touch, until a node takes it.
func TestCordonedNodeEndsTheGangBeforeItsEviction(t *testing.T) {
	for name, cordon := range map[string]func(*corev1.Node){
		"spec.unschedulable": func(n *corev1.Node) { n.Spec.Unschedulable = true },
		"taint": func(n *corev1.Node) {
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule})
		},
	} {
		t.Run(name, func(t *testing.T) {
			ns := testutil.Namespace(t, env.Client)
			node, err := testutil.ReadyNode(ctx, env.Client, ns+"-node", nil)
			require.NoError(t, err)
			w := testutil.TrainingJob("drain", ns).Workers(2).GPUs(0).BackoffLimit(0)
			w.Spec.Template.TerminationGracePeriodSeconds = ptr.To(int64(90))
			job := create(t, w)
			runOnNode(t, job, 2, node.Name)

			cordonNode(t, node.Name, cordon)
			j := waitJob(t, job, "the cordon", func(j *mlv1.TrainingJob) bool { return j.Status.Disruptions == 1 })
			assert.Equal(t, int32(0), j.Status.Restarts, "a cordon spends no backoffLimit")
			assert.Contains(t, restartCause(j), "NodeCordoned: rank 0 (pod drain-worker-0): node "+node.Name+" is cordoned")
			assert.Contains(t, restartCause(j), "ending the gang gracefully before its pods are evicted")
			waitEvents(t, job, "NodeCordoned")

			// Both ranks of attempt 0 are terminating, with the job's grace
			// period: bound pods wait for their kubelet, which envtest has not.
			testutil.Eventually(t, func() bool {
				ps := pods(t, job)
				for _, p := range ps {
					if p.DeletionTimestamp == nil {
						return false
					}
				}
				return len(ps) == 2
			}, "attempt 0's pods deleted")
			for _, p := range pods(t, job) {
				assert.Equal(t, "0", p.Labels[mlv1.LabelRestartAttempt], p.Name)
				assert.Equal(t, ptr.To(int64(90)), p.Spec.TerminationGracePeriodSeconds, "%s: the job's grace period", p.Name)
				assert.Equal(t, ptr.To(int64(90)), p.DeletionGracePeriodSeconds, "%s: deleted with its grace period, not forced", p.Name)
			}

			// The kubelet confirms; attempt 1 comes without waiting for a
			// backoff and stays unbound while the node is cordoned.
			require.NoError(t, testutil.FinishTerminatingPods(ctx, env.Client, ns, client.MatchingLabels{mlv1.LabelTrainingJob: "drain"}))
			waitPods(t, job, 2, 1)
			other, err := testutil.ReadyNode(ctx, env.Client, ns+"-other", nil)
			require.NoError(t, err)
			for r := range int32(2) {
				require.NoError(t, testutil.BindPod(ctx, env.Client, ns, mlv1.WorkerPodName("drain", r), other.Name))
			}
			runGang(t, job, 2, 1)
			j = get(t, job)
			assert.Equal(t, int32(1), j.Status.Disruptions)
			assert.Equal(t, int32(0), j.Status.Restarts)
		})
	}
}

// A job whose tolerations let the scheduler put its pods on a cordoned
// node (here: every taint tolerated) is not ended by the cordon: its next
// attempt could land on the same node and be ended again, without end. A
// drain's evictions still disrupt it (TestEvictionSpendsNoBackoff).
func TestCordonIsNotActedOnForAGangThatToleratesIt(t *testing.T) {
	ns := testutil.Namespace(t, env.Client)
	node, err := testutil.ReadyNode(ctx, env.Client, ns+"-node", nil)
	require.NoError(t, err)
	w := testutil.TrainingJob("tolerant", ns).Workers(2).GPUs(0)
	w.Spec.Scheduling.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	job := create(t, w)
	runOnNode(t, job, 2, node.Name)

	cordonNode(t, node.Name, func(n *corev1.Node) { n.Spec.Unschedulable = true })
	// Once the manager's cache shows the cordon, a pass runs over the job.
	testutil.Eventually(t, func() bool {
		n := &corev1.Node{}
		return managerCache.Get(ctx, client.ObjectKey{Name: node.Name}, n) == nil && n.Spec.Unschedulable
	}, "the manager's cache sees the cordon")
	passes := reconcilePasses(t)
	poke(t, job)
	testutil.Eventually(t, func() bool { return reconcilePasses(t) > passes }, "a pass after the cordon")

	j := get(t, job)
	assert.Equal(t, mlv1.StateRunning, j.Status.State)
	assert.Equal(t, int32(0), j.Status.Disruptions)
	for _, p := range pods(t, job) {
		assert.Nil(t, p.DeletionTimestamp, "%s is left to the drain", p.Name)
	}
}
