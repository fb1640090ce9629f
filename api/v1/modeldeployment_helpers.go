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
