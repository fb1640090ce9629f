package trainingjob_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/controllers/trainingjob"
	"github.com/ml-operator/ml-operator/internal/integrations/mlflow"
	"github.com/ml-operator/ml-operator/internal/integrations/mlflow/mlflowtest"
	"github.com/ml-operator/ml-operator/test/testutil"
)

// trackedJob creates a 2-rank job tracked in f's experiment "bert".
func trackedJob(t *testing.T, f *mlflowtest.Server, name string, suspend bool) *mlv1.TrainingJob {
	t.Helper()
	ns := testutil.Namespace(t, env.Client)
	w := testutil.TrainingJob(name, ns).Workers(2).GPUs(0).Suspend(suspend)
	w.Spec.Tracking = &mlv1.TrackingSpec{MLflow: &mlv1.MLflowSpec{TrackingURI: f.URL, ExperimentName: "bert"}}
	return create(t, w)
}

// waitGone waits until the job no longer exists.
func waitGone(t *testing.T, job *mlv1.TrainingJob, what string) {
	t.Helper()
	testutil.Eventually(t, func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(job), &mlv1.TrainingJob{}))
	}, what)
}

// A tracked job holds the MLflow finalizer while its run is open; deleting
// it before it finishes ends the run as KILLED, then the job goes. A job
// that finishes releases the finalizer once its run is ended.
func TestMLflowRunKilledWhenTrackedJobDeleted(t *testing.T) {
	f := mlflowtest.NewServer(t)
	job := trackedJob(t, f, "deleted", false)
	runGang(t, job, 2, 0)
	j := waitJob(t, job, "run id and finalizer", func(j *mlv1.TrainingJob) bool {
		return j.Status.MLflowRunID != "" && controllerutil.ContainsFinalizer(j, mlv1.MLflowRunFinalizer)
	})
	id := j.Status.MLflowRunID

	require.NoError(t, env.Client.Delete(ctx, j))
	waitGone(t, job, "deleted job gone once its run is ended")
	run, ok := f.Run(id)
	require.True(t, ok)
	assert.Equal(t, mlflow.RunKilled, run.Status)
	assert.NotZero(t, run.EndTime)
	waitEvents(t, job, "MLflowRunEnded")

	// A job that completes: run FINISHED, finalizer released.
	done := trackedJob(t, f, "done", false)
	runGang(t, done, 2, 0)
	waitJob(t, done, "run id", func(j *mlv1.TrainingJob) bool { return j.Status.MLflowRunID != "" })
	setAll(t, done, 2, corev1.PodSucceeded)
	j = waitJob(t, done, "run ended and finalizer released", func(j *mlv1.TrainingJob) bool {
		c := condition(j, mlv1.TrainingJobMLflowTracking)
		return c != nil && c.Reason == mlv1.ReasonRunEnded && !controllerutil.ContainsFinalizer(j, mlv1.MLflowRunFinalizer)
	})
	run, _ = f.Run(j.Status.MLflowRunID)
	assert.Equal(t, mlflow.RunFinished, run.Status)
}

// An MLflow outage never holds a deletion for long: after a bounded number
// of failed tries the finalizer goes, a Warning event says the run was left
// open, and the run stays as it was.
func TestMLflowOutageDoesNotHoldDeletion(t *testing.T) {
	f := mlflowtest.NewServer(t)
	job := trackedJob(t, f, "outage", false)
	runGang(t, job, 2, 0)
	j := waitJob(t, job, "run id and finalizer", func(j *mlv1.TrainingJob) bool {
		return j.Status.MLflowRunID != "" && controllerutil.ContainsFinalizer(j, mlv1.MLflowRunFinalizer)
	})
	f.SetDown(true)
	require.NoError(t, env.Client.Delete(ctx, j))
	waitGone(t, job, "deleted job gone although MLflow is down")
	ev := waitEvents(t, job, "MLflowRunNotEnded")
	assert.Contains(t, ev["MLflowRunNotEnded"], "503")
	run, _ := f.Run(j.Status.MLflowRunID)
	assert.Equal(t, "RUNNING", run.Status)
	updates := 0
	for _, c := range f.Calls() {
		if c == "POST runs/update" {
			updates++
		}
	}
	assert.Equal(t, 3, updates, "bounded tries to end the run")
}

// A run whose id never reached the status (runs/create answered, then the
// status write was lost) is found by the job's UID tag on the next pass
// instead of being created a second time.
func TestMLflowRunNotDuplicatedAfterLostStatusWrite(t *testing.T) {
	f := mlflowtest.NewServer(t)
	job := trackedJob(t, f, "lost", true)
	j := waitState(t, job, mlv1.StateSuspended)
	require.Empty(t, j.Status.MLflowRunID, "a suspended job that never started has no run")
	earlier := f.AddRun("bert", map[string]string{trainingjob.TagJobUID: string(j.UID)})

	update(t, job, func(j *mlv1.TrainingJob) { j.Spec.Suspend = ptrTo(false) })
	runGang(t, job, 2, 0)
	j = waitJob(t, job, "run id", func(j *mlv1.TrainingJob) bool { return j.Status.MLflowRunID != "" })
	assert.Equal(t, earlier, j.Status.MLflowRunID)
	assert.Equal(t, 1, f.RunCount(), "no second run")
}
