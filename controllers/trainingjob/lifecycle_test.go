package trainingjob_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	mlv1alpha1 "github.com/ml-operator/ml-operator/api/v1alpha1"
	"github.com/ml-operator/ml-operator/test/testutil"
)

func ownedBy(t *testing.T, obj metav1.Object, job *mlv1.TrainingJob) {
	t.Helper()
	require.Len(t, obj.GetOwnerReferences(), 1, "%s owner references", obj.GetName())
	ref := obj.GetOwnerReferences()[0]
	assert.Equal(t, job.UID, ref.UID, "%s owner", obj.GetName())
	assert.True(t, ref.Controller != nil && *ref.Controller, "%s controller ref", obj.GetName())
	assert.Equal(t, job.Name, obj.GetLabels()[mlv1.LabelTrainingJob], "%s job label", obj.GetName())
	assert.Equal(t, mlv1.ManagedByValue, obj.GetLabels()[mlv1.LabelManagedBy], "%s managed-by label", obj.GetName())
}

// A 4-rank GPU job goes Pending -> Initializing -> Running -> Completed with
// its children, status fields, conditions and events.
func TestGPUJobLifecycle(t *testing.T) {
	ns := testutil.Namespace(t, env.Client)
	for _, n := range []string{"gpu-a", "gpu-b"} {
		if _, err := testutil.ReadyNode(ctx, env.Client, ns+"-"+n, gpuNS); err != nil {
			t.Fatal(err)
		}
	}
	states := watchStates(t, ns, "llm")
	job := create(t, testutil.TrainingJob("llm", ns).Workers(4).GPUs(2).Hyperparameter("epochs", 5).
		Model("llama").Dataset("c4"))

	// Children.
	got := waitPods(t, job, 4, 0)
	job = get(t, job)
	for i, p := range got {
		rank := int32(i)
		assert.Equal(t, mlv1.WorkerPodName("llm", rank), p.Name)
		ownedBy(t, &p, job)
		assert.Equal(t, fmt.Sprint(rank), p.Labels[mlv1.LabelRank])
		assert.Equal(t, p.Name, p.Spec.Hostname)
		assert.Equal(t, "llm-workers", p.Spec.Subdomain)
		assert.Equal(t, corev1.RestartPolicyNever, p.Spec.RestartPolicy)
		assert.Equal(t, "2", p.Spec.Containers[0].Resources.Limits.Name("nvidia.com/gpu", "").String())
		assert.Equal(t, gpuNS, p.Spec.NodeSelector)
		e := testutil.EnvOf(&p)
		assert.Equal(t, "8", e["WORLD_SIZE"])
		assert.Equal(t, "llm-worker-0.llm-workers."+ns+".svc", e["MASTER_ADDR"])
		assert.Equal(t, fmt.Sprint(rank), e["RANK"])
	}
	svc := &corev1.Service{}
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "llm-workers"}, svc))
	ownedBy(t, svc, job)
	assert.Equal(t, "None", svc.Spec.ClusterIP)
	assert.True(t, svc.Spec.PublishNotReadyAddresses)
	cm := &corev1.ConfigMap{}
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "llm-config"}, cm))
	ownedBy(t, cm, job)
	assert.JSONEq(t, `{"epochs":5}`, cm.Data["hyperparameters.json"])
	assert.Equal(t, "llama", cm.Data["model"])
	pvc := &corev1.PersistentVolumeClaim{}
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "llm-checkpoints"}, pvc))
	assert.Empty(t, pvc.OwnerReferences, "retained by default")
	assert.Equal(t, "llm", pvc.Labels[mlv1.LabelTrainingJob])
	// envtest has no StorageClass: a claim nobody can share, so ranks 1..3
	// run on rank 0's node (TestCheckpointClaimFollowsItsStorageClass).
	assert.Equal(t, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, pvc.Spec.AccessModes)

	j := waitState(t, job, mlv1.StateInitializing)
	assert.Equal(t, mlv1.WorkerCounts{Pending: 4}, j.Status.Workers)
	require.NotNil(t, j.Status.StartTime)
	assert.Equal(t, "True", condition(j, "Created").Status)
	assert.Equal(t, "WorkersPending", condition(j, "Running").Reason)

	// Idempotent: another pass creates nothing and rewrites nothing.
	before := map[string]string{}
	for _, p := range pods(t, job) {
		before[p.Name] = p.ResourceVersion
	}
	passes, statusWrites := reconcilePasses(t), writes.get(job, "update status")
	poke(t, job)
	testutil.Eventually(t, func() bool { return reconcilePasses(t) > passes }, "a pass after the poke")
	assert.Equal(t, statusWrites, writes.get(job, "update status"), "a pass with nothing new wrote the status")
	after := pods(t, job)
	require.Len(t, after, 4)
	for _, p := range after {
		assert.Equal(t, before[p.Name], p.ResourceVersion, "pod %s rewritten", p.Name)
	}

	// The scheduler binds two ranks per node and the kubelet runs them.
	for r := int32(0); r < 4; r++ {
		require.NoError(t, testutil.BindPod(ctx, env.Client, ns, mlv1.WorkerPodName("llm", r), fmt.Sprintf("%s-gpu-%c", ns, 'a'+r/2)))
	}
	setAll(t, job, 4, corev1.PodRunning, testutil.WithPodCondition(corev1.PodReady, ""))
	j = waitState(t, job, mlv1.StateRunning)
	assert.Equal(t, mlv1.WorkerCounts{Active: 4}, j.Status.Workers)
	assert.Equal(t, int32(8), j.Status.AllocatedGPUs)
	assert.Equal(t, int32(2), j.Status.AllocatedNodes)
	require.Len(t, j.Status.WorkerStatuses, 4)
	for i, ws := range j.Status.WorkerStatuses {
		assert.Equal(t, mlv1.WorkerStatus{Rank: int32(i), PodName: mlv1.WorkerPodName("llm", int32(i)),
			Phase: corev1.PodRunning, Node: fmt.Sprintf("%s-gpu-%c", ns, 'a'+i/2)}, ws)
	}
	assert.Equal(t, "True", condition(j, "Running").Status)
	assert.Equal(t, int32(5), j.Status.TotalEpochs)

	setAll(t, job, 4, corev1.PodSucceeded, testutil.WithExitCode("trainer", 0, "Completed"))
	j = waitState(t, job, mlv1.StateCompleted)
	require.NotNil(t, j.Status.CompletionTime)
	assert.Equal(t, j.Generation, j.Status.ObservedGeneration)
	assert.Equal(t, mlv1.WorkerCounts{Succeeded: 4}, j.Status.Workers)
	assert.Equal(t, int32(0), j.Status.AllocatedGPUs, "finished pods hold no GPUs")
	assert.Equal(t, "100%", j.Status.Progress)
	assert.Equal(t, "True", condition(j, "Succeeded").Status)
	assert.Equal(t, "AllWorkersSucceeded", condition(j, "Succeeded").Reason)
	assert.Equal(t, "JobFinished", condition(j, "Running").Reason)
	assert.Nil(t, condition(j, "Failed"))
	assert.Equal(t, "Pending", mlv1.StatePending.V1Alpha1Phase())
	assert.Equal(t, "Succeeded", j.Status.State.V1Alpha1Phase())
	waitEvents(t, job, "Created", "WorkersCreated", "Running", "Completed")
	testutil.Eventually(t, func() bool {
		seen := states()
		return len(seen) > 0 && seen[len(seen)-1] == mlv1.StateCompleted
	}, "watch saw Completed")
	assert.Equal(t, []mlv1.TrainingJobState{mlv1.StatePending, mlv1.StateInitializing, mlv1.StateRunning, mlv1.StateCompleted},
		states(), "every state the API server stored, in order")
	// Each child was created exactly once: no retries on a lagging cache.
	assert.Equal(t, 4, writes.get(job, "create *v1.Pod"))
	assert.Equal(t, 1, writes.get(job, "create *v1.Service"))
	assert.Equal(t, 1, writes.get(job, "create *v1.ConfigMap"))
	assert.Equal(t, 1, writes.get(job, "create *v1.PersistentVolumeClaim"))
	// cleanPodPolicy Running: succeeded pods stay for their logs.
	assert.Len(t, pods(t, job), 4)
}

