package v1_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/test/testutil"
)

// These tests run against a real kube-apiserver with only the CRDs installed
// (no webhooks): the OpenAPI bounds, enums and CEL rules are the second line of
// defence and must refuse bad objects on their own.

var k8s client.Client

func TestMain(m *testing.M) {
	os.Exit(testutil.Main(m, testutil.EnvOptions{}, func(env *testutil.Env) (func(), error) {
		k8s = env.Client
		return nil, nil
	}))
}

// invalidCauses returns the full text of an Invalid error, as kubectl prints it.
func invalidCauses(t *testing.T, err error) string {
	t.Helper()
	require.Error(t, err)
	require.Truef(t, apierrors.IsInvalid(err), "want an Invalid error, got %v", err)
	t.Logf("server said: %v", err)
	return err.Error()
}

func TestTrainingJobSchemaRejects(t *testing.T) {
	ns := testutil.Namespace(t, k8s)
	long := strings.Repeat("a", 53)
	cases := []struct {
		name string
		job  *mlv1.TrainingJob
		want string // "field: message" of one cause, exactly
	}{
		{"gpus above 8", testutil.TrainingJob("gpus-high", ns).GPUs(9).Obj(),
			"spec.gpusPerWorker: Invalid value: 9: spec.gpusPerWorker in body should be less than or equal to 8"},
		{"gpus below 0", testutil.TrainingJob("gpus-low", ns).GPUs(-1).Obj(),
			"spec.gpusPerWorker: Invalid value: -1: spec.gpusPerWorker in body should be greater than or equal to 0"},
		{"workers above 100", testutil.TrainingJob("workers-high", ns).Workers(101).Obj(),
			"spec.numWorkers: Invalid value: 101: spec.numWorkers in body should be less than or equal to 100"},
		{"workers below 1", testutil.TrainingJob("workers-low", ns).Workers(-1).Obj(),
			"spec.numWorkers: Invalid value: -1: spec.numWorkers in body should be greater than or equal to 1"},
		{"unknown framework", testutil.TrainingJob("caffe", ns).Framework("caffe").Obj(),
			`spec.framework: Unsupported value: "caffe": supported values: "pytorch", "tensorflow", "xgboost", "jax"`},
		{"name too long", testutil.TrainingJob(long, ns).Obj(),
			"<nil>: Invalid value: metadata.name must be at most 52 characters so that every generated child name is a valid DNS label"},
		{"parameter servers without tensorflow", testutil.TrainingJob("ps-torch", ns).ParameterServers(2).Obj(),
			"spec.parameterServers: Invalid value: parameterServers is only supported with framework tensorflow"},
		{"s3 without uri", testutil.TrainingJob("s3-no-uri", ns).CheckpointStorage(mlv1.CheckpointStorage{Type: mlv1.StorageTypeS3}).Obj(),
			"spec.checkpoint.storage.uri: Invalid value: uri is required when type is s3 or gcs"},
		{"bad restart policy", testutil.TrainingJob("restart", ns).RestartPolicy("Always").Obj(),
			`spec.restartPolicy: Unsupported value: "Always": supported values: "OnFailure", "Never", "ExitCode"`},
		{"backoff above 10", testutil.TrainingJob("backoff", ns).BackoffLimit(11).Obj(),
			"spec.backoffLimit: Invalid value: 11: spec.backoffLimit in body should be less than or equal to 10"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := k8s.Create(context.Background(), tc.job)
			assert.Contains(t, invalidCauses(t, err), tc.want)
		})
	}
}

