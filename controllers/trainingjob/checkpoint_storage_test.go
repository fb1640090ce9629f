package trainingjob

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

// With a checkpoint claim no two nodes may mount, every pod of the gang but
// rank 0 requires rank 0's node (of the same attempt), after the job's own
// affinity; rank 0 is placed freely.
func TestRanksShareRankZerosNode(t *testing.T) {
	job := testJob(mlv1.FrameworkTensorFlow)
	job.Spec.ParameterServers = 1
	own := &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "cache"}}, TopologyKey: "topology.kubernetes.io/zone",
	}}}}
	job.Spec.Scheduling.Affinity = own.DeepCopy()
	rankZero := corev1.PodAffinityTerm{
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{
			"ml.example.com/trainingjob": "bert", "ml.example.com/replica-type": "worker",
			"ml.example.com/rank": "0", "ml.example.com/restart-attempt": "2",
		}},
		TopologyKey: "kubernetes.io/hostname",
	}
	want := own.DeepCopy()
	want.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution = append(want.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution, rankZero)

	require.Empty(t, cmp.Diff(own, desiredWorkerPod(job, 0, 2, &testCfg, true).Spec.Affinity), "rank 0")
	require.Empty(t, cmp.Diff(want, desiredWorkerPod(job, 1, 2, &testCfg, true).Spec.Affinity), "rank 1 (-want +got)")
	require.Empty(t, cmp.Diff(want, desiredPSPod(job, 0, 2, &testCfg, true).Spec.Affinity), "ps 0 (-want +got)")
	require.Empty(t, cmp.Diff(own, job.Spec.Scheduling.Affinity), "the job's own affinity is not changed")
	require.Empty(t, cmp.Diff(own, desiredWorkerPod(job, 1, 2, &testCfg, false).Spec.Affinity), "a shared claim adds nothing")

	job.Spec.Scheduling.Affinity = nil
	require.Empty(t, cmp.Diff(&corev1.Affinity{PodAffinity: &corev1.PodAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{rankZero},
	}}, desiredWorkerPod(job, 1, 2, &testCfg, true).Spec.Affinity), "-want +got")
}

// The class a claim without storageClassName gets, as the API server's
// DefaultStorageClass admission picks it: the newest marked default.
func TestDefaultStorageClass(t *testing.T) {
	at := func(name string, age time.Duration, def string) storagev1.StorageClass {
		c := storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(time.Unix(1e9, 0).Add(-age))}}
		if def != "" {
			c.Annotations = map[string]string{def: "true"}
		}
		return c
	}
	const ga, beta = "storageclass.kubernetes.io/is-default-class", "storageclass.beta.kubernetes.io/is-default-class"
	require.Nil(t, defaultStorageClass(nil))
	require.Nil(t, defaultStorageClass([]storagev1.StorageClass{at("fast", 0, "")}))
	require.Equal(t, "old", defaultStorageClass([]storagev1.StorageClass{at("fast", 0, ""), at("old", time.Hour, ga)}).Name)
	require.Equal(t, "new", defaultStorageClass([]storagev1.StorageClass{at("old", time.Hour, ga), at("new", time.Minute, beta)}).Name)
	require.Equal(t, "a", defaultStorageClass([]storagev1.StorageClass{at("b", 0, ga), at("a", 0, ga)}).Name)
}