// With restartPolicy Never, one failed rank fails the job.
func TestFailedRankWithRestartPolicyNever(t *testing.T) {
	ns := testutil.Namespace(t, env.Client)
	job := create(t, testutil.TrainingJob("never", ns).Workers(2).GPUs(0).RestartPolicy(mlv1.RestartPolicyNever))
	waitPods(t, job, 2, 0)
	setAll(t, job, 2, corev1.PodRunning)
	waitState(t, job, mlv1.StateRunning)
	setPhase(t, job, 1, corev1.PodFailed, testutil.WithExitCode("trainer", 3, "Error"))
	j := waitState(t, job, mlv1.StateFailed)
	c := condition(j, "Failed")
	require.NotNil(t, c)
	assert.Equal(t, "RestartPolicyNever", c.Reason)
	assert.Contains(t, c.Message, "rank 1")
	assert.Contains(t, c.Message, "exit code 3")
	assert.Equal(t, int32(0), j.Status.Restarts)
	require.NotNil(t, j.Status.CompletionTime)
	// cleanPodPolicy Running: the still-running rank 0 is deleted, the failed rank kept.
	testutil.Eventually(t, func() bool {
		ps := pods(t, job)
		return len(ps) == 1 && ps[0].Name == "never-worker-1"
	}, "running rank deleted")
	ev := waitEvents(t, job, "Failed")
	assert.Contains(t, ev["Failed"], "RestartPolicyNever")
}

