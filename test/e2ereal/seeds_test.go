//go:build e2e_real

package e2ereal

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	mlv1alpha1 "github.com/ml-operator/ml-operator/api/v1alpha1"
	"github.com/ml-operator/ml-operator/internal/manager"
	"github.com/ml-operator/ml-operator/internal/manifests"
	"github.com/ml-operator/ml-operator/internal/realnode"
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
			ensureNamespace(t, ns)
		}
		require.NoError(t, opClient.Create(ctx, o.DeepCopy()), "%s %s from %s", o.GetKind(), o.GetName(), file)
		obj := o.DeepCopy()
		t.Cleanup(func() { _ = opClient.Delete(context.Background(), obj) })
	}
	return objs
}

// ensureNamespace makes the namespace ns when it is missing (deleting it
// after the test) and waits for its default service account.
func ensureNamespace(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
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

// The seeds name images nobody pushed here and GPUs this machine lacks.
// The test gives the node what the seeds' own documents assume a cluster
// has, and nothing more, so each seed meets its real outcome:
//   - GPUs: seedGPUs nvidia.com/gpu advertised in the node's status, the
//     way Kubernetes documents advertising extended resources (no device
//     plugin; the kubelet admits the pods and never touches the devices);
//   - the images, under the names the seeds and the operator's defaults
//     use: the trainer image (Debian's PyTorch with `python`, whose command
//     when none is given is /bin/bash, as in Ubuntu-based images such as
//     pytorch/pytorch). It holds none of the users' training scripts;
//     neither do the real images. It does hold /app/train.py (the example
//     trainer), which the default launch command of test-job runs: an
//     admin whose jobs name no command points --default-image at an image
//     with that script, or --default-command at their own (the upstream
//     pytorch/pytorch image has none);
//   - a documented static PersistentVolume for each checkpoint claim (the
//     node has no provisioner) and for mnist-training's data claim
//     training-data-pvc, which the seed expects to exist.
const seedGPUs = 8

// seedImages are the images the seed jobs run: the operator's default
// PyTorch image (test-job names none) and the v1alpha1 seeds' image, as the
// node resolves them.
var seedImages = []string{manager.DefaultFrameworkImages()["pytorch"], "docker.io/pytorch/pytorch:1.12.0-cuda11.3"}

// advertiseGPUs sets nvidia.com/gpu in the node's capacity (status
// subresource) and removes it after the test.
func advertiseGPUs(t *testing.T, n int) {
	t.Helper()
	advertiseResource(t, mlv1.DefaultGPUResourceName, n)
}

// advertiseResource sets the extended resource name in the node's capacity
// (status subresource) to n, waits until the kubelet shows it allocatable,
// and removes it after the test. The function it returns sets it to
// another count, and waits the same way.
func advertiseResource(t *testing.T, name corev1.ResourceName, n int) func(int) {
	t.Helper()
	ctx := context.Background()
	patch := func(v string) error {
		body := fmt.Sprintf(`{"status":{"capacity":{%q:%s}}}`, name, v)
		return node.Client.Status().Patch(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: realnode.NodeName}},
			client.RawPatch(types.StrategicMergePatchType, []byte(body)))
	}
	set := func(n int) {
		t.Helper()
		require.NoError(t, patch(fmt.Sprintf("%q", fmt.Sprint(n))))
		// The kubelet carries an extended resource from capacity into
		// allocatable on its next status update.
		require.NoError(t, poll(time.Minute, func() bool {
			got := &corev1.Node{}
			if node.Client.Get(ctx, client.ObjectKey{Name: realnode.NodeName}, got) != nil {
				return false
			}
			q := got.Status.Allocatable[name]
			return q.Value() == int64(n)
		}), "the node's allocatable never showed %d %s", n, name)
	}
	set(n)
	t.Cleanup(func() { _ = patch("null") })
	return set
}

