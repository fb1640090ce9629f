package trainingjob_test

import (
	"encoding/json"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/internal/integrations/mlflow/mlflowtest"
	"github.com/ml-operator/ml-operator/test/testutil"
)

// sampleJob reads config/samples/<file>, a single TrainingJob, into ns; an
// unknown field fails the test.
func sampleJob(t *testing.T, file, ns string) *mlv1.TrainingJob {
	t.Helper()
	objs, err := testutil.ReadManifests(filepath.Join("..", "..", "config", "samples", file))
	require.NoError(t, err, file)
	require.Len(t, objs, 1, file)
	job := &mlv1.TrainingJob{}
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(objs[0].Object, job, true), file)
	job.Namespace = ns
	return job
}

// Each integration page's sample (docs/integrations/*.md), created as it is
// written, makes the operator do what the page says. Only the MLflow
// tracking URI, which is site-specific, is pointed at the test's server.
// (This file sorts after podgroup_test.go on purpose: it installs the
// Volcano CRD, and TestGangSchedulerPodGroups first checks the case
// without it.)
func TestIntegrationSamplesRun(t *testing.T) {
	t.Run("kueue", func(t *testing.T) {
		ns := testutil.Namespace(t, env.Client)
		job := sampleJob(t, "ml_v1_trainingjob_kueue.yaml", ns)
		require.False(t, job.Spec.IsSuspended(), "Kueue's plain-pod integration never resumes a suspended TrainingJob")
		require.NoError(t, env.Client.Create(ctx, job))
		// The gang is created at once; Kueue's pod webhook (absent here)
		// gates the pods until it admits the group.
		for _, p := range waitPods(t, job, 4, 0) {
			assert.Equal(t, "team-a", p.Labels["kueue.x-k8s.io/queue-name"], p.Name)
			assert.Equal(t, "llm-queued-0", p.Labels["kueue.x-k8s.io/pod-group-name"], p.Name)
			assert.Equal(t, "4", p.Annotations["kueue.x-k8s.io/pod-group-total-count"], p.Name)
		}
	})

	t.Run("volcano", func(t *testing.T) {
		ns := testutil.Namespace(t, env.Client)
		_, err := envtest.InstallCRDs(env.Config, envtest.CRDInstallOptions{ErrorIfPathMissing: true,
			Paths: []string{filepath.Join("..", "..", "test", "testdata", "crds", "podgroups.scheduling.volcano.sh.yaml")}})
		require.NoError(t, err)
		job := sampleJob(t, "ml_v1_trainingjob_volcano.yaml", ns)
		require.NoError(t, env.Client.Create(ctx, job))
		got := waitPods(t, job, 4, 0)
		pg, err := podGroup(t, volcanoPG, ns, "resnet-volcano-0")
		require.NoError(t, err)
		for _, p := range got {
			assert.Equal(t, "resnet-volcano-0", p.Annotations["scheduling.k8s.io/group-name"], p.Name)
			assert.Equal(t, "volcano", p.Spec.SchedulerName, p.Name)
			// Created before the pods: envtest has one etcd, whose revision
			// (the resourceVersion of a newly created object) only grows.
			assert.Less(t, revision(t, pg.GetResourceVersion()), revision(t, p.ResourceVersion), "PodGroup created after pod %s", p.Name)
		}
		minMember, _, _ := unstructured.NestedInt64(pg.Object, "spec", "minMember")
		assert.EqualValues(t, 4, minMember)
		minRes, _, _ := unstructured.NestedStringMap(pg.Object, "spec", "minResources")
		assert.Equal(t, "4", minRes["nvidia.com/gpu"])
	})

	t.Run("mlflow", func(t *testing.T) {
		ns := testutil.Namespace(t, env.Client)
		f := mlflowtest.NewServer(t)
		job := sampleJob(t, "ml_v1_trainingjob_mlflow.yaml", ns)
		require.Equal(t, "http://mlflow.mlflow.svc:5000", job.Spec.Tracking.MLflow.TrackingURI)
		job.Spec.Tracking.MLflow.TrackingURI = f.URL
		require.NoError(t, env.Client.Create(ctx, job))
		got := waitPods(t, job, 2, 0)
		assert.Equal(t, "bert-finetune", testutil.EnvOf(&got[0])["MLFLOW_EXPERIMENT_NAME"])
		setAll(t, job, 2, corev1.PodRunning)
		j := waitJob(t, job, "MLflow run id", func(j *mlv1.TrainingJob) bool { return j.Status.MLflowRunID != "" })
		run, ok := f.Run(j.Status.MLflowRunID)
		require.True(t, ok)
		assert.Equal(t, ns+"/bert-mlflow", run.Name)
		assert.Equal(t, f.ExperimentID("bert-finetune"), run.ExperimentID)
	})

	t.Run("tensorflow-ps", func(t *testing.T) {
		ns := testutil.Namespace(t, env.Client)
		job := sampleJob(t, "ml_v1_trainingjob_tensorflow_ps.yaml", ns)
		require.NoError(t, env.Client.Create(ctx, job))
		tasks := map[string]string{}
		for _, p := range waitPods(t, job, 4, 0) {
			var cfg TFConfigShape
			require.NoError(t, json.Unmarshal([]byte(testutil.EnvOf(&p)["TF_CONFIG"]), &cfg), p.Name)
			tasks[p.Name] = cfg.Task.Type
			assert.Len(t, cfg.Cluster["ps"], 2, p.Name)
		}
		assert.Equal(t, map[string]string{"wide-deep-ps-worker-0": "chief", "wide-deep-ps-worker-1": "worker",
			"wide-deep-ps-ps-0": "ps", "wide-deep-ps-ps-1": "ps"}, tasks)
	})
}

// revision reads a resourceVersion as the etcd revision it is in envtest.
func revision(t *testing.T, rv string) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(rv, 10, 64)
	require.NoError(t, err, "resourceVersion %q", rv)
	return n
}

// TFConfigShape is TF_CONFIG as TensorFlow documents it.
type TFConfigShape struct {
	Cluster map[string][]string `json:"cluster"`
	Task    struct {
		Type  string `json:"type"`
		Index int    `json:"index"`
	} `json:"task"`
}
