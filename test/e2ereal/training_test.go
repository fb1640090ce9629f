//go:build e2e_real

package e2ereal

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/controllers/trainingjob"
	"github.com/ml-operator/ml-operator/internal/images"
	"github.com/ml-operator/ml-operator/internal/podsecurity"
	"github.com/ml-operator/ml-operator/internal/realnode"
)

// trainerImageMu makes the trainer image's first build happen once when
// the workloads ask for it side by side (compressing its 1.35 GB root
// filesystem is minutes of CPU).
var trainerImageMu sync.Mutex

// pushTrainerImage builds the trainer image (Debian's PyTorch by
// mmdebstrap, cached, plus test/torch/trainer/train.py, also at
// /app/train.py where the default launch command runs it) and pushes it
// under each of refs. Like Ubuntu-based PyTorch images it has `python`
// and `torchrun` on PATH and runs /bin/bash when no command is given, so
// the seeds' stand-ins are this same image under their names: built,
// pushed and unpacked once.
func pushTrainerImage(t *testing.T, refs ...string) {
	t.Helper()
	ctx := context.Background()
	repo, err := filepath.Abs("../..")
	require.NoError(t, err)
	trainerImageMu.Lock()
	defer trainerImageMu.Unlock()
	began := time.Now()
	rootfs, err := node.Images.Tarball(ctx, realnode.TrainerRootfs)
	require.NoError(t, err)
	t.Logf("trainer root filesystem ready in %s (%s)", time.Since(began).Round(100*time.Millisecond), rootfs)
	began = time.Now()
	for _, ref := range refs {
		require.NoError(t, node.PushImage(ctx, images.Spec{
			Ref:       ref,
			RootfsTar: rootfs,
			Files: []images.File{
				{Source: filepath.Join(repo, "test", "torch", "trainer", "train.py"), Path: "/opt/trainer/train.py", Mode: 0o644},
				// Where the operator's default launch command looks
				// for it (mlv1.DefaultTrainScript): the seed test-job
				// names no command.
				{Source: filepath.Join(repo, "test", "torch", "trainer", "train.py"), Path: mlv1.DefaultTrainScript, Mode: 0o644},
				{Source: filepath.Join(repo, "test", "e2ereal", "testdata", "python"), Path: "/usr/local/bin/python", Mode: 0o755},
				{Source: filepath.Join(repo, "test", "e2ereal", "testdata", "torchrun"), Path: "/usr/local/bin/torchrun", Mode: 0o755},
			},
			Cmd:        []string{"/bin/bash"},
			WorkingDir: "/workspace",
		}))
	}
	t.Logf("trainer image built and pushed as %v in %s", refs, time.Since(began).Round(100*time.Millisecond))
}

// checkpointVolume makes a hostPath PersistentVolume bound in advance to
// the checkpoint claim the operator creates for job name (the node has no
// dynamic provisioner) and returns its directory. It is ReadWriteOnce
// only, as block storage is: the claim of a job that names no StorageClass
// asks for no more, and the ranks share the volume on rank 0's node.
func checkpointVolume(t *testing.T, ns, name string) string {
	t.Helper()
	ctx := context.Background()
	dir := filepath.Join(node.Workdir(), "volumes", ns+"-"+name)
	require.NoError(t, os.MkdirAll(dir, 0o777))
	require.NoError(t, os.Chmod(dir, 0o777))
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			ClaimRef:                      &corev1.ObjectReference{Namespace: ns, Name: name + "-checkpoints"},
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir}},
		},
	}
	require.NoError(t, node.Client.Create(ctx, pv))
	t.Cleanup(func() { _ = node.Client.Delete(context.Background(), pv) })
	return dir
}

// kubectlGet runs the repository's kubectl against the node: what a user
// sees with `kubectl get`.
func kubectlGet(args ...string) string {
	cmd := exec.Command(filepath.Join(binDir(mustAbs("../..")), "kubectl"), append([]string{"get"}, args...)...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+node.Kubeconfig)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Sprintf("kubectl get %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func mustAbs(p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		panic(err)
	}
	return a
}

func checkpointFiles(dir string) []string {
	paths, _ := filepath.Glob(filepath.Join(dir, "epoch-*"))
	var names []string
	for _, p := range paths {
		names = append(names, filepath.Base(p))
	}
	sort.Strings(names)
	return names
}