// staticVolume is a hostPath PersistentVolume with the access modes given,
// bound in advance to the claim ns/claim (storage class "", as a claim
// with none binds when the cluster has no default class). It returns the
// volume's directory.
func staticVolume(t *testing.T, ns, claim string, modes ...corev1.PersistentVolumeAccessMode) string {
	t.Helper()
	dir := filepath.Join(node.Workdir(), "volumes", ns+"-"+claim)
	require.NoError(t, os.MkdirAll(dir, 0o777))
	require.NoError(t, os.Chmod(dir, 0o777))
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + claim},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")},
			AccessModes:                   modes,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			ClaimRef:                      &corev1.ObjectReference{Namespace: ns, Name: claim},
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir}},
		},
	}
	require.NoError(t, node.Client.Create(context.Background(), pv))
	t.Cleanup(func() { _ = node.Client.Delete(context.Background(), pv) })
	return dir
}

// seedOutcome is what a seed job ends in on this node, and why.
type seedOutcome struct {
	file string
	// state is the terminal state; empty for a job that waits.
	state mlv1.TrainingJobState
	// reason is the Succeeded (Completed) or Failed (Failed) condition's
	// reason for a terminal state, the Running condition's while it waits.
	reason string
	// message must match the condition's message.
	message string
	// log must match rank 0's log, when set.
	log string
	// checkpoints are the files left on the job's checkpoint volume, when
	// set.
	checkpoints []string
}

// seedOutcomes are the documented outcomes (docs/local-cluster.md, "A
// real node"). test-job names no command, so its two ranks run the
// default launch command (seed 000's: torchrun /app/train.py with the
// model, dataset, hyperparameters and checkpoint directory as flags),
// train its 10 epochs and Complete, keeping the last 3 checkpoints.
// mnist-training's script is not in the image: its ranks exit 2, and the
// gang is restarted backoffLimit (3) times, then fails. pytorch-mnist asks
// for 2 CPUs per rank, 4 in all, on a node of 2: it waits and says why
// (docs/trainingjob.md, "Waiting for capacity"), is released and retried
// after placementTimeout (10 min); only runPolicy.activeDeadlineSeconds
// would end that wait.
var seedOutcomes = []seedOutcome{
	{file: "trainingjob-v1-test-job.yaml", state: mlv1.StateCompleted, reason: mlv1.ReasonAllWorkersSucceeded,
		log:         `(?s)rank 0: model 'resnet50', dataset 'imagenet', 10 epochs, checkpoints in '/checkpoints'.*rank 0: epoch 10/10 done.*training complete epochs=10`,
		checkpoints: []string{"epoch-10", "epoch-8", "epoch-9"}},
	{file: "trainingjob-v1alpha1-mnist-training.yaml", state: mlv1.StateFailed, reason: mlv1.ReasonBackoffLimitExceeded,
		message: `exit code 2`},
	{file: "trainingjob-v1alpha1-pytorch-mnist.yaml", reason: mlv1.ReasonUnschedulable,
		message: `rank 0 \(pod pytorch-mnist-worker-0\) is unschedulable: 0/1 nodes are available: 1 Insufficient cpu`},
}

// testSeedExamples: the users' seed manifests, applied unchanged, reach
// their documented outcomes on the real node; the conversion webhook
// serves the v1alpha1 ones as v1 and the v1 one as v1alpha1; the
// ModelDeployment, whose image nobody pushed, says why it serves nothing.
func testSeedExamples(t *testing.T) {
	advertiseGPUs(t, seedGPUs)
	pushTrainerImage(t, seedImages...)
	// The checkpoint claims' volumes are ReadWriteOnce only, as block
	// storage (kind's local-path, GCE PD) is: the node has no
	// StorageClass, so the operator asks for no more, and the multi-rank
	// seeds run all their ranks on rank 0's node.
	rwo := []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	for _, v := range []struct {
		ns, claim string
		modes     []corev1.PersistentVolumeAccessMode
	}{
		{"default", "test-job-checkpoints", rwo},
		{"ml-team", "mnist-training-checkpoints", rwo},
		{"ml-team", "training-data-pvc", []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}},
		{"ml-jobs", "pytorch-mnist-checkpoints", rwo},
	} {
		seedVolumes[v.ns+"/"+v.claim] = staticVolume(t, v.ns, v.claim, v.modes...)
	}
	// The claim mnist-training mounts, as its user made it.
	ensureNamespace(t, "ml-team")
	dataClaim(t, "ml-team", "training-data-pvc")
	var jobs []*unstructured.Unstructured
	for _, o := range seedOutcomes {
		jobs = append(jobs, applySeed(t, o.file)...)
	}
	require.Len(t, jobs, len(seedOutcomes), "one TrainingJob per seed file")
	md := applySeed(t, "modeldeployment-v1-sentiment-analysis.yaml")[0]
	t.Run("ConversionWebhookThroughItsService", testConversion)
	t.Run("TrainingJobsReachTheirDocumentedOutcome", func(t *testing.T) { testSeedJobs(t, jobs) })
	t.Run("ModelDeploymentSaysWhyItWaits", func(t *testing.T) { testSeedModelDeployment(t, md) })
}

