//go:build e2e_real

package e2ereal

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	mlv1alpha1 "github.com/ml-operator/ml-operator/api/v1alpha1"
	"github.com/ml-operator/ml-operator/internal/manifests"
)

// seedDir holds the users' seed manifests, unchanged.
var seedDir = filepath.Join("..", "testdata", "seed-examples")

// applySeed creates the objects of a seed manifest exactly as written
// (their namespaces made first when missing, as a user would) and deletes
// them after the test.
func applySeed(t *testing.T, file string) []*unstructured.Unstructured {
	t.Helper()
	ctx := context.Background()
	objs, err := manifests.Read(filepath.Join(seedDir, file))
	require.NoError(t, err)
	for _, o := range objs {
		if ns := o.GetNamespace(); ns != "" {
			nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
			if err := node.Client.Create(ctx, nsObj); err == nil {
				t.Cleanup(func() { _ = node.Client.Delete(context.Background(), nsObj) })
			} else {
				require.True(t, apierrors.IsAlreadyExists(err), "namespace %s: %v", ns, err)
			}
			require.Eventually(t, func() bool {
				return node.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "default"}, &corev1.ServiceAccount{}) == nil
			}, 30*time.Second, 250*time.Millisecond, "default service account in %s", ns)
		}
		require.NoError(t, opClient.Create(ctx, o.DeepCopy()), "%s %s from %s", o.GetKind(), o.GetName(), file)
		obj := o.DeepCopy()
		t.Cleanup(func() { _ = opClient.Delete(context.Background(), obj) })
	}
	return objs
}

// testConversion: the conversion webhook is reached through its Service. A
// v1alpha1 seed manifest, stored as v1 (the storage version), is read back
// as v1; a v1 seed is read back as v1alpha1.
func testConversion(t *testing.T) {
	ctx := context.Background()
	v1 := &mlv1.TrainingJob{}
	require.NoError(t, opClient.Get(ctx, client.ObjectKey{Namespace: "ml-jobs", Name: "pytorch-mnist"}, v1))
	t.Logf("v1alpha1 %s/%s read as v1: numWorkers %d, gpusPerWorker %v, image %s, command %v, args %v, hyperparameters %d",
		v1.Namespace, v1.Name, v1.Spec.NumWorkers, deref(v1.Spec.GPUsPerWorker), v1.Spec.Image, v1.Spec.Command, v1.Spec.Args, len(v1.Spec.Hyperparameters))
	require.Equal(t, int32(2), v1.Spec.NumWorkers, "spec.workers: 2")
	require.Equal(t, int32(0), deref(v1.Spec.GPUsPerWorker), "spec.gpuPerWorker: 0")
	require.Equal(t, "pytorch/pytorch:1.12.0-cuda11.3", v1.Spec.Image)
	require.Equal(t, []string{"python", "-m", "torch.distributed.run", "--nproc_per_node=1", "/workspace/train_mnist.py"}, v1.Spec.Command)
	require.Equal(t, []string{"--epochs=10", "--batch-size=64"}, v1.Spec.Args)

	back := &mlv1alpha1.TrainingJob{}
	require.NoError(t, opClient.Get(ctx, client.ObjectKey{Namespace: "default", Name: "test-job"}, back))
	t.Logf("v1 %s/%s read as v1alpha1: workers %d, gpuPerWorker %d, framework %q, hyperparameters %d",
		back.Namespace, back.Name, back.Spec.Workers, back.Spec.GPUPerWorker, back.Spec.Framework, len(back.Spec.Hyperparameters))
	require.Equal(t, int32(2), back.Spec.Workers)
	require.Equal(t, int32(1), back.Spec.GPUPerWorker)
	require.Equal(t, "0.001", string(back.Spec.Hyperparameters["learningRate"].Raw))
}

func deref(p *int32) int32 {
	if p == nil {
		return -1
	}
	return *p
}

// testSeedExamples: the users' seed manifests, applied unchanged. None can
// run on this node (no GPU; 2 CPUs; images that were never pushed), so
// each must say why through its status, as docs/trainingjob.md ("Waiting
// for capacity") promises. The conditions are logged: they are what a user
// sees with `kubectl describe`.
func testSeedExamples(t *testing.T) {
	var jobs []*unstructured.Unstructured
	for _, f := range []string{"trainingjob-v1-test-job.yaml", "trainingjob-v1alpha1-mnist-training.yaml", "trainingjob-v1alpha1-pytorch-mnist.yaml"} {
		jobs = append(jobs, applySeed(t, f)...)
	}
	md := applySeed(t, "modeldeployment-v1-sentiment-analysis.yaml")[0]
	t.Run("ConversionWebhookThroughItsService", testConversion)
	t.Run("TrainingJobsSayWhyTheyWait", func(t *testing.T) { testSeedJobs(t, jobs) })
	t.Run("ModelDeploymentSaysWhyItWaits", func(t *testing.T) { testSeedModelDeployment(t, md) })
}