// deployedConfig is what the operator that make deploy installs builds
// worker pods with: the manager's default pod security (HOME included), on
// a cluster that is not OpenShift.
var deployedConfig = trainingjob.Config{PodSecurity: podsecurity.NewDefaults().ForCluster(false)}

// rankEnvChecked: for each rank of the attempt, the pod's env is exactly
// what the operator's builder (trainingjob.DesiredWorkerPod) makes for the
// job as it was when the attempt was created (status.lastCheckpoint
// lastCkpt), and the trainer process on this machine (torchrun) got exactly
// that env. It returns false while a rank's pod of that attempt or its
// process is not there yet.
func rankEnvChecked(t *testing.T, job *mlv1.TrainingJob, attempt int32, lastCkpt *mlv1.CheckpointStatus) bool {
	t.Helper()
	ctx := context.Background()
	at := job.DeepCopy()
	at.Status.LastCheckpoint = lastCkpt
	procs := make([]map[string]string, job.Spec.NumWorkers)
	pods := make([]*corev1.Pod, job.Spec.NumWorkers)
	for rank := range job.Spec.NumWorkers {
		pod := &corev1.Pod{}
		if node.Client.Get(ctx, client.ObjectKey{Namespace: job.Namespace, Name: mlv1.WorkerPodName(job.Name, rank)}, pod) != nil ||
			pod.Labels[mlv1.LabelRestartAttempt] != fmt.Sprint(attempt) || pod.Status.Phase != corev1.PodRunning || pod.Status.PodIP == "" {
			return false
		}
		env, err := processEnv(pod, "/usr/bin/torchrun")
		if err != nil {
			return false
		}
		pods[rank], procs[rank] = pod, env
	}
	for rank, pod := range pods {
		want := trainingjob.DesiredWorkerPod(at, int32(rank), attempt, deployedConfig).Spec.Containers[0].Env
		require.Empty(t, cmp.Diff(want, pod.Spec.Containers[0].Env), "attempt %d rank %d: the pod's env is not the operator's (-operator +pod)", attempt, rank)
		diffs, extra := envMismatches(pod, procs[rank])
		require.Empty(t, diffs, "attempt %d rank %d: the trainer process's env differs from the pod's", attempt, rank)
		master := procs[rank][mlv1.EnvPETMasterAddr]
		require.True(t, strings.HasPrefix(master+".", mlv1.WorkerPodName(job.Name, 0)+"."+mlv1.WorkersServiceName(job.Name)+"."),
			"rank 0 is reached through the headless Service's DNS name, not an address: %s", master)
		var names []string
		for _, e := range pod.Spec.Containers[0].Env {
			names = append(names, e.Name+"="+procs[rank][e.Name])
		}
		t.Logf("attempt %d rank %d: torchrun (pid in %s) got the operator's %d variables %v, and besides only %v",
			attempt, rank, pod.Name, len(names), names, extra)
	}
	return true
}

// trainerJob is a two-rank torchrun job of the example trainer (no GPUs)
// running epochs epochs of epochSeconds each, its checkpoints on a 1Gi
// claim of no storage class (checkpointVolume binds it).
func trainerJob(ns, name string, epochs, epochSeconds int) *mlv1.TrainingJob {
	empty := ""
	size := resource.MustParse("1Gi")
	return &mlv1.TrainingJob{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: mlv1.TrainingJobSpec{
			Framework: "pytorch",
			Image:     TrainerImage,
			// Debian's torch 1.13 torchrun crashes under Python 3.11 unless
			// its output is redirected; the operator reserves every PET_*
			// variable, so these are flags.
			Command:       []string{"/usr/bin/torchrun", "--redirects=1", "--tee=1", "/opt/trainer/train.py"},
			NumWorkers:    2,
			GPUsPerWorker: ptr.To[int32](0),
			Hyperparameters: map[string]mlv1.HyperparameterValue{
				"epochs":       {Raw: []byte(strconv.Itoa(epochs))},
				"epochSeconds": {Raw: []byte(strconv.Itoa(epochSeconds))},
			},
			Checkpoint: mlv1.CheckpointSpec{
				Storage: mlv1.CheckpointStorage{StorageClassName: &empty, Size: &size},
			},
		},
	}
}