// A TensorFlow job with a parameter server: workers and ps pods listed in
// TF_CONFIG exist; the job completes when the workers do, and the still
// running ps is deleted even under cleanPodPolicy None, which keeps the
// finished workers.
func TestTensorFlowParameterServers(t *testing.T) {
	ns := testutil.Namespace(t, env.Client)
	job := create(t, testutil.TrainingJob("tfps", ns).Framework(mlv1.FrameworkTensorFlow).Workers(2).GPUs(0).ParameterServers(1).
		CleanPodPolicy(mlv1.CleanPodPolicyNone))
	testutil.Eventually(t, func() bool { return len(pods(t, job)) == 3 }, "2 workers and 1 ps")
	ps := &corev1.Pod{}
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "tfps-ps-0"}, ps))
	ownedBy(t, ps, get(t, job))
	assert.Equal(t, "ps", ps.Labels[mlv1.LabelReplicaType])
	assert.Contains(t, testutil.EnvOf(ps)["TF_CONFIG"], `"task":{"type":"ps","index":0}`)
	require.NoError(t, testutil.SetPodPhase(ctx, env.Client, ns, "tfps-ps-0", corev1.PodRunning))
	setAll(t, job, 2, corev1.PodRunning)
	j := waitState(t, job, mlv1.StateRunning)
	assert.Equal(t, mlv1.WorkerCounts{Active: 2}, j.Status.Workers, "workers only")
	setAll(t, job, 2, corev1.PodSucceeded)
	waitState(t, job, mlv1.StateCompleted)
	testutil.Eventually(t, func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "tfps-ps-0"}, &corev1.Pod{}))
	}, "running ps deleted although cleanPodPolicy is None")
	assert.Len(t, pods(t, job), 2, "cleanPodPolicy None keeps the finished workers")
}

// suspend deletes the pods and keeps the rest; resume recreates the gang.
func TestSuspendResume(t *testing.T) {
	ns := testutil.Namespace(t, env.Client)
	job := create(t, testutil.TrainingJob("susp", ns).Workers(2).GPUs(0))
	waitPods(t, job, 2, 0)
	setAll(t, job, 2, corev1.PodRunning)
	waitState(t, job, mlv1.StateRunning)

	update(t, job, func(j *mlv1.TrainingJob) { j.Spec.Suspend = ptrTo(true) })
	j := waitState(t, job, mlv1.StateSuspended)
	waitPods(t, job, 0, 0)
	assert.Equal(t, "True", condition(j, "Suspended").Status)
	assert.Equal(t, "Suspended", condition(j, "Running").Reason)
	for _, obj := range []client.Object{&corev1.Service{}, &corev1.ConfigMap{}, &corev1.PersistentVolumeClaim{}} {
		name := map[string]string{"*v1.Service": "susp-workers", "*v1.ConfigMap": "susp-config", "*v1.PersistentVolumeClaim": "susp-checkpoints"}[fmt.Sprintf("%T", obj)]
		require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj), "%s kept while suspended", name)
	}

	update(t, job, func(j *mlv1.TrainingJob) { j.Spec.Suspend = ptrTo(false) })
	waitPods(t, job, 2, 0)
	j = waitState(t, job, mlv1.StateInitializing)
	assert.Equal(t, "False", condition(j, "Suspended").Status)
	assert.Equal(t, "Resumed", condition(j, "Suspended").Reason)
	setAll(t, job, 2, corev1.PodRunning)
	waitState(t, job, mlv1.StateRunning)
	waitEvents(t, job, "Suspended", "Resumed")
}