func testSeedJobs(t *testing.T, jobs []*unstructured.Unstructured) {
	ctx := context.Background()
	for _, o := range jobs {
		key := client.ObjectKey{Namespace: o.GetNamespace(), Name: o.GetName()}
		got := &mlv1.TrainingJob{}
		var running *metav1.Condition
		err := poll(3*time.Minute, func() bool {
			if opClient.Get(ctx, key, got) != nil {
				return false
			}
			running = meta.FindStatusCondition(got.Status.Conditions, mlv1.TrainingJobRunning)
			return got.Status.State == mlv1.StateFailed || got.Status.State == mlv1.StateCompleted ||
				(running != nil && running.Reason == "Unschedulable")
		})
		t.Logf("seed %s %s (%s): state %q", o.GetAPIVersion(), key, o.GetKind(), got.Status.State)
		for _, c := range got.Status.Conditions {
			t.Logf("  %s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message)
		}
		require.NoError(t, err, "seed %s: the status never explained why it does not run\n%s", key, node.NamespaceDiagnostics(ctx, key.Namespace))
		require.NotEqual(t, mlv1.StateCompleted, got.Status.State)
		if running != nil && running.Reason == "Unschedulable" {
			// The scheduler's own reason, quoted with the rank and pod. On
			// this node: no GPU, two CPUs, and no volume provisioner for the
			// checkpoint claim.
			require.Regexp(t, `rank \d \(pod \S+-worker-\d\) is unschedulable: 0/1 nodes are available: `, running.Message, "seed %s", key)
		}
	}
}

func testSeedModelDeployment(t *testing.T, md *unstructured.Unstructured) {
	ctx := context.Background()
	got := &mlv1.ModelDeployment{}
	key := client.ObjectKey{Namespace: md.GetNamespace(), Name: md.GetName()}
	// Its image was never pushed: wait until the kubelet says so, then
	// read what the operator tells the user.
	pods := &corev1.PodList{}
	pulling := func() bool {
		if node.Client.List(ctx, pods, client.InNamespace(key.Namespace)) != nil {
			return false
		}
		for _, p := range pods.Items {
			for _, cs := range p.Status.ContainerStatuses {
				if w := cs.State.Waiting; w != nil && (w.Reason == "ErrImagePull" || w.Reason == "ImagePullBackOff") {
					return true
				}
			}
		}
		return false
	}
	err := poll(2*time.Minute, func() bool {
		return pulling() && opClient.Get(ctx, key, got) == nil && got.Status.ObservedGeneration == got.Generation && len(got.Status.ActiveVersions) > 0
	})
	t.Logf("seed ModelDeployment %s: phase %q, router %s, url %s, versions %+v", key, got.Status.Phase, got.Status.Router, got.Status.URL, got.Status.ActiveVersions)
	for _, c := range got.Status.Conditions {
		t.Logf("  %s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message)
	}
	for _, p := range pods.Items {
		t.Logf("  pod %s: %s %s", p.Name, p.Status.Phase, podWhy(&p))
	}
	require.NoError(t, err, "the seed ModelDeployment's image pull never failed, or it has no status")
	require.Equal(t, mlv1.PhasePending, got.Status.Phase, "no version of the seed can take traffic here")
	ready := meta.FindStatusCondition(got.Status.Conditions, mlv1.ModelDeploymentReady)
	require.NotNil(t, ready)
	require.Equal(t, metav1.ConditionFalse, ready.Status)
}

// podWhy says why a pod is not running: the scheduler's or the kubelet's
// reason.
func podWhy(p *corev1.Pod) string {
	var why []string
	for _, c := range p.Status.Conditions {
		if c.Status != corev1.ConditionTrue && c.Reason != "" {
			why = append(why, fmt.Sprintf("%s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message))
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil {
			why = append(why, fmt.Sprintf("container %s waiting %s: %s", cs.Name, w.Reason, w.Message))
		}
	}
	return strings.Join(why, "; ")
}
