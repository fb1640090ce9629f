package prometheus_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/internal/integrations/prometheus"
	"github.com/ml-operator/ml-operator/internal/integrations/prometheus/prometheustest"
)

// loadExporterScrape appends a recorded DCGM exporter scrape (testdata/dcgm,
// the exporter's text format with its Kubernetes mapping labels) as
// Prometheus stores it: with honorLabels the exporter's namespace and pod
// labels stay; without (a ServiceMonitor's default) they become
// exported_namespace and exported_pod, and the target's own namespace and
// pod (the exporter's) are added.
func loadExporterScrape(t *testing.T, st *memStorage, file string, ts time.Time, honorLabels bool) {
	t.Helper()
	families := readScrape(t, file)
	for name, mf := range families {
		for _, m := range mf.GetMetric() {
			b := labels.NewBuilder(labels.EmptyLabels())
			b.Set(labels.MetricName, name)
			for _, lp := range m.GetLabel() {
				n := lp.GetName()
				if !honorLabels && (n == "namespace" || n == "pod" || n == "container") {
					n = "exported_" + n
				}
				b.Set(n, lp.GetValue())
			}
			if !honorLabels {
				b.Set("namespace", "gpu-operator")
				b.Set("pod", "nvidia-dcgm-exporter-7xk2p")
				b.Set("container", "nvidia-dcgm-exporter")
			}
			st.add(b.Labels(), ts.UnixMilli(), m.GetGauge().GetValue())
		}
	}
}

// The DCGM query, evaluated by Prometheus' engine over two nodes' exporter
// scrapes (one kept its labels, one was renamed by a ServiceMonitor),
// averages exactly the GPUs of the job's worker pods: not another job
// whose name starts the same, not a same-named job in another namespace,
// not a model server, not an unallocated GPU.
func TestDCGMQueryAveragesTheJobsGPUs(t *testing.T) {
	at := time.Date(2026, 11, 26, 2, 0, 0, 0, time.UTC)
	for _, honorA := range []bool{true, false} {
		st := newMemStorage()
		loadExporterScrape(t, st, filepath.Join("testdata", "dcgm", "node-a.prom"), at, honorA)
		loadExporterScrape(t, st, filepath.Join("testdata", "dcgm", "node-b.prom"), at, !honorA)
		q := prometheus.DCGMGPUUtilizationQuery("team-a", prometheus.TrainingJobPodRegex("bert"))
		got, ok := evaluate(t, st, q, at)
		require.True(t, ok, q)
		assert.InDelta(t, (80.0+90+70)/3, got, 1e-9, "node a honorLabels=%v", honorA)

		none, ok := evaluate(t, st, prometheus.DCGMGPUUtilizationQuery("team-c", prometheus.TrainingJobPodRegex("bert")), at)
		assert.False(t, ok, "no GPU of team-c's job: %v", none)
	}
	assert.Equal(t, "bert-worker-3", mlv1.WorkerPodName("bert", 3), "the pod names TrainingJobPodRegex matches")
}

// JobGPUUtilization asks Prometheus (a loopback server) exactly the DCGM
// query for the job and reads its answer; no data is not an error.
func TestJobGPUUtilizationAsksTheDCGMQuery(t *testing.T) {
	want := prometheus.DCGMGPUUtilizationQuery("team-a", `my\.job-worker-[0-9]+`)
	answer := true
	srv := prometheustest.NewServer(t, func(q string) (float64, bool) {
		assert.Equal(t, want, q)
		return 62.5, answer
	})
	src, err := prometheus.NewHTTPSource(srv.URL, nil)
	require.NoError(t, err)
	v, ok, err := src.JobGPUUtilization(context.Background(), "team-a", "my.job")
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, 62.5, v)

	answer = false
	_, ok, err = src.JobGPUUtilization(context.Background(), "team-a", "my.job")
	require.NoError(t, err)
	assert.False(t, ok)
}