func TestTrainingJobSchemaImmutability(t *testing.T) {
	ctx := context.Background()
	ns := testutil.Namespace(t, k8s)
	cases := []struct {
		name   string
		mutate func(*mlv1.TrainingJob)
		want   string
	}{
		{"framework", func(j *mlv1.TrainingJob) { j.Spec.Framework = mlv1.FrameworkJAX },
			`spec.framework: Invalid value: framework is immutable`},
		{"model", func(j *mlv1.TrainingJob) { j.Spec.Model = "bert" },
			`spec.model: Invalid value: model is immutable`},
		{"dataset removed", func(j *mlv1.TrainingJob) { j.Spec.Dataset = "" },
			`spec.dataset: Invalid value: dataset is immutable`},
		{"gpuResourceName", func(j *mlv1.TrainingJob) { j.Spec.GPUResourceName = "amd.com/gpu" },
			`spec.gpuResourceName: Invalid value: gpuResourceName is immutable`},
		{"checkpoint storage", func(j *mlv1.TrainingJob) { j.Spec.Checkpoint.Storage.Size = ptr.To(resourceMustParse("20Gi")) },
			`spec.checkpoint.storage: Invalid value: checkpoint.storage is immutable`},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			job := testutil.TrainingJob(fmt.Sprintf("immutable-%d", i), ns).Model("resnet50").Dataset("imagenet").Obj()
			require.NoError(t, k8s.Create(ctx, job))
			tc.mutate(job)
			assert.Contains(t, invalidCauses(t, k8s.Update(ctx, job)), tc.want)
		})
	}
	t.Run("numWorkers stays mutable", func(t *testing.T) {
		job := testutil.TrainingJob("mutable-workers", ns).Model("resnet50").Obj()
		require.NoError(t, k8s.Create(ctx, job))
		job.Spec.NumWorkers = 4
		require.NoError(t, k8s.Update(ctx, job))
	})
}

// Without the webhooks, the CRD's transition rules (oldSelf) still refuse
// a new image, command, args or resources on a job that is running, and
// allow them on a suspended one (then resumed in a later update).
func TestTrainingJobSchemaOnlyWhileSuspended(t *testing.T) {
	ctx := context.Background()
	ns := testutil.Namespace(t, k8s)
	cpu := func(q string) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resourceMustParse(q)}}
	}
	cases := []struct {
		name   string
		mutate func(*mlv1.TrainingJob)
		field  string
	}{
		{"image", func(j *mlv1.TrainingJob) { j.Spec.Image = "example.com/trainer:2" }, "image"},
		{"image removed", func(j *mlv1.TrainingJob) { j.Spec.Image = "" }, "image"},
		{"command", func(j *mlv1.TrainingJob) { j.Spec.Command = []string{"python", "train_v2.py"} }, "command"},
		{"args", func(j *mlv1.TrainingJob) { j.Spec.Args = []string{"--lr=0.2"} }, "args"},
		{"resources", func(j *mlv1.TrainingJob) { j.Spec.Resources = cpu("4") }, "resources"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			job := testutil.TrainingJob(fmt.Sprintf("running-%d", i), ns).Image("example.com/trainer:1").
				Command("python", "train.py").Args("--lr=0.1").Resources(cpu("2")).Obj()
			require.NoError(t, k8s.Create(ctx, job))
			tc.mutate(job)
			assert.Contains(t, invalidCauses(t, k8s.Update(ctx, job)),
				"spec."+tc.field+": Invalid value: may only change while the job is suspended (spec.suspend: true)")

			suspended := testutil.TrainingJob(fmt.Sprintf("suspended-%d", i), ns).Image("example.com/trainer:1").
				Command("python", "train.py").Args("--lr=0.1").Resources(cpu("2")).Suspend(true).Obj()
			require.NoError(t, k8s.Create(ctx, suspended))
			tc.mutate(suspended)
			suspended.Spec.Suspend = ptr.To(false) // tuned and resumed in one update: the stored suspend counts
			require.NoError(t, k8s.Update(ctx, suspended))
		})
	}
}