// existingClaim and object storage create no PVC; the claim is mounted.
func TestCheckpointStorageVariants(t *testing.T) {
	ns := testutil.Namespace(t, env.Client)
	mine := create(t, testutil.TrainingJob("mine", ns).GPUs(0).CheckpointStorage(mlv1.CheckpointStorage{ExistingClaim: "team-ckpt"}))
	s3 := create(t, testutil.TrainingJob("objs", ns).GPUs(0).CheckpointStorage(mlv1.CheckpointStorage{Type: "s3", URI: "s3://b/x"}))
	p := waitPods(t, mine, 1, 0)[0]
	assert.Equal(t, "team-ckpt", p.Spec.Volumes[0].PersistentVolumeClaim.ClaimName)
	p = waitPods(t, s3, 1, 0)[0]
	assert.Equal(t, "s3://b/x", testutil.EnvOf(&p)["CHECKPOINT_URI"])
	var pvcs corev1.PersistentVolumeClaimList
	require.NoError(t, env.Client.List(ctx, &pvcs, client.InNamespace(ns)))
	assert.Empty(t, pvcs.Items)
	for _, j := range []*mlv1.TrainingJob{mine, s3} {
		assert.Empty(t, waitState(t, j, mlv1.StateInitializing).Finalizers, "no finalizer without an own PVC")
	}
}

// activeDeadlineSeconds fails the job on the injected clock and
// cleanPodPolicy All removes every pod; ttlSecondsAfterFinished then deletes it.
func TestDeadlineCleanupAndTTL(t *testing.T) {
	ns := testutil.Namespace(t, env.Client)
	job := create(t, testutil.TrainingJob("late", ns).Workers(2).GPUs(0).RetainCheckpoints(false).
		ActiveDeadlineSeconds(600).CleanPodPolicy(mlv1.CleanPodPolicyAll).TTLSecondsAfterFinished(3600))
	waitPods(t, job, 2, 0)
	setPhase(t, job, 0, corev1.PodSucceeded)
	setPhase(t, job, 1, corev1.PodRunning)
	waitJob(t, job, "observed", func(j *mlv1.TrainingJob) bool { return j.Status.Workers.Active == 1 })

	waitState(t, job, mlv1.StateRunning)

	step(t, job, 601*time.Second)
	j := waitState(t, job, mlv1.StateFailed)
	assert.Equal(t, "DeadlineExceeded", condition(j, "Failed").Reason)
	assert.Contains(t, condition(j, "Failed").Message, "activeDeadlineSeconds")
	waitPods(t, job, 0, 0)

	step(t, job, 3599*time.Second)
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(job), &mlv1.TrainingJob{}), "deleted before its TTL")
	clk.Step(2 * time.Second)
	// A pass already under way may see the new time and delete the job
	// before the poke: both are fine.
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		j := &mlv1.TrainingJob{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(job), j); err != nil {
			return client.IgnoreNotFound(err)
		}
		j.Annotations = map[string]string{"test.ml.example.com/poke": "ttl"}
		return client.IgnoreNotFound(env.Client.Update(ctx, j))
	}))
	testutil.Eventually(t, func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(job), &mlv1.TrainingJob{}))
	}, "deleted after its TTL")
}

