package trainingjob_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/internal/integrations/mlflow/mlflowtest"
	"github.com/ml-operator/ml-operator/test/testutil"
)

// A tracked job: the run is created when the job starts, the scraped
// progress is logged, and the run is FINISHED when the job completes.
func TestMLflowTrackedJob(t *testing.T) {
	ns := testutil.Namespace(t, env.Client)
	f := mlflowtest.NewServer(t)
	ts := newTrainerServer(t, "training_epoch 4\ntraining_loss 0.5\n")
	w := testutil.TrainingJob("tracked", ns).Workers(2).GPUs(0).Hyperparameter("epochs", 10)
	w.Spec.Metrics.Port = ts.port(t)
	w.Spec.Tracking = &mlv1.TrackingSpec{MLflow: &mlv1.MLflowSpec{TrackingURI: f.URL, ExperimentName: "bert"}}
	job := create(t, w)
	got := waitPods(t, job, 2, 0)
	e := testutil.EnvOf(&got[0])
	assert.Equal(t, f.URL, e["MLFLOW_TRACKING_URI"])
	assert.Equal(t, "bert", e["MLFLOW_EXPERIMENT_NAME"])
	assert.Equal(t, ns+"/tracked", e["MLFLOW_RUN_NAME"])

	setAll(t, job, 2, corev1.PodRunning, testutil.WithPodIP("127.0.0.1"))
	j := waitJob(t, job, "MLflow run id", func(j *mlv1.TrainingJob) bool { return j.Status.MLflowRunID != "" })
	run, ok := f.Run(j.Status.MLflowRunID)
	require.True(t, ok, "run %s exists in MLflow", j.Status.MLflowRunID)
	assert.Equal(t, ns+"/tracked", run.Name)
	assert.Equal(t, f.ExperimentID("bert"), run.ExperimentID)
	assert.Equal(t, "tracked", run.Tags["ml.example.com/trainingjob"])
	assert.Equal(t, ns, run.Tags["ml.example.com/namespace"])
	assert.Equal(t, "0", run.Tags["ml.example.com/attempt"])
	testutil.Eventually(t, func() bool {
		r, _ := f.Run(j.Status.MLflowRunID)
		return len(r.MetricValues("loss")) > 0 && len(r.MetricValues("epoch")) > 0
	}, "scraped progress logged to the run")
	run, _ = f.Run(j.Status.MLflowRunID)
	assert.Equal(t, 0.5, run.MetricValues("loss")[0])
	assert.Equal(t, 4.0, run.MetricValues("epoch")[0])
	assert.Equal(t, "True", condition(get(t, job), mlv1.TrainingJobMLflowTracking).Status)

	setAll(t, job, 2, corev1.PodSucceeded)
	waitState(t, job, mlv1.StateCompleted)
	testutil.Eventually(t, func() bool { r, _ := f.Run(j.Status.MLflowRunID); return r.Status == "FINISHED" }, "run FINISHED")
	j = waitJob(t, job, "RunEnded", func(j *mlv1.TrainingJob) bool {
		c := condition(j, mlv1.TrainingJobMLflowTracking)
		return c != nil && c.Reason == mlv1.ReasonRunEnded
	})
	assert.Contains(t, condition(j, mlv1.TrainingJobMLflowTracking).Message, "FINISHED")
}

// An MLflow outage neither blocks nor fails the job: it completes, and a
// condition says tracking failed.
func TestMLflowOutageDoesNotAffectTheJob(t *testing.T) {
	ns := testutil.Namespace(t, env.Client)
	f := mlflowtest.NewServer(t)
	f.SetDown(true)
	w := testutil.TrainingJob("untracked", ns).Workers(2).GPUs(0)
	w.Spec.Tracking = &mlv1.TrackingSpec{MLflow: &mlv1.MLflowSpec{TrackingURI: f.URL, ExperimentName: "bert"}}
	job := create(t, w)
	runGang(t, job, 2, 0)
	j := waitJob(t, job, "MLflowTracking=False", func(j *mlv1.TrainingJob) bool {
		c := condition(j, mlv1.TrainingJobMLflowTracking)
		return c != nil && c.Status == "False"
	})
	c := condition(j, mlv1.TrainingJobMLflowTracking)
	assert.Equal(t, mlv1.ReasonTrackingFailed, c.Reason)
	assert.Contains(t, c.Message, "503")
	assert.Equal(t, mlv1.StateRunning, j.Status.State)
	assert.Empty(t, j.Status.MLflowRunID)

	setAll(t, job, 2, corev1.PodSucceeded)
	j = waitState(t, job, mlv1.StateCompleted)
	assert.Equal(t, "True", condition(j, "Succeeded").Status)
	assert.Equal(t, "False", condition(j, mlv1.TrainingJobMLflowTracking).Status)
}
