//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/internal/localcluster"
	"github.com/ml-operator/ml-operator/test/testutil"
)

// poolLabel labels the nodes a test adds for itself, with the test's
// namespace; the same key, as a NoSchedule taint, keeps every other test's
// pods off them. The test's job selects and tolerates them.
const poolLabel = "e2e.ml.example.com/pool"

// poolNodes are n GPU nodes of gpus GPUs each, labelled and tainted for the
// test of namespace ns.
func poolNodes(ns string, n, gpus int) []localcluster.NodeSpec {
	nodes := make([]localcluster.NodeSpec, 0, n)
	for i := range n {
		spec := localcluster.GPUNode(fmt.Sprintf("%s-gpu-%d", ns, i), gpus)
		spec.Labels = map[string]string{poolLabel: ns}
		spec.Taints = []corev1.Taint{{Key: poolLabel, Value: ns, Effect: corev1.TaintEffectNoSchedule}}
		nodes = append(nodes, spec)
	}
	return nodes
}

// gangView is one attempt's pods, counted: live (not being deleted), bound
// to a node, Running on one, and Unschedulable (PodScheduled=False) with
// the scheduler's last message.
type gangView struct {
	attempt                             int32
	pods                                []corev1.Pod
	live, bound, running, unschedulable int
	message                             string
}

func viewGang(t *testing.T, tj *mlv1.TrainingJob, attempt int32) gangView {
	t.Helper()
	g := gangView{attempt: attempt}
	for _, p := range workerPods(t, tj, strconv.Itoa(int(attempt))) {
		if p.DeletionTimestamp != nil {
			continue
		}
		g.pods = append(g.pods, p)
		g.live++
		if p.Spec.NodeName != "" {
			g.bound++
			if p.Status.Phase == corev1.PodRunning {
				g.running++
			}
			continue
		}
		if c := podCondition(&p, corev1.PodScheduled); c != nil && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			g.unschedulable++
			g.message = c.Message
		}
	}
	return g
}

func (g gangView) String() string {
	return fmt.Sprintf("attempt %d: %d pods, %d bound, %d running, %d unschedulable (%s)",
		g.attempt, g.live, g.bound, g.running, g.unschedulable, g.message)
}

// describeElastic is describeJob with the elastic fields.
func describeElastic(j *mlv1.TrainingJob) string {
	cp := "none"
	if c := j.Status.LastCheckpoint; c != nil {
		cp = fmt.Sprintf("epoch %d (%s)", c.Epoch, c.Path)
	}
	return fmt.Sprintf("attempt=%d worldSize=%+v placementTimeouts=%d lastCheckpoint=%s %s",
		j.Status.Attempt(), j.Status.WorldSize, j.Status.PlacementTimeouts, cp, describeJob(j))
}

// waitJobEventNote waits for an event of the job with the reason whose note
// holds every one of parts, and returns the note.
func waitJobEventNote(t *testing.T, tj *mlv1.TrainingJob, reason, what string, parts ...string) string {
	t.Helper()
	var found string
	waitFor(t, jobTimeout, what, func() (bool, string) {
		events, err := testutil.EventsAbout(context.Background(), env.client, tj.Namespace, "TrainingJob", tj.Name)
		require.NoError(t, err)
		var notes []string
		for _, e := range events {
			if e.Reason != reason {
				continue
			}
			if testutil.ContainsAll(e.Note, parts...) {
				found = e.Note
				return true, e.Note
			}
			notes = append(notes, e.Note)
		}
		return false, fmt.Sprintf("%s events: %q", reason, notes)
	})
	return found
}