// A job with no image and no default image for its framework fails with InvalidSpec.
func TestNoImageIsInvalidSpec(t *testing.T) {
	ns := testutil.Namespace(t, env.Client)
	job := create(t, testutil.TrainingJob("noimg", ns).Framework(mlv1.FrameworkJAX).Image("").GPUs(0))
	j := waitState(t, job, mlv1.StateFailed)
	assert.Equal(t, "InvalidSpec", condition(j, "Failed").Reason)
	assert.Contains(t, condition(j, "Failed").Message, "spec.image")
	assert.Empty(t, pods(t, job))

	// The same job for pytorch gets the admin's default image.
	def := create(t, testutil.TrainingJob("defimg", ns).Image("").GPUs(0))
	p := waitPods(t, def, 1, 0)[0]
	assert.Equal(t, "registry.example.com/pytorch:default", p.Spec.Containers[0].Image)
}

// Every v1 TrainingJob seed example creates the pods its comments promise.
func TestSeedExamplesCreatePods(t *testing.T) {
	paths, err := testutil.SeedExamples()
	require.NoError(t, err)
	tested := 0
	for _, path := range paths {
		objs, err := testutil.ReadManifests(path)
		require.NoError(t, err)
		for _, u := range objs {
			if u.GetKind() != "TrainingJob" {
				continue
			}
			t.Run(u.GetAPIVersion()+"/"+u.GetName(), func(t *testing.T) {
				ns := testutil.Namespace(t, env.Client)
				job := &mlv1.TrainingJob{}
				switch u.GetAPIVersion() {
				case mlv1.GroupVersion.String():
					require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, job))
				case mlv1alpha1.GroupVersion.String():
					// The conversion webhook's own code: this suite serves no
					// webhooks (webhooks/ has the end-to-end conversion tests).
					old := &mlv1alpha1.TrainingJob{}
					require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, old))
					require.NoError(t, old.ConvertTo(job))
					assert.Equal(t, old.Spec.Workers, job.Spec.NumWorkers)
					assert.Equal(t, old.Spec.GPUPerWorker, job.Spec.EffectiveGPUs())
				default:
					t.Fatalf("unknown version %s", u.GetAPIVersion())
				}
				job.Namespace = ns
				job.ResourceVersion = ""
				require.NoError(t, env.Client.Create(ctx, job))
				want := int(job.Spec.EffectiveNumWorkers())
				got := waitPods(t, job, want, 0)
				for i, p := range got {
					e := testutil.EnvOf(&p)
					assert.Equal(t, fmt.Sprint(want*int(job.Spec.EffectiveNProcPerNode())), e["WORLD_SIZE"])
					assert.Equal(t, fmt.Sprint(i), e["RANK"])
					if job.Spec.Model != "" {
						assert.Equal(t, job.Spec.Model, e["MODEL"])
					}
					for k := range job.Spec.Hyperparameters {
						assert.Contains(t, e, "HYPERPARAM_"+strings.ToUpper(k))
					}
					c := p.Spec.Containers[0]
					wantCommand := job.Spec.Command
					if len(job.Spec.Command) == 0 && len(job.Spec.Args) == 0 {
						// Seed 000 names no command: the framework's default
						// launch command runs.
						wantCommand = mlv1.DefaultLaunchTemplates()[job.Spec.EffectiveFramework()].Expand(&job.Spec)
						assert.Equal(t, []string{"torchrun", mlv1.DefaultTrainScript, "--model=" + job.Spec.Model}, c.Command[:3])
					}
					assert.Equal(t, wantCommand, c.Command)
					assert.Equal(t, job.Spec.Args, c.Args)
					gpus := c.Resources.Limits.Name("nvidia.com/gpu", "0").Value()
					assert.Equal(t, int64(job.Spec.EffectiveGPUs()), gpus)
					assert.Equal(t, job.Spec.EffectiveCheckpointPath(), e["CHECKPOINT_DIR"])
					if dv := job.Spec.DataVolume; dv != nil {
						assert.Contains(t, c.VolumeMounts, corev1.VolumeMount{Name: "data", MountPath: "/data"})
					}
				}
				tested++
			})
		}
	}
	require.Equal(t, 3, tested, "TrainingJob seed examples (one v1, two v1alpha1)")
}

func ptrTo[T any](v T) *T { return &v }
