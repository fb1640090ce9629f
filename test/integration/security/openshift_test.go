package security_test

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// restrictedV2 lists what OpenShift's default SecurityContextConstraints,
// restricted-v2, would refuse in a pod the operator builds, as that SCC is
// written (OpenShift 4.11 and later): runAsUser MustRunAsRange and fsGroup
// and supplementalGroups MustRunAs, with the ranges of the namespace's
// openshift.io/sa.scc.* annotations, unknown to the operator, so any fixed
// ID may be outside them (unset, the SCC assigns one); seLinuxContext
// MustRunAs (assigned); allowPrivilegeEscalation false;
// requiredDropCapabilities ALL and only NET_BIND_SERVICE allowed; no
// privileged container, no host namespaces or ports; seccomp
// runtime/default; volumes configMap, csi, downwardAPI, emptyDir,
// ephemeral, persistentVolumeClaim, projected and secret. No OpenShift
// cluster runs here: this is checked against the SCC's text, not a cluster.
func restrictedV2(spec *corev1.PodSpec) []string {
	var bad []string
	if sc := spec.SecurityContext; sc != nil {
		if sc.RunAsUser != nil {
			bad = append(bad, fmt.Sprintf("pod runAsUser %d is fixed (MustRunAsRange)", *sc.RunAsUser))
		}
		if sc.RunAsGroup != nil {
			bad = append(bad, fmt.Sprintf("pod runAsGroup %d is fixed", *sc.RunAsGroup))
		}
		if sc.FSGroup != nil {
			bad = append(bad, fmt.Sprintf("fsGroup %d is fixed (MustRunAs)", *sc.FSGroup))
		}
		if len(sc.SupplementalGroups) > 0 {
			bad = append(bad, "supplementalGroups are fixed (MustRunAs)")
		}
		if sc.SeccompProfile != nil && sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			bad = append(bad, "pod seccomp profile is not RuntimeDefault")
		}
	}
	if spec.HostNetwork || spec.HostPID || spec.HostIPC {
		bad = append(bad, "host namespaces")
	}
	allowed := func(v corev1.Volume) bool {
		s := v.VolumeSource
		return s.ConfigMap != nil || s.CSI != nil || s.DownwardAPI != nil || s.EmptyDir != nil || s.Ephemeral != nil ||
			s.PersistentVolumeClaim != nil || s.Projected != nil || s.Secret != nil
	}
	for _, v := range spec.Volumes {
		if !allowed(v) {
			bad = append(bad, "volume "+v.Name+" is of a type restricted-v2 does not allow")
		}
	}
	for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
		sc := c.SecurityContext
		if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			bad = append(bad, "container "+c.Name+" does not set allowPrivilegeEscalation false")
			continue
		}
		if sc.Privileged != nil && *sc.Privileged {
			bad = append(bad, "container "+c.Name+" is privileged")
		}
		if sc.RunAsUser != nil {
			bad = append(bad, fmt.Sprintf("container %s runAsUser %d is fixed", c.Name, *sc.RunAsUser))
		}
		if sc.Capabilities != nil {
			for _, add := range sc.Capabilities.Add {
				if add != "NET_BIND_SERVICE" {
					bad = append(bad, "container "+c.Name+" adds capability "+string(add))
				}
			}
		}
		if sc.SeccompProfile != nil && sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			bad = append(bad, "container "+c.Name+" seccomp profile is not RuntimeDefault")
		}
		for _, p := range c.Ports {
			if p.HostPort != 0 {
				bad = append(bad, "container "+c.Name+" has a host port")
			}
		}
	}
	return bad
}