// seedVolumes are the static volumes' directories by namespace/claim.
var seedVolumes = map[string]string{}

// dataClaim is a user's claim, bound to its static volume.
func dataClaim(t *testing.T, ns, name string) {
	t.Helper()
	empty := ""
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: &empty,
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	require.NoError(t, node.Client.Create(context.Background(), pvc))
	t.Cleanup(func() { _ = node.Client.Delete(context.Background(), pvc) })
}

func testSeedJobs(t *testing.T, jobs []*unstructured.Unstructured) {
	ctx := context.Background()
	for i, o := range jobs {
		want := seedOutcomes[i]
		key := client.ObjectKey{Namespace: o.GetNamespace(), Name: o.GetName()}
		got := &mlv1.TrainingJob{}
		var cond *metav1.Condition
		// The first seed's wait includes pulling the 1.35 GB image.
		err := poll(12*time.Minute, func() bool {
			if opClient.Get(ctx, key, got) != nil {
				return false
			}
			if want.state == "" {
				cond = meta.FindStatusCondition(got.Status.Conditions, mlv1.TrainingJobRunning)
				return cond != nil && cond.Reason == want.reason
			}
			cond = meta.FindStatusCondition(got.Status.Conditions, mlv1.TrainingJobSucceeded)
			if got.Status.State == mlv1.StateFailed {
				cond = meta.FindStatusCondition(got.Status.Conditions, mlv1.TrainingJobFailed)
			}
			return got.Status.State == mlv1.StateFailed || got.Status.State == mlv1.StateCompleted
		})
		t.Logf("seed %s %s (%s): state %q, restarts %d", o.GetAPIVersion(), key, want.file, got.Status.State, got.Status.Restarts)
		for _, c := range got.Status.Conditions {
			t.Logf("  %s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message)
		}
		require.NoError(t, err, "seed %s never reached its documented outcome %+v\n%s", key, want, node.NamespaceDiagnostics(ctx, key.Namespace))
		if want.state != "" {
			require.Equal(t, want.state, got.Status.State, "seed %s", key)
			require.NotNil(t, cond, "seed %s: no Succeeded or Failed condition", key)
			require.Equal(t, want.reason, cond.Reason, "seed %s: %s", key, cond.Message)
		}
		if want.message != "" {
			require.Regexp(t, want.message, cond.Message, "seed %s", key)
		}
		if want.log != "" {
			log, err := node.PodLog(ctx, key.Namespace, key.Name+"-worker-0")
			require.NoError(t, err, "seed %s: rank 0's log", key)
			t.Logf("  rank 0's log: %s", strings.TrimSpace(log))
			require.Regexp(t, want.log, log, "seed %s: rank 0's log", key)
		}
		if want.checkpoints != nil {
			dir := seedVolumes[key.Namespace+"/"+mlv1.CheckpointPVCName(key.Name)]
			require.Equal(t, want.checkpoints, checkpointFiles(dir), "seed %s: checkpoints in %s", key, dir)
			// Its claim asked for what a ReadWriteOnce-only volume gives,
			// and was bound to one.
			pvc := &corev1.PersistentVolumeClaim{}
			require.NoError(t, node.Client.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: mlv1.CheckpointPVCName(key.Name)}, pvc))
			require.Equal(t, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, pvc.Spec.AccessModes, "seed %s checkpoint claim", key)
			require.Equal(t, corev1.ClaimBound, pvc.Status.Phase, "seed %s checkpoint claim", key)
		}
		if want.state == mlv1.StateFailed {
			// Every attempt was a real failure of the user's command: the
			// gang was restarted backoffLimit times.
			require.Equal(t, int32(3), got.Status.Restarts, "seed %s restarts", key)
			pod := &corev1.Pod{}
			if node.Client.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: key.Name + "-worker-0"}, pod) == nil {
				if log, err := node.PodLog(ctx, key.Namespace, pod.Name); err == nil {
					t.Logf("  rank 0's log: %s", strings.TrimSpace(log))
				}
			}
		}
	}
}

