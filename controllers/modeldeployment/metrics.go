package modeldeployment

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

// The modeldeployment_* metrics, on controller-runtime's registry (served on
// the manager's /metrics).
var (
	phaseGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "modeldeployment_phase",
		Help: "1 for the ModelDeployment's current phase, 0 for the others.",
	}, []string{"namespace", mlv1.MetricLabelJobNamespace, "name", "phase"})
	readyReplicasGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "modeldeployment_ready_replicas",
		Help: "Ready replicas of each ModelDeployment version.",
	}, []string{"namespace", mlv1.MetricLabelJobNamespace, "name", "version"})
	trafficWeightGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "modeldeployment_traffic_weight",
		Help: "Effective traffic weight (percent) of each ModelDeployment version.",
	}, []string{"namespace", mlv1.MetricLabelJobNamespace, "name", "version"})
	rollbacksCounter = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "modeldeployment_rollbacks_total",
		Help: "Automated rollbacks of ModelDeployment versions, by reason.",
	}, []string{"namespace", mlv1.MetricLabelJobNamespace, "name", "version", "reason"})
)

func init() {
	metrics.Registry.MustRegister(phaseGauge, readyReplicasGauge, trafficWeightGauge, rollbacksCounter)
}

// seriesVersions remembers which versions have series, per ModelDeployment.
var (
	seriesMu       sync.Mutex
	seriesVersions = map[types.NamespacedName]map[string]bool{}
)

var allPhases = []mlv1.ModelDeploymentPhase{mlv1.PhasePending, mlv1.PhaseRunning, mlv1.PhaseDegraded, mlv1.PhaseFailed}

// recordMetrics publishes md's phase and per-version series; series of
// versions no longer in status are removed.
func recordMetrics(md *mlv1.ModelDeployment) {
	ns, name := md.Namespace, md.Name
	for _, p := range allPhases {
		v := 0.0
		if md.Status.Phase == p {
			v = 1
		}
		phaseGauge.WithLabelValues(ns, ns, name, string(p)).Set(v)
	}
	current := map[string]bool{}
	for _, v := range md.Status.ActiveVersions {
		current[v.Name] = true
	}
	key := types.NamespacedName{Namespace: ns, Name: name}
	seriesMu.Lock()
	previous := seriesVersions[key]
	seriesVersions[key] = current
	seriesMu.Unlock()
	// Only the series of versions that are gone are deleted, so a scrape
	// never sees a live version's series missing.
	for v := range previous {
		if !current[v] {
			readyReplicasGauge.DeleteLabelValues(ns, ns, name, v)
			trafficWeightGauge.DeleteLabelValues(ns, ns, name, v)
		}
	}
	for _, v := range md.Status.ActiveVersions {
		readyReplicasGauge.WithLabelValues(ns, ns, name, v.Name).Set(float64(v.HealthyReplicas))
		trafficWeightGauge.WithLabelValues(ns, ns, name, v.Name).Set(float64(v.Weight))
	}
}

// forgetMetrics removes every series of a deleted ModelDeployment.
func forgetMetrics(namespace, name string) {
	seriesMu.Lock()
	delete(seriesVersions, types.NamespacedName{Namespace: namespace, Name: name})
	seriesMu.Unlock()
	l := prometheus.Labels{"namespace": namespace, "name": name}
	phaseGauge.DeletePartialMatch(l)
	readyReplicasGauge.DeletePartialMatch(l)
	trafficWeightGauge.DeletePartialMatch(l)
	rollbacksCounter.DeletePartialMatch(l)
}
