package v1

// MetricLabelJobNamespace is the label of the manager's own metrics
// (trainingjob_*, modeldeployment_*) that carries the namespace of the
// TrainingJob or ModelDeployment, next to the label "namespace" with the
// same value. Prometheus' namespace enforcement (OpenShift user-workload
// monitoring, prometheus-operator's enforcedNamespaceLabel) overwrites
// "namespace" with the scrape target's namespace, the operator's own;
// job_namespace survives it, as in Kubeflow's training operator. Alerts
// and the dashboard select and group on job_namespace.
const MetricLabelJobNamespace = "job_namespace"
