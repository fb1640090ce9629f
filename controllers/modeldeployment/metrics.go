package modeldeployment

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

// The modeldeployment_* metrics, on controller-runtime's registry (served on
// the manager's /metrics).
var (
	phaseGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "modeldeployment_phase",
		Help: "1 for the ModelDeployment's current phase, 0 for the others.",
	}, []string{"namespace", "name", "phase"})
	readyReplicasGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "modeldeployment_ready_replicas",
		Help: "Ready replicas of each ModelDeployment version.",
	}, []string{"namespace", "name", "version"})
	trafficWeightGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "modeldeployment_traffic_weight",
		Help: "Effective traffic weight (percent) of each ModelDeployment version.",
	}, []string{"namespace", "name", "version"})
	rollbacksCounter = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "modeldeployment_rollbacks_total",
		Help: "Automated rollbacks of ModelDeployment versions, by reason.",
	}, []string{"namespace", "name", "version", "reason"})
)

func init() {
	metrics.Registry.MustRegister(phaseGauge, readyReplicasGauge, trafficWeightGauge, rollbacksCounter)
}

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
		phaseGauge.WithLabelValues(ns, name, string(p)).Set(v)
	}
	readyReplicasGauge.DeletePartialMatch(prometheus.Labels{"namespace": ns, "name": name})
	trafficWeightGauge.DeletePartialMatch(prometheus.Labels{"namespace": ns, "name": name})
	for _, v := range md.Status.ActiveVersions {
		readyReplicasGauge.WithLabelValues(ns, name, v.Name).Set(float64(v.HealthyReplicas))
		trafficWeightGauge.WithLabelValues(ns, name, v.Name).Set(float64(v.Weight))
	}
}

// forgetMetrics removes every series of a deleted ModelDeployment.
func forgetMetrics(namespace, name string) {
	l := prometheus.Labels{"namespace": namespace, "name": name}
	phaseGauge.DeletePartialMatch(l)
	readyReplicasGauge.DeletePartialMatch(l)
	trafficWeightGauge.DeletePartialMatch(l)
	rollbacksCounter.DeletePartialMatch(l)
}
