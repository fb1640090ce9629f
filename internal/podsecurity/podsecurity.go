// Package podsecurity owns the security settings the operator gives the
// pods it creates (TrainingJob workers, ModelDeployment model servers) when
// their owner sets none, and reads back why a container of such a pod
// cannot start. Both controllers call it; the manager's --pod-* flags set
// Defaults (docs/security.md).
//
// The defaults pass Pod Security "restricted" and OpenShift's
// "restricted-v2": runAsNonRoot, the RuntimeDefault seccomp profile, no
// privilege escalation, every capability dropped. The user, group and
// fsGroup depend on the cluster (ForCluster): on OpenShift none is fixed
// (restricted-v2 refuses IDs outside the namespace's range and assigns one
// from it when none is set); elsewhere they are DefaultID, so stock images
// whose USER is root (the official PyTorch and TensorFlow images) or a
// name (TorchServe's) start as a non-root user. An image the kubelet still
// refuses (CreateContainerConfigError, for example when the owner's own
// podSecurityContext sets runAsNonRoot and no user) becomes the owner's
// condition through NotStarting. HOME is an emptyDir, so caches are
// writable whatever UID runs.
package podsecurity

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

// DefaultHome is where HOME points (an emptyDir) unless the admin sets
// another path with --pod-home.
const DefaultHome = "/home/ml-operator"

// HomeVolumeName is the emptyDir volume mounted at HOME.
const HomeVolumeName = "home"

// Defaults are the admin's security defaults for the pods the operator
// creates when their owner sets no security context.
type Defaults struct {
	// RunAsUser, RunAsGroup and FSGroup, when set, pin the pod's user,
	// primary group and volume group. Unset (the default), the image's
	// numeric USER runs, or on OpenShift the UID restricted-v2 assigns.
	RunAsUser, RunAsGroup, FSGroup *int64
	// Home is the container's HOME, an emptyDir mounted there. Empty
	// leaves HOME (and the filesystem) to the image.
	Home string
	// AutoIDs lets ForCluster choose the IDs: true until the admin sets
	// any of --pod-run-as-user, --pod-run-as-group or --pod-fs-group
	// (an empty value then means "none, on every cluster").
	AutoIDs bool
}

// DefaultID is the user, group and fsGroup pinned off OpenShift when the
// admin chose none.
const DefaultID int64 = 1000

// NewDefaults are the defaults the manager starts from: IDs chosen by the
// cluster (ForCluster), HOME at DefaultHome. Unresolved, they fix no ID,
// which is what OpenShift gets.
func NewDefaults() Defaults { return Defaults{Home: DefaultHome, AutoIDs: true} }

// ForCluster resolves automatic IDs for a cluster: on OpenShift (where
// restricted-v2 assigns a UID from the namespace's range) none is fixed;
// elsewhere user, group and fsGroup are DefaultID. IDs the admin set are
// kept as they are.
func (d Defaults) ForCluster(openShift bool) Defaults {
	if !d.AutoIDs {
		return d
	}
	d.AutoIDs = false
	if !openShift {
		d.RunAsUser, d.RunAsGroup, d.FSGroup = ptr.To(DefaultID), ptr.To(DefaultID), ptr.To(DefaultID)
	}
	return d
}

// Validate refuses defaults no pod could run with.
func (d Defaults) Validate() error {
	if d.RunAsUser != nil && *d.RunAsUser < 1 {
		return fmt.Errorf("--pod-run-as-user %d: must be 1 or more (runAsNonRoot refuses user 0)", *d.RunAsUser)
	}
	if d.RunAsGroup != nil && *d.RunAsGroup < 0 {
		return fmt.Errorf("--pod-run-as-group %d: must be 0 or more", *d.RunAsGroup)
	}
	if d.FSGroup != nil && *d.FSGroup < 0 {
		return fmt.Errorf("--pod-fs-group %d: must be 0 or more", *d.FSGroup)
	}
	if d.Home != "" && !strings.HasPrefix(d.Home, "/") {
		return fmt.Errorf("--pod-home %q: must be an absolute path (or empty)", d.Home)
	}
	return nil
}

// PodSecurityContext is the pod-level default: runAsNonRoot, RuntimeDefault
// seccomp, and the admin's IDs when set.
func (d Defaults) PodSecurityContext() *corev1.PodSecurityContext {
	return &corev1.PodSecurityContext{
		RunAsNonRoot:   ptr.To(true),
		RunAsUser:      copyID(d.RunAsUser),
		RunAsGroup:     copyID(d.RunAsGroup),
		FSGroup:        copyID(d.FSGroup),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// ContainerSecurityContext is the container-level default: non-root, no
// privilege escalation, every capability dropped, RuntimeDefault seccomp.
func ContainerSecurityContext() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		RunAsNonRoot:             ptr.To(true),
		AllowPrivilegeEscalation: ptr.To(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// HomeVolume is the emptyDir behind HOME, its mount and the HOME variable;
// ok is false when the admin turned it off (Home empty).
func (d Defaults) HomeVolume() (vol corev1.Volume, mount corev1.VolumeMount, env corev1.EnvVar, ok bool) {
	if d.Home == "" {
		return vol, mount, env, false
	}
	return corev1.Volume{Name: HomeVolumeName, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		corev1.VolumeMount{Name: HomeVolumeName, MountPath: d.Home},
		corev1.EnvVar{Name: mlv1.EnvHome, Value: d.Home},
		true
}

func copyID(id *int64) *int64 {
	if id == nil {
		return nil
	}
	return ptr.To(*id)
}

// notStartingReasons are the kubelet's waiting reasons of a container that
// will not start until something changes (its spec, its image, the node).
var notStartingReasons = map[string]bool{
	"CreateContainerConfigError": true,
	"CreateContainerError":       true,
	"InvalidImageName":           true,
	"ErrImagePull":               true,
	"ImagePullBackOff":           true,
	"ErrImageNeverPull":          true,
	"RunContainerError":          true,
}

// NotStarting is why a container of pod cannot start, as the kubelet says
// it ("container trainer: CreateContainerConfigError: container has
// runAsNonRoot and image will run as root ..."), with what to do when the
// cause is the non-root rule; ok is false when every container starts (or
// has not been tried yet).
func NotStarting(pod *corev1.Pod, fix string) (message string, ok bool) {
	statuses := append(append([]corev1.ContainerStatus(nil), pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...)
	for _, cs := range statuses {
		w := cs.State.Waiting
		if w == nil || !notStartingReasons[w.Reason] {
			continue
		}
		msg := fmt.Sprintf("container %s: %s", cs.Name, w.Reason)
		if w.Message != "" {
			msg += ": " + w.Message
		}
		if strings.Contains(w.Message, "runAsNonRoot") && fix != "" {
			msg += " (" + fix + ")"
		}
		return msg, true
	}
	return "", false
}
