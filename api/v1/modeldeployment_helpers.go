package v1

// RequestedWeights returns each version's requested weight. A single version
// without a weight gets 100; otherwise an unset weight is 0.
func (s *ModelDeploymentSpec) RequestedWeights() map[string]int32 {
	w := make(map[string]int32, len(s.Versions))
	for _, v := range s.Versions {
		switch {
		case v.Weight != nil:
			w[v.Name] = *v.Weight
		case len(s.Versions) == 1:
			w[v.Name] = 100
		default:
			w[v.Name] = 0
		}
	}
	return w
}

// EffectiveMaxReplicas is scaling.maxReplicas, or max(minReplicas, 1).
func (s *ModelDeploymentSpec) EffectiveMaxReplicas() int32 {
	if s.Scaling.MaxReplicas != nil {
		return *s.Scaling.MaxReplicas
	}
	return max(s.Scaling.MinReplicas, 1)
}

// EffectiveHealthPort is healthCheck.port, or spec.port (8080 when unset).
func (s *ModelDeploymentSpec) EffectiveHealthPort() int32 {
	if s.HealthCheck.Port != nil {
		return *s.HealthCheck.Port
	}
	if s.Port == 0 {
		return 8080
	}
	return s.Port
}

// EffectiveHealthEndpoint is healthCheck.endpoint, /health when unset.
func (s *ModelDeploymentSpec) EffectiveHealthEndpoint() string {
	if s.HealthCheck.Endpoint == "" {
		return "/health"
	}
	return s.HealthCheck.Endpoint
}

// EffectiveHealthTimeoutSeconds is healthCheck.timeoutSeconds, 5 when unset.
func (s *ModelDeploymentSpec) EffectiveHealthTimeoutSeconds() int32 {
	if s.HealthCheck.TimeoutSeconds == 0 {
		return 5
	}
	return s.HealthCheck.TimeoutSeconds
}

// EffectiveTargetCPUUtilization is scaling.targetCPUUtilization, 80 when unset.
func (s *ModelDeploymentSpec) EffectiveTargetCPUUtilization() int32 {
	if s.Scaling.TargetCPUUtilization == 0 {
		return 80
	}
	return s.Scaling.TargetCPUUtilization
}

// DefaultModelCacheSize is the size of a version's model cache PVC when
// storage.size is unset.
const DefaultModelCacheSize = "10Gi"

// VersionImage is the version's image, or spec.image.
func (s *ModelDeploymentSpec) VersionImage(v ModelVersion) string {
	if v.Image != "" {
		return v.Image
	}
	return s.Image
}

// AutoRollback reports rollout.autoRollback (true when unset).
func (s *ModelDeploymentSpec) AutoRollback() bool {
	return s.Rollout.AutoRollback == nil || *s.Rollout.AutoRollback
}

// VersionResourceName is the Deployment, Service and HPA of a version: <name>-<version>.
func VersionResourceName(md, version string) string { return md + "-" + version }

// ModelDeploymentConfigMapName is the ConfigMap holding spec.config:
// <name>-model-config, distinct from a TrainingJob's <name>-config so a job
// and a deployment of the same name never claim one ConfigMap.
func ModelDeploymentConfigMapName(md string) string { return md + "-model-config" }

// ModelCacheClaimName is a version's model cache PVC: <name>-<version>-model.
func ModelCacheClaimName(md, version string) string {
	return VersionResourceName(md, version) + "-model"
}

// EffectiveIntervalSeconds is healthCheck.intervalSeconds, or 30 when unset.
func (s *ModelDeploymentSpec) EffectiveIntervalSeconds() int32 {
	if s.HealthCheck.IntervalSeconds > 0 {
		return s.HealthCheck.IntervalSeconds
	}
	return 30
}

// EffectiveFailureThreshold is healthCheck.failureThreshold, or 3 when unset.
func (s *ModelDeploymentSpec) EffectiveFailureThreshold() int32 {
	if s.HealthCheck.FailureThreshold > 0 {
		return s.HealthCheck.FailureThreshold
	}
	return 3
}

// EffectiveProgressDeadlineSeconds is rollout.progressDeadlineSeconds, or 600 when unset.
func (s *ModelDeploymentSpec) EffectiveProgressDeadlineSeconds() int32 {
	if s.Rollout.ProgressDeadlineSeconds > 0 {
		return s.Rollout.ProgressDeadlineSeconds
	}
	return 600
}

// EffectiveMaxErrorRate is rollout.maxErrorRate, or 0.05 when unset.
func (s *ModelDeploymentSpec) EffectiveMaxErrorRate() float64 {
	if s.Rollout.MaxErrorRate != nil {
		return *s.Rollout.MaxErrorRate
	}
	return 0.05
}

// EffectivePort is spec.port, or 8080 when unset.
func (s *ModelDeploymentSpec) EffectivePort() int32 {
	if s.Port == 0 {
		return 8080
	}
	return s.Port
}

// RetainStorage reports storage.retainOnDelete (true when unset): the model
// cache PVCs outlive their version and the ModelDeployment.
func (s *ModelDeploymentSpec) RetainStorage() bool {
	return s.Storage == nil || s.Storage.RetainOnDelete == nil || *s.Storage.RetainOnDelete
}

// EffectiveAnalysisPreset is rollout.analysis.preset, with auto (or unset)
// resolved by the framework.
func (s *ModelDeploymentSpec) EffectiveAnalysisPreset() AnalysisPreset {
	if a := s.Rollout.Analysis; a != nil && a.Preset != "" && a.Preset != AnalysisAuto {
		return a.Preset
	}
	return FrameworkAnalysisPreset(s.Framework)
}

// EffectiveAnalysisWindow is rollout.analysis.window, or 1m when unset.
func (s *ModelDeploymentSpec) EffectiveAnalysisWindow() string {
	if a := s.Rollout.Analysis; a != nil && a.Window != "" {
		return a.Window
	}
	return DefaultAnalysisWindow
}