// testTwoRankPyTorchJob: a real two-rank DDP job (torchrun over the
// operator's env and headless Service, gloo) on the trainer image. Rank 0
// serves the progress gauges and the status shows the epoch while it runs;
// rank 1's pod is deleted during epoch 2; rank 0, whose collective fails,
// saves the step it reached (step-<S>, with its completion marker); the
// whole gang is restarted as attempt 1, which resumes from that step, not
// from the epoch-1 checkpoint the operator recorded (RESUME_FROM_CHECKPOINT);
// the trainer keeps the last two checkpoints on the volume; the job
// Completes.
func testTwoRankPyTorchJob(t *testing.T) {
	ctx := context.Background()
	pushTrainerImage(t, TrainerImage)
	ns := namespace(t)
	name := "ddp"
	dir := checkpointVolume(t, ns, name)

	// Epochs long enough that the operator's scrape (every 15 s) sees
	// epoch 1's checkpoint while epoch 2 runs.
	job := trainerJob(ns, name, 3, 40)
	job.Spec.Checkpoint.KeepLast = 2
	require.NoError(t, opClient.Create(ctx, job))
	began := time.Now()

	// Attempt 0: wait until the status, read through the API, shows the
	// epoch-1 checkpoint while the job runs; rank 0 is then in epoch 2.
	got := &mlv1.TrainingJob{}
	var runningProgress string
	// Pulling the 1.35 GB trainer image alone took 3 min 20 s, and 7 min
	// at a load average of 65, on the shared 2-core machine (containerd
	// unpacks it while the other workloads run).
	err := poll(14*time.Minute, func() bool {
		if opClient.Get(ctx, client.ObjectKeyFromObject(job), got) != nil {
			return false
		}
		if got.Status.State == mlv1.StateRunning && got.Status.CurrentEpoch >= 1 && runningProgress == "" {
			runningProgress = fmt.Sprintf("state %s, epoch %d/%d, progress %s", got.Status.State, got.Status.CurrentEpoch, got.Status.TotalEpochs, got.Status.Progress)
		}
		return got.Status.State == mlv1.StateFailed || got.Status.State == mlv1.StateCompleted ||
			(got.Status.State == mlv1.StateRunning && got.Status.LastCheckpoint != nil && got.Status.LastCheckpoint.Epoch >= 1)
	})
	require.NoError(t, err, "state %q, conditions %+v\n%s", got.Status.State, got.Status.Conditions, node.NamespaceDiagnostics(ctx, ns))
	require.Equal(t, mlv1.StateRunning, got.Status.State, "conditions %+v\n%s", got.Status.Conditions, node.NamespaceDiagnostics(ctx, ns))
	ckpt := *got.Status.LastCheckpoint
	t.Logf("%s: status.lastCheckpoint epoch %d path %s; status %s",
		time.Since(began).Round(100*time.Millisecond), ckpt.Epoch, ckpt.Path, runningProgress)
	// What a user sees: PROGRESS and EPOCH filled from the real rank 0.
	tj := kubectlGet("tj", "-n", ns)
	t.Logf("kubectl get tj:\n%s", tj)
	require.Regexp(t, `(?m)^NAME\s+STATE\s+PROGRESS\s+EPOCH\s+AGE$`, tj)
	require.Regexp(t, `(?m)^ddp\s+Running\s+[1-9][0-9]*%\s+[1-3]\s+\S+$`, tj, "PROGRESS and EPOCH are not filled")
	// Attempt 0's ranks run with exactly the operator's env.
	require.NoError(t, poll(time.Minute, func() bool { return rankEnvChecked(t, got, 0, nil) }),
		"attempt 0's trainer processes not found\n%s", node.NamespaceDiagnostics(ctx, ns))
	rank0, err := node.PodLog(ctx, ns, name+"-worker-0")
	require.NoError(t, err)
	require.Contains(t, rank0, "epoch 2/3 started", "rank 0 is not in epoch 2 yet:\n%s", rank0)
	require.NotContains(t, rank0, "epoch 2/3 done", "rank 0 finished epoch 2 before the kill:\n%s", rank0)

	// Kill rank 1 during epoch 2.
	victim := &corev1.Pod{}
	require.NoError(t, node.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-worker-1"}, victim))
	require.Equal(t, "0", victim.Labels[mlv1.LabelRestartAttempt])
	require.NoError(t, node.Client.Delete(ctx, victim))
	t.Logf("deleted rank 1's pod %s (attempt 0) during epoch 2", victim.Name)

	// Attempt 1 forms, resumes and completes. The status must show the
	// epoch while it runs.
	var sawAttempt1Running, attempt1EnvChecked bool
	err = poll(10*time.Minute, func() bool {
		if opClient.Get(ctx, client.ObjectKeyFromObject(job), got) != nil {
			return false
		}
		if !attempt1EnvChecked && got.Status.State == mlv1.StateRunning {
			attempt1EnvChecked = rankEnvChecked(t, got, 1, &ckpt)
		}
		if got.Status.State == mlv1.StateRunning && got.Status.Restarts+got.Status.Disruptions == 1 && got.Status.CurrentEpoch >= 2 {
			sawAttempt1Running = true
		}
		return got.Status.State == mlv1.StateCompleted || got.Status.State == mlv1.StateFailed
	})
	diag := node.NamespaceDiagnostics(ctx, ns)
	require.NoError(t, err, "state %q, conditions %+v\n%s", got.Status.State, got.Status.Conditions, diag)
	t.Logf("job %s %s after it started: restarts %d, disruptions %d, lastCheckpoint %+v, conditions:",
		got.Status.State, time.Since(began).Round(100*time.Millisecond), got.Status.Restarts, got.Status.Disruptions, got.Status.LastCheckpoint)
	for _, c := range got.Status.Conditions {
		t.Logf("  %s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message)
	}
	t.Logf("kubectl get tj:\n%s", kubectlGet("tj", "-n", ns))
	require.Equal(t, mlv1.StateCompleted, got.Status.State, "conditions %+v\n%s", got.Status.Conditions, diag)
	// A rank's pod deleted by someone else is a disruption: one gang
	// restart, not counted against backoffLimit.
	require.Equal(t, int32(1), got.Status.Disruptions, "disruptions")
	require.Zero(t, got.Status.Restarts, "restarts")
	require.True(t, sawAttempt1Running, "the status never showed attempt 1 running at epoch 2 or later")
	require.True(t, attempt1EnvChecked, "attempt 1's trainer processes were never seen running")

	// Attempt 1's rank 0 resumed from the step attempt 0 reached in epoch 2
	// (16 steps an epoch), saved when its collective failed, not from the
	// epoch-1 checkpoint the operator recorded.
	pod0 := &corev1.Pod{}
	require.NoError(t, node.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-worker-0"}, pod0))
	require.Equal(t, "1", pod0.Labels[mlv1.LabelRestartAttempt])
	rank0, err = node.PodLog(ctx, ns, pod0.Name)
	require.NoError(t, err)
	m := regexp.MustCompile(`resumed from checkpoint step-(\d+) at step (\d+) \(epoch 1, written by attempt 0\) \(/checkpoints/step-(\d+)\)`).FindStringSubmatch(rank0)
	require.NotNil(t, m, "attempt 1's rank 0 did not resume from a step of epoch 2:\n%s", rank0)
	saved, _ := strconv.Atoi(m[1])
	require.Greater(t, saved, 16, "the saved step is not in epoch 2")
	require.Less(t, saved, 32, "the saved step is not in epoch 2")
	require.Contains(t, rank0, fmt.Sprintf("epoch 2/3 started at step %d", saved), "attempt 1 did not go on mid-epoch:\n%s", rank0)
	require.NotContains(t, rank0, "epoch 1/3 started", "attempt 1 trained epoch 1 again:\n%s", rank0)
	t.Logf("attempt 0 saved step %d when rank 1 went; status.lastCheckpoint was %s (epoch %d)", saved, ckpt.Path, ckpt.Epoch)
	for _, line := range strings.Split(strings.TrimSpace(rank0), "\n") {
		if strings.Contains(line, "rank 0:") {
			t.Logf("attempt 1 rank 0 | %s", line)
		}
	}

	// Attempt 1's checkpoints reached the status through the scrape (epoch
	// 2 is 40 s and more before the end; epoch 3's is written as the job
	// ends and may not be scraped before the pods exit), and the trainer
	// kept the last two on the volume.
	require.NotNil(t, got.Status.LastCheckpoint)
	require.GreaterOrEqual(t, got.Status.LastCheckpoint.Epoch, int32(2))
	require.Equal(t, fmt.Sprintf("/checkpoints/epoch-%d", got.Status.LastCheckpoint.Epoch), got.Status.LastCheckpoint.Path)
	require.Equal(t, []string{"epoch-2", "epoch-3"}, checkpointFiles(dir), "checkpoint.keepLast 2 on the volume")
}
