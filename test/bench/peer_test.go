package bench

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The peer's job is the burst's TrainingJob as a PyTorchJob: W ranks (one
// Master, W-1 Workers) of the same image, kept running by the same kwok
// annotation, with the baseline's GPU limit and toleration when workers
// have GPUs.
func TestPeerJobIsTheBurstsJobAsAPyTorchJob(t *testing.T) {
	r := &run{cfg: Config{Ranks: 8, GPUsPerWorker: 2}}
	job := r.peerJob("peer", "peer-3")
	assert.Equal(t, "kubeflow.org/v1", job.GetAPIVersion())
	assert.Equal(t, "PyTorchJob", job.GetKind())
	assert.Equal(t, "peer", job.GetNamespace())
	assert.Equal(t, "peer-3", job.GetName())

	base := r.baselinePod(0)
	ranks := int64(0)
	for _, rt := range []string{"Master", "Worker"} {
		n, found, err := unstructured.NestedInt64(job.Object, "spec", "pytorchReplicaSpecs", rt, "replicas")
		require.NoError(t, err)
		require.True(t, found, "%s replicas", rt)
		ranks += n
		tmpl, _, _ := unstructured.NestedMap(job.Object, "spec", "pytorchReplicaSpecs", rt, "template")
		ann, _, _ := unstructured.NestedStringMap(tmpl, "metadata", "annotations")
		assert.Equal(t, map[string]string{"sim.ml.example.com/complete-after": "1h"}, ann, rt)
		containers, _, _ := unstructured.NestedSlice(tmpl, "spec", "containers")
		require.Len(t, containers, 1)
		c := containers[0].(map[string]any)
		assert.Equal(t, "pytorch", c["name"], "the container the training-operator configures is named pytorch")
		assert.Equal(t, workerImage, c["image"])
		limit, _, _ := unstructured.NestedString(c, "resources", "limits", "nvidia.com/gpu")
		assert.Equal(t, base.Spec.Containers[0].Resources.Limits.Name("nvidia.com/gpu", "").String(), limit)
		tols, _, _ := unstructured.NestedSlice(tmpl, "spec", "tolerations")
		require.Len(t, tols, 1)
		assert.Equal(t, map[string]any{"key": base.Spec.Tolerations[0].Key, "operator": "Exists", "effect": "NoSchedule"}, tols[0])
	}
	assert.Equal(t, int64(8), ranks, "Master + Workers are the burst's ranks")

	single := (&run{cfg: Config{Ranks: 1}}).peerJob("peer", "p")
	_, found, _ := unstructured.NestedMap(single.Object, "spec", "pytorchReplicaSpecs", "Worker")
	assert.False(t, found, "one rank is a Master alone")
	tmpl, _, _ := unstructured.NestedMap(single.Object, "spec", "pytorchReplicaSpecs", "Master", "template")
	_, found, _ = unstructured.NestedFieldNoCopy(tmpl, "spec", "tolerations")
	assert.False(t, found, "CPU workers need no toleration")
}

// The table prints the peer beside ours, with the ratio of the pod rates,
// and the manager's anonymous RSS per worker pod against its idle reading.
func TestTablePrintsThePeerRatioAndAnonPerPod(t *testing.T) {
	r := &Result{
		Config: Config{Jobs: 10, Ranks: 8},
		Burst:  []BurstRun{{PodsPerSecond: 30}, {PodsPerSecond: 40}, {PodsPerSecond: 50}},
		Memory: []MemoryLevel{
			{Pods: 0, Readings: []Memory{{RSSAnonBytes: 20e6}, {RSSAnonBytes: 21e6}, {RSSAnonBytes: 22e6}}},
			{Pods: 1000, Readings: []Memory{{RSSAnonBytes: 30e6}, {RSSAnonBytes: 31e6}, {RSSAnonBytes: 40e6}}},
		},
		Peer: &PeerRun{Version: "v1.9.2", PodsSeconds: 8, RunningSeconds: 9, PodsPerSecond: 10, Services: 80,
			Memory: Memory{RSSBytes: 90e6, RSSAnonBytes: 40e6, RSSFileBytes: 50e6}},
	}
	var out bytes.Buffer
	r.PrintTable(&out)
	table := out.String()
	assert.Contains(t, table, "peer: Kubeflow training-operator v1.9.2, 10 PyTorchJobs x 8")
	assert.Regexp(t, `ml-operator pod rate / peer pod rate +4\.00\n`, table, "median 40 pods/s against 10")
	assert.Regexp(t, `Services created +80\n`, table)
	assert.Regexp(t, `peer RSS \(anon \+ file\), all pods Running +90\.0 MB \(40\.0 \+ 50\.0\)\n`, table)
	assert.Regexp(t, `anonymous RSS per worker pod \(median, against 0 pods\) +10\.0 KB\n`, table, "(31 - 21) MB / 1000 pods")
}