// resumeEpoch is N of a pod's RESUME_FROM_CHECKPOINT .../epoch-N, -1 when
// it has none.
func resumeEpoch(p *corev1.Pod) int {
	m := regexp.MustCompile(`/epoch-(\d+)$`).FindStringSubmatch(testutil.EnvOf(p)[mlv1.EnvResumeFromCheckpoint])
	if m == nil {
		return -1
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// TestElasticGangShrinksAndGrowsBackAt64Ranks is issue 22's elastic gang at
// 64 ranks on kwok, with the real kube-scheduler placing the ranks and the
// real kube-controller-manager: 64 ranks of 1 GPU fill 8 nodes x 8 GPUs of
// the test's own (spec.elastic 48..64). One node is deleted: the gang
// restarts as a disruption, 8 ranks of the next attempt stay Unschedulable,
// and at the job's placementTimeout (40s, shorter than the 2m elastic
// grace, so it is the grace) the gang goes on with the 56 ranks that were
// placed, from rank 0's checkpoint. The node is created again and, at the
// first checkpoint the shrunk attempt writes (the simulated trainer's
// checkpoint timestamps tell the operator which attempt wrote it), the gang
// grows back to 64. Each step is read from the status, the events and the
// pods' env; backoffLimit 0 would fail the job on any counted restart.
func TestElasticGangShrinksAndGrowsBackAt64Ranks(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	ctx := context.Background()
	const nodes, perNode, minWorkers = 8, 8, 48
	const workers, shrunk = nodes * perNode, (nodes - 1) * perNode
	const placementTimeout = 40 * time.Second
	nnodes := fmt.Sprintf("%d:%d", minWorkers, workers)

	pool := poolNodes(ns, nodes, perNode)
	require.NoError(t, env.cluster.AddNodes(ctx, pool...))
	tj := testutil.TrainingJob("elastic", ns).Image("example.com/trainer:1").Workers(workers).GPUs(1).
		BackoffLimit(0).Hyperparameter("epochs", 180).Obj()
	// The simulated trainer spreads its 180 epochs over complete-after:
	// an epoch, and a checkpoint (checkpoint.frequency defaults to 1),
	// every 20s.
	tj.Spec.Template.Annotations = map[string]string{localcluster.SimCompleteAfterAnnotation: "1h"}
	tj.Spec.Elastic = &mlv1.ElasticSpec{MinWorkers: minWorkers, MaxWorkers: workers}
	tj.Spec.Scheduling.NodeSelector = map[string]string{poolLabel: ns}
	tj.Spec.Scheduling.Tolerations = []corev1.Toleration{{Key: poolLabel, Operator: corev1.TolerationOpEqual, Value: ns, Effect: corev1.TaintEffectNoSchedule}}
	tj.Spec.Scheduling.PlacementTimeout = &metav1.Duration{Duration: placementTimeout}
	// The pods on the deleted node are force-deleted once their grace
	// period is over (no kubelet confirms them).
	tj.Spec.Template.TerminationGracePeriodSeconds = ptr.To[int64](1)
	t.Cleanup(func() {
		ctx := context.Background()
		_ = env.client.Delete(ctx, tj)
		for deadline := time.Now().Add(jobTimeout); time.Now().Before(deadline); time.Sleep(time.Second) {
			pods := &corev1.PodList{}
			if err := env.client.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{mlv1.LabelTrainingJob: tj.Name}); err != nil || len(pods.Items) == 0 {
				break
			}
		}
		for _, n := range pool {
			_ = env.client.Delete(ctx, n.Node())
		}
	})
	require.NoError(t, env.client.Create(ctx, tj))

	// 64 ranks Running on the pool, and a checkpoint from rank 0.
	var full gangView
	waitFor(t, jobTimeout, "64 ranks Running", func() (bool, string) {
		full = viewGang(t, tj, 0)
		return full.running == workers, full.String()
	})
	onNode := map[string]int{}
	for _, p := range full.pods {
		assert.True(t, strings.HasPrefix(p.Spec.NodeName, ns+"-gpu-"), "%s on %s, not a node of the test's pool", p.Name, p.Spec.NodeName)
		onNode[p.Spec.NodeName]++
		e := testutil.EnvOf(&p)
		assert.Equal(t, strconv.Itoa(workers), e[mlv1.EnvWorldSize], p.Name)
		assert.Equal(t, nnodes, e[mlv1.EnvPETNNodes], p.Name)
	}
	var j *mlv1.TrainingJob
	waitFor(t, jobTimeout, "the job Running at 64 ranks, rank 0 reporting a checkpoint", func() (bool, string) {
		j = getJob(t, tj)
		return j.Status.State == mlv1.StateRunning && j.Status.LastCheckpoint != nil, describeElastic(j)
	})
	assert.Equal(t, &mlv1.WorldSize{Current: workers, Desired: workers}, j.Status.WorldSize)

	// A node is taken away: the whole gang restarts, as a disruption.
	victim := pool[nodes-1]
	require.Equal(t, perNode, onNode[victim.Name], "every node holds 8 ranks: %v", onNode)
	require.NoError(t, env.client.Delete(ctx, victim.Node()))
	waitJobEventNote(t, tj, mlv1.ReasonNodeLost, "a NodeLost gang restart naming the deleted node",
		"gang restart for a disruption: ", "node "+victim.Name+" is gone")
	j = getJob(t, tj)
	assert.EqualValues(t, 0, j.Status.Restarts, "a lost node is not a failure: %s", describeElastic(j))

	// The next attempt asks for 64 ranks again: 56 are placed, the 8 that
	// no longer fit stay Unschedulable.
	var stuck gangView
	waitFor(t, jobTimeout, "the next attempt: 64 pods, 56 placed, 8 Unschedulable", func() (bool, string) {
		j := getJob(t, tj)
		if j.Status.Disruptions == 0 {
			return false, describeElastic(j)
		}
		stuck = viewGang(t, tj, j.Status.Attempt())
		return stuck.live == workers && stuck.bound == shrunk && stuck.unschedulable == perNode, stuck.String()
	})
	assert.Contains(t, stuck.message, "nvidia.com/gpu", "the scheduler's reason")

	// At the placement timeout the gang goes on with the 56 placed ranks.
	var small *mlv1.TrainingJob
	var sg gangView
	waitFor(t, jobTimeout, "the gang Running shrunk to 56 ranks", func() (bool, string) {
		small = getJob(t, tj)
		if ws := small.Status.WorldSize; ws == nil || ws.Current != shrunk || small.Status.State != mlv1.StateRunning {
			return false, describeElastic(small)
		}
		sg = viewGang(t, tj, small.Status.Attempt())
		return sg.live == shrunk && sg.running == shrunk, sg.String()
	})
	assert.Equal(t, &mlv1.WorldSize{Current: shrunk, Desired: workers}, small.Status.WorldSize)
	assert.EqualValues(t, 0, small.Status.Restarts, "a shrink spends no backoffLimit: %s", describeElastic(small))
	assert.EqualValues(t, 0, small.Status.PlacementTimeouts, "shrunk, not released: %s", describeElastic(small))
	assert.GreaterOrEqual(t, small.Status.Disruptions, int32(2), "the node loss and the shrink: %s", describeElastic(small))
	waitJobEventNote(t, tj, mlv1.ReasonResized, "a Resized event: from 64 to the 56 placed ranks at the placement timeout",
		"gang restart for a resize: ", "still unschedulable", "(placementTimeout 40s)",
		"resizing the gang from 64 to the 56 ranks that were placed (spec.elastic.minWorkers 48) from the latest checkpoint")
	resumedAt := -1
	for _, p := range sg.pods {
		assert.NotEqual(t, victim.Name, p.Spec.NodeName, p.Name)
		e := testutil.EnvOf(&p)
		assert.Equal(t, strconv.Itoa(shrunk), e[mlv1.EnvWorldSize], p.Name)
		assert.Equal(t, strconv.Itoa(shrunk), e[mlv1.EnvNumWorkers], p.Name)
		assert.Equal(t, nnodes, e[mlv1.EnvPETNNodes], p.Name)
		assert.Equal(t, strconv.Itoa(shrunk), p.Labels[mlv1.LabelNumWorkers], p.Name)
		assert.Positive(t, resumeEpoch(&p), "%s resumes from a checkpoint: %q", p.Name, e[mlv1.EnvResumeFromCheckpoint])
		resumedAt = resumeEpoch(&p)
	}

	// The node comes back: at the next checkpoint the gang grows to 64.
	require.NoError(t, env.cluster.AddNodes(ctx, victim))
	var grown *mlv1.TrainingJob
	var gg gangView
	// A checkpoint every 20s, scraped every 15s; if the gang tried to grow
	// before the node was back, it shrank again first.
	waitFor(t, 3*time.Minute, "the gang grown back to 64 ranks, all Running", func() (bool, string) {
		grown = getJob(t, tj)
		ws := grown.Status.WorldSize
		if grown.Status.Attempt() <= small.Status.Attempt() || ws == nil || ws.Current != workers || grown.Status.State != mlv1.StateRunning {
			return false, describeElastic(grown)
		}
		gg = viewGang(t, tj, grown.Status.Attempt())
		return gg.live == workers && gg.running == workers, gg.String()
	})
	assert.Equal(t, &mlv1.WorldSize{Current: workers, Desired: workers}, grown.Status.WorldSize)
	assert.EqualValues(t, 0, grown.Status.Restarts, describeElastic(grown))
	assert.EqualValues(t, 0, grown.Status.PlacementTimeouts, describeElastic(grown))
	note := waitJobEventNote(t, tj, mlv1.ReasonResized, "a Resized event growing the gang back to 64 at a checkpoint",
		"gang restart for a resize: rank 0 saved a checkpoint (epoch ", "since the gang shrank to 56 ranks; growing it back to 64 ranks (numWorkers)")
	m := regexp.MustCompile(`saved a checkpoint \(epoch (\d+)\)`).FindStringSubmatch(note)
	require.NotNil(t, m, note)
	grewAt, _ := strconv.Atoi(m[1])
	assert.Greater(t, grewAt, resumedAt, "grown at a checkpoint the shrunk attempt wrote, after the one it resumed from: %s", note)
	for _, p := range gg.pods {
		e := testutil.EnvOf(&p)
		assert.Equal(t, strconv.Itoa(workers), e[mlv1.EnvWorldSize], p.Name)
		assert.Equal(t, strconv.Itoa(workers), e[mlv1.EnvNumWorkers], p.Name)
		assert.Equal(t, nnodes, e[mlv1.EnvPETNNodes], p.Name)
		assert.GreaterOrEqual(t, resumeEpoch(&p), grewAt, "%s resumes from the checkpoint it grew at (or a later one): %q", p.Name, e[mlv1.EnvResumeFromCheckpoint])
	}
	t.Logf("shrunk to %d ranks (attempt %d, resumed from epoch %d), grown back to %d (attempt %d) at epoch %d; disruptions %d, restarts %d",
		shrunk, small.Status.Attempt(), resumedAt, workers, grown.Status.Attempt(), grewAt, grown.Status.Disruptions, grown.Status.Restarts)
}
