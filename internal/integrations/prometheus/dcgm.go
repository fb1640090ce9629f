package prometheus

import (
	"context"
	"fmt"
	"regexp"
)

// MetricDCGMGPUUtil is NVIDIA DCGM exporter's GPU utilization gauge, in
// percent, one series per GPU. With its Kubernetes mapping on (the GPU
// Operator's default) each series carries the namespace, pod and container
// the GPU is allocated to; scraped through a ServiceMonitor without
// honorLabels, Prometheus renames those to exported_namespace and
// exported_pod (the target's own namespace and pod take their place).
const MetricDCGMGPUUtil = "DCGM_FI_DEV_GPU_UTIL"

// TrainingJobPodRegex matches the worker pods of a TrainingJob,
// <name>-worker-<rank> (api/v1 WorkerPodName).
func TrainingJobPodRegex(job string) string {
	return regexp.QuoteMeta(job) + "-worker-[0-9]+"
}

// DCGMGPUUtilizationQuery is the average utilization of the GPUs allocated
// to the pods matching pods in namespace, under either labelling.
func DCGMGPUUtilizationQuery(namespace, pods string) string {
	return fmt.Sprintf(`avg(%s{namespace=%q,pod=~%q} or %s{exported_namespace=%q,exported_pod=~%q})`,
		MetricDCGMGPUUtil, namespace, pods, MetricDCGMGPUUtil, namespace, pods)
}

// JobGPUUtilization asks Prometheus for a TrainingJob's average GPU
// utilization from DCGM; ok is false when DCGM reports nothing for its pods
// (no exporter, or not scraped).
func (p *HTTPSource) JobGPUUtilization(ctx context.Context, namespace, job string) (float64, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, p.Timeout)
	defer cancel()
	return p.scalar(ctx, DCGMGPUUtilizationQuery(namespace, TrainingJobPodRegex(job)))
}