func TestTrainingJobSchemaDefaults(t *testing.T) {
	ctx := context.Background()
	ns := testutil.Namespace(t, k8s)
	job := &mlv1.TrainingJob{ObjectMeta: metav1.ObjectMeta{Name: "defaults", Namespace: ns}}
	require.NoError(t, k8s.Create(ctx, job))
	got := &mlv1.TrainingJob{}
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(job), got))
	s := got.Spec
	assert.Equal(t, mlv1.FrameworkPyTorch, s.Framework)
	assert.Equal(t, int32(1), s.NumWorkers)
	assert.Equal(t, ptr.To[int32](1), s.GPUsPerWorker)
	assert.Equal(t, "nvidia.com/gpu", s.GPUResourceName)
	assert.Equal(t, ptr.To[int32](3), s.BackoffLimit)
	assert.Equal(t, mlv1.RestartPolicyOnFailure, s.RestartPolicy)
	assert.Equal(t, ptr.To(false), s.Suspend)
	assert.Equal(t, ptr.To(true), s.Checkpoint.Enabled)
	assert.Equal(t, int32(1), s.Checkpoint.Frequency)
	assert.Equal(t, "/checkpoints", s.Checkpoint.Path)
	assert.Equal(t, int32(3), s.Checkpoint.KeepLast)
	assert.Equal(t, ptr.To(true), s.Checkpoint.RetainOnDelete)
	assert.Equal(t, mlv1.StorageTypePVC, s.Checkpoint.Storage.Type)
	assert.Equal(t, "10Gi", s.Checkpoint.Storage.Size.String())
	assert.Equal(t, int32(29500), s.Networking.MasterPort)
	assert.Equal(t, mlv1.CleanPodPolicyRunning, s.RunPolicy.CleanPodPolicy)
	assert.Equal(t, int32(8000), s.Metrics.Port)
	assert.Equal(t, "/metrics", s.Metrics.Path)
}

