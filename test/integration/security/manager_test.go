package security_test

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
)

// The manager pod, as every install path creates it, passes the Pod Security
// Standard "restricted" (evaluated with the Pod Security Admission library)
// and has the hardening that level leaves optional: seccomp RuntimeDefault
// (restricted also accepts Localhost), a read-only root filesystem, no host
// namespaces, every capability dropped.
func TestManagerPodIsRestrictedInEveryInstall(t *testing.T) {
	for _, mp := range managerPods(t) {
		t.Run(mp.source, func(t *testing.T) {
			spec := &mp.template.Spec
			agg := restricted(t, &mp.template.ObjectMeta, spec)
			assert.Truef(t, agg.Allowed, "the manager pod violates Pod Security restricted: %s", agg.ForbiddenDetail())

			psc := spec.SecurityContext
			if assert.NotNil(t, psc, "no pod securityContext") {
				if assert.NotNil(t, psc.SeccompProfile, "no pod seccompProfile") {
					assert.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, psc.SeccompProfile.Type)
				}
				assert.True(t, psc.RunAsNonRoot != nil && *psc.RunAsNonRoot, "pod runAsNonRoot is not true")
				assert.False(t, psc.RunAsUser != nil && *psc.RunAsUser == 0, "pod runs as uid 0")
			}
			assert.False(t, spec.HostNetwork || spec.HostPID || spec.HostIPC, "the manager uses a host namespace")

			containers := append(slices.Clone(spec.InitContainers), spec.Containers...)
			assert.NotEmpty(t, containers)
			managerContainer(t, spec)
			for _, c := range containers {
				sc := c.SecurityContext
				if !assert.NotNilf(t, sc, "container %s has no securityContext", c.Name) {
					continue
				}
				assert.Truef(t, sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem, "container %s: root filesystem is writable", c.Name)
				assert.Truef(t, sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation, "container %s: privilege escalation allowed", c.Name)
				assert.Falsef(t, sc.Privileged != nil && *sc.Privileged, "container %s is privileged", c.Name)
				if assert.NotNilf(t, sc.Capabilities, "container %s drops no capabilities", c.Name) {
					assert.Containsf(t, sc.Capabilities.Drop, corev1.Capability("ALL"), "container %s", c.Name)
					assert.Emptyf(t, sc.Capabilities.Add, "container %s adds capabilities", c.Name)
				}
				if sc.SeccompProfile != nil {
					assert.Equalf(t, corev1.SeccompProfileTypeRuntimeDefault, sc.SeccompProfile.Type, "container %s overrides the pod's seccomp profile", c.Name)
				}
			}
		})
	}
}
