package mlflow_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ml-operator/ml-operator/internal/integrations/mlflow"
	"github.com/ml-operator/ml-operator/internal/integrations/mlflow/mlflowtest"
)

// uidTag is the key the TrainingJob controller finds a job's run by.
const uidTag = "ml.example.com/uid"

// The REST calls against a server with MLflow's request and response
// shapes: the experiment is found or created, a second CreateRun for the
// same key returns the same run, metrics are logged and the run ended, and
// MLflow's errors (and an outage) are errors.
func TestHTTPClient(t *testing.T) {
	f := mlflowtest.NewServer(t)
	c := mlflow.NewHTTPClient()
	bg := context.Background()
	start := time.UnixMilli(1767000000000)

	key1 := mlflow.Tag{Key: uidTag, Value: "uid-1"}
	key2 := mlflow.Tag{Key: uidTag, Value: "uid-2"}
	id, err := c.CreateRun(bg, f.URL, "exp", "ns/job", key1, start, []mlflow.Tag{{Key: "k", Value: "v"}})
	require.NoError(t, err)
	id2, err := c.CreateRun(bg, f.URL+"/", "exp", "ns/job2", key2, start, nil)
	require.NoError(t, err)
	assert.NotEqual(t, id, id2)
	assert.Equal(t, []string{"GET experiments/get-by-name", "POST experiments/create", "POST runs/search", "POST runs/create",
		"GET experiments/get-by-name", "POST runs/search", "POST runs/create"}, f.Calls(), "the experiment is created once, then found")
	r, _ := f.Run(id)
	r2, _ := f.Run(id2)
	assert.Equal(t, "ns/job", r.Name)
	assert.Equal(t, r.ExperimentID, r2.ExperimentID)
	assert.Equal(t, start.UnixMilli(), r.StartTime)
	assert.Equal(t, map[string]string{"k": "v", uidTag: "uid-1"}, r.Tags)

	// Asked again for the same key (a lost reply, a lost status write), the
	// client returns the existing run and creates none.
	again, err := c.CreateRun(bg, f.URL, "exp", "ns/job", key1, start, nil)
	require.NoError(t, err)
	assert.Equal(t, id, again)
	assert.Equal(t, 2, f.RunCount())

	require.NoError(t, c.LogMetrics(bg, f.URL, id, []mlflow.Metric{{Key: "loss", Value: 0.5, Timestamp: 1, Step: 2}}))
	r, _ = f.Run(id)
	assert.Equal(t, []mlflow.Metric{{Key: "loss", Value: 0.5, Timestamp: 1, Step: 2}}, r.Metrics)
	require.NoError(t, c.EndRun(bg, f.URL, id, mlflow.RunKilled, start.Add(time.Minute)))
	r, _ = f.Run(id)
	assert.Equal(t, "KILLED", r.Status)
	assert.Equal(t, start.Add(time.Minute).UnixMilli(), r.EndTime)

	assert.ErrorContains(t, c.LogMetrics(bg, f.URL, "nope", nil), "RESOURCE_DOES_NOT_EXIST")
	f.SetDown(true)
	_, err = c.CreateRun(bg, f.URL, "exp", "ns/job3", key1, start, nil)
	assert.ErrorContains(t, err, "503")
}