func TestModelDeploymentSchemaRejects(t *testing.T) {
	ns := testutil.Namespace(t, k8s)
	md := func(name string) *testutil.ModelDeploymentWrapper { return testutil.ModelDeployment(name, ns) }
	elevenVersions := md("eleven")
	for i := range 11 {
		elevenVersions.Version(fmt.Sprintf("v%d", i), 0, "")
	}
	cases := []struct {
		name string
		md   *mlv1.ModelDeployment
		want string
	}{
		{"weights sum to 90", md("sum90").Version("a", 80, "").Version("b", 10, "").Obj(),
			`spec.versions: Invalid value: version weights must sum to 100, got 90`},
		{"weight above 100", md("w101").Version("a", 101, "").Obj(),
			"spec.versions[0].weight: Invalid value: 101: spec.versions[0].weight in body should be less than or equal to 100"},
		{"duplicate version names", md("dup").Version("a", 50, "").Version("a", 50, "").Obj(),
			`spec.versions[1]: Duplicate value: {"name":"a"}`},
		{"eleven versions", elevenVersions.Obj(),
			"spec.versions: Too many: 11: must have at most 10 items"},
		{"no versions", md("none").Obj(),
			"spec.versions: Required value"},
		{"version name not a DNS label", md("badname").Version("V_1", 100, "").Obj(),
			`spec.versions[0].name: Invalid value: "V_1": spec.versions[0].name in body should match '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'`},
		{"bad model path scheme", md("ftp").Version("a", 100, "ftp://models/a").Obj(),
			`spec.versions[0].modelPath: Invalid value: "ftp://models/a": spec.versions[0].modelPath in body should match '^(s3|pvc|https?)://.+'`},
		{"model path the storage initializer does not fetch", md("gcs").Version("a", 100, "gs://models/a").Obj(),
			`spec.versions[0].modelPath: Invalid value: "gs://models/a": spec.versions[0].modelPath in body should match '^(s3|pvc|https?)://.+'`},
		{"credentials for a mounted claim", md("pvcsecret").Version("a", 100, "pvc://models/a").ModelSecret(0, "s3-credentials").Obj(),
			`spec.versions[0].modelSecretName: Invalid value: modelSecretName needs a modelPath the storage initializer fetches (http://, https:// or s3://); a pvc:// claim is mounted, not fetched`},
		{"credentials without a model path", md("nopath").Version("a", 100, "").ModelSecret(0, "s3-credentials").Obj(),
			`spec.versions[0].modelSecretName: Invalid value: modelSecretName needs a modelPath`},
		{"credentials Secret that is no name", md("badsecret").Version("a", 100, "s3://models/a").ModelSecret(0, "S3_Creds").Obj(),
			`spec.versions[0].modelSecretName: Invalid value: "S3_Creds": spec.versions[0].modelSecretName in body should match`},
		{"min above max replicas", md("minmax").Version("a", 100, "").Replicas(5, 2).Obj(),
			`spec.scaling.minReplicas: Invalid value: minReplicas must be less than or equal to maxReplicas`},
		{"timeout not below interval", md("timeout").Version("a", 100, "").HealthCheck(10, 10).Obj(),
			`spec.healthCheck.timeoutSeconds: Invalid value: timeoutSeconds must be less than intervalSeconds`},
		{"unknown framework", md("fw").Framework("caffe").Version("a", 100, "").Obj(),
			`spec.framework: Unsupported value: "caffe": supported values: "tensorflow", "pytorch", "sklearn", "onnx", "xgboost", "custom"`},
		{"unknown router", md("router").Version("a", 100, "").Router("linkerd").Obj(),
			`spec.traffic.router: Unsupported value: "linkerd": supported values: "auto", "gatewayapi", "istio", "service"`},
		{"custom analysis without its queries", md("custom").Version("a", 100, "").AnalysisPreset(mlv1.AnalysisCustom).Obj(),
			`spec.rollout.analysis.queries: Invalid value: preset custom needs queries.requestRate and queries.errorRate or queries.latencyMs`},
		{"unknown analysis preset", md("preset").Version("a", 100, "").AnalysisPreset("seldon").Obj(),
			`spec.rollout.analysis.preset: Unsupported value: "seldon": supported values: "auto", "generic", "mlserver", "torchserve", "triton", "kserve", "custom"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := k8s.Create(context.Background(), tc.md)
			assert.Contains(t, invalidCauses(t, err), tc.want)
		})
	}
}

func TestModelDeploymentSchemaImmutabilityAndDefaults(t *testing.T) {
	ctx := context.Background()
	ns := testutil.Namespace(t, k8s)
	md := testutil.ModelDeployment("iris", ns).Version("v1", -1, "s3://models/iris").Obj()
	require.NoError(t, k8s.Create(ctx, md), "a single version without a weight is accepted")
	assert.Equal(t, int32(8080), md.Spec.Port)
	assert.Equal(t, int32(1), md.Spec.Scaling.MinReplicas)
	assert.Equal(t, int32(80), md.Spec.Scaling.TargetCPUUtilization)
	assert.Equal(t, "/health", md.Spec.HealthCheck.Endpoint)
	assert.Equal(t, int32(30), md.Spec.HealthCheck.IntervalSeconds)
	assert.Equal(t, int32(5), md.Spec.HealthCheck.TimeoutSeconds)
	assert.Equal(t, int32(3), md.Spec.HealthCheck.FailureThreshold)
	assert.Equal(t, mlv1.RouterAuto, md.Spec.Traffic.Router)
	assert.Equal(t, ptr.To(true), md.Spec.Rollout.AutoRollback)
	assert.Equal(t, ptr.To(0.05), md.Spec.Rollout.MaxErrorRate)
	assert.Equal(t, int32(600), md.Spec.Rollout.ProgressDeadlineSeconds)

	changed := md.DeepCopy()
	changed.Spec.ModelName = "other"
	changed.Spec.Framework = mlv1.ModelFrameworkONNX
	causes := invalidCauses(t, k8s.Update(ctx, changed))
	assert.Contains(t, causes, `spec.modelName: Invalid value: modelName is immutable`)
	assert.Contains(t, causes, `spec.framework: Invalid value: framework is immutable`)
}

// Every manifest our first users have must pass the schema unchanged.
func TestSeedExamplesPassSchema(t *testing.T) {
	ctx := context.Background()
	paths, err := testutil.SeedExamples()
	require.NoError(t, err)
	require.Len(t, paths, 4)
	for _, p := range paths {
		objs, err := testutil.ReadManifests(p)
		require.NoError(t, err)
		for _, u := range objs {
			require.NoError(t, testutil.EnsureNamespace(ctx, k8s, u.GetNamespace()))
			assert.NoError(t, k8s.Create(ctx, u), p)
		}
	}
}

func resourceMustParse(s string) resource.Quantity { return resource.MustParse(s) }