func testSeedModelDeployment(t *testing.T, md *unstructured.Unstructured) {
	ctx := context.Background()
	got := &mlv1.ModelDeployment{}
	key := client.ObjectKey{Namespace: md.GetNamespace(), Name: md.GetName()}
	// Its model is on S3, which no pod here reaches (the cluster's DNS
	// answers cluster names only): the storage initializer fails before
	// the server's image (never pushed) is even pulled. Wait until the
	// initializer has failed, then read what the operator tells the user.
	pods := &corev1.PodList{}
	fetchFailed := func() bool {
		if node.Client.List(ctx, pods, client.InNamespace(key.Namespace)) != nil {
			return false
		}
		for _, p := range pods.Items {
			for _, cs := range p.Status.InitContainerStatuses {
				for _, term := range []*corev1.ContainerStateTerminated{cs.State.Terminated, cs.LastTerminationState.Terminated} {
					if cs.Name == mlv1.StorageInitializerContainerName && term != nil && term.ExitCode != 0 {
						return true
					}
				}
			}
		}
		return false
	}
	err := poll(3*time.Minute, func() bool {
		failed := fetchFailed()
		if opClient.Get(ctx, key, got) != nil || !failed || got.Status.ObservedGeneration != got.Generation || len(got.Status.ActiveVersions) == 0 {
			return false
		}
		h := meta.FindStatusCondition(got.Status.Conditions, mlv1.ModelDeploymentHealthy)
		return h != nil && h.Status == metav1.ConditionFalse
	})
	t.Logf("seed ModelDeployment %s: phase %q, router %s, url %s, versions %+v", key, got.Status.Phase, got.Status.Router, got.Status.URL, got.Status.ActiveVersions)
	for _, c := range got.Status.Conditions {
		t.Logf("  %s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message)
	}
	for _, p := range pods.Items {
		t.Logf("  pod %s: %s %s", p.Name, p.Status.Phase, podWhy(&p))
	}
	require.NoError(t, err, "the seed ModelDeployment's model fetch never failed, or it has no status\n%s", node.NamespaceDiagnostics(ctx, key.Namespace))
	require.Equal(t, mlv1.PhasePending, got.Status.Phase, "no version of the seed can take traffic here")
	ready := meta.FindStatusCondition(got.Status.Conditions, mlv1.ModelDeploymentReady)
	require.NotNil(t, ready)
	require.Equal(t, metav1.ConditionFalse, ready.Status)
	// A model that cannot be fetched is not healthy, even before any pod
	// was Ready; the condition quotes the initializer.
	healthy := meta.FindStatusCondition(got.Status.Conditions, mlv1.ModelDeploymentHealthy)
	require.NotNil(t, healthy)
	require.Equal(t, metav1.ConditionFalse, healthy.Status, "%s: %s", healthy.Reason, healthy.Message)
	require.Equal(t, mlv1.ReasonModelFetchFailed, healthy.Reason)
	require.Contains(t, healthy.Message, "the storage initializer could not fetch the model: GET s3://models/sentiment/v1/model.pt: ")
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
	for _, cs := range append(append([]corev1.ContainerStatus(nil), p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		if w := cs.State.Waiting; w != nil {
			why = append(why, fmt.Sprintf("container %s waiting %s: %s", cs.Name, w.Reason, w.Message))
		}
		if term := cs.LastTerminationState.Terminated; term != nil && term.ExitCode != 0 {
			why = append(why, fmt.Sprintf("container %s last exited %d: %s", cs.Name, term.ExitCode, strings.TrimSpace(term.Message)))
		}
	}
	return strings.Join(why, "; ")
}
