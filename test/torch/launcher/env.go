// Package launcher runs the environment the operator generates under real
// launchers (torchrun), to prove it is what they expect.
package launcher

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

// Interpreters from Debian's python3-torch. The python3 first on PATH may be
// another interpreter without torch.
const (
	Torchrun = "/usr/bin/torchrun"
	Python3  = "/usr/bin/python3"
)

// PodEnv resolves a worker pod's environment the way the kubelet would on
// this machine: downward-API fields get the pod's name, labels and 127.0.0.1, and
// rank 0's FQDN, which only cluster DNS resolves, is mapped to 127.0.0.1
// after checking the operator set MASTER_ADDR and PET_MASTER_ADDR to exactly
// that FQDN. home is the process's HOME.
func PodEnv(job *mlv1.TrainingJob, pod *corev1.Pod, home string) ([]string, error) {
	fqdn := mlv1.MasterAddr(job.Name, job.Namespace)
	// Debian's torch 1.13 on Python 3.11 crashes with torchrun's default
	// --redirects 0; PET_REDIRECTS/PET_TEE avoid it. Not part of the contract.
	env := []string{"PATH=/usr/bin:/bin", "HOME=" + home, "PET_REDIRECTS=1", "PET_TEE=1"}
	for _, e := range pod.Spec.Containers[0].Env {
		v := e.Value
		switch {
		case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name":
			v = pod.Name
		case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "status.podIP":
			v = "127.0.0.1"
		case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && strings.HasPrefix(e.ValueFrom.FieldRef.FieldPath, "metadata.labels['"):
			v = pod.Labels[strings.TrimSuffix(strings.TrimPrefix(e.ValueFrom.FieldRef.FieldPath, "metadata.labels['"), "']")]
		case e.ValueFrom != nil:
			return nil, fmt.Errorf("env %s: unsupported valueFrom", e.Name)
		case e.Name == "MASTER_ADDR" || e.Name == "PET_MASTER_ADDR":
			if v != fqdn {
				return nil, fmt.Errorf("env %s = %q, want rank 0's FQDN %q", e.Name, v, fqdn)
			}
			v = "127.0.0.1"
		}
		env = append(env, e.Name+"="+v)
	}
	return env, nil
}
