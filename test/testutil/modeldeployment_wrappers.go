package testutil

import (
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

// VersionImage adds a version with a weight and its own image.
func (w *ModelDeploymentWrapper) VersionImage(name string, weight int32, image string) *ModelDeploymentWrapper {
	w.Version(name, weight, "s3://models/"+name)
	w.Spec.Versions[len(w.Spec.Versions)-1].Image = image
	return w
}

// Storage adds a model cache PVC of the given size; retain sets storage.retainOnDelete.
func (w *ModelDeploymentWrapper) Storage(size string, retain bool) *ModelDeploymentWrapper {
	q := resource.MustParse(size)
	w.Spec.Storage = &mlv1.ModelStorageSpec{Size: &q, RetainOnDelete: ptr.To(retain)}
	return w
}

// FailureThreshold sets spec.healthCheck.failureThreshold.
func (w *ModelDeploymentWrapper) FailureThreshold(n int32) *ModelDeploymentWrapper {
	w.Spec.HealthCheck.FailureThreshold = n
	return w
}

// ProgressDeadline sets spec.rollout.progressDeadlineSeconds.
func (w *ModelDeploymentWrapper) ProgressDeadline(seconds int32) *ModelDeploymentWrapper {
	w.Spec.Rollout.ProgressDeadlineSeconds = seconds
	return w
}

// MaxErrorRate sets spec.rollout.maxErrorRate.
func (w *ModelDeploymentWrapper) MaxErrorRate(rate float64) *ModelDeploymentWrapper {
	w.Spec.Rollout.MaxErrorRate = ptr.To(rate)
	return w
}

// MaxLatencyMs sets spec.rollout.maxLatencyMs.
func (w *ModelDeploymentWrapper) MaxLatencyMs(ms int32) *ModelDeploymentWrapper {
	w.Spec.Rollout.MaxLatencyMs = ptr.To(ms)
	return w
}

// AutoRollback sets spec.rollout.autoRollback.
func (w *ModelDeploymentWrapper) AutoRollback(on bool) *ModelDeploymentWrapper {
	w.Spec.Rollout.AutoRollback = ptr.To(on)
	return w
}

// Config sets one spec.config entry.
func (w *ModelDeploymentWrapper) Config(key, value string) *ModelDeploymentWrapper {
	if w.Spec.Config == nil {
		w.Spec.Config = map[string]string{}
	}
	w.Spec.Config[key] = value
	return w
}

// Gateway sets spec.traffic.gateway and hostnames.
func (w *ModelDeploymentWrapper) Gateway(namespace, name string, hostnames ...string) *ModelDeploymentWrapper {
	w.Spec.Traffic.Gateway = &mlv1.GatewayReference{Name: name, Namespace: namespace}
	w.Spec.Traffic.Hostnames = hostnames
	return w
}

// AnalysisPreset sets spec.rollout.analysis.preset.
func (w *ModelDeploymentWrapper) AnalysisPreset(p mlv1.AnalysisPreset) *ModelDeploymentWrapper {
	if w.Spec.Rollout.Analysis == nil {
		w.Spec.Rollout.Analysis = &mlv1.AnalysisSpec{}
	}
	w.Spec.Rollout.Analysis.Preset = p
	return w
}
