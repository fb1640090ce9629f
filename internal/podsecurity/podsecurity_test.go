package podsecurity_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/ml-operator/ml-operator/internal/podsecurity"
)

func TestDefaultsSetNoIDs(t *testing.T) {
	want := &corev1.PodSecurityContext{
		RunAsNonRoot:   ptr.To(true),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	if diff := cmp.Diff(want, podsecurity.NewDefaults().PodSecurityContext()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	d := podsecurity.Defaults{RunAsUser: ptr.To[int64](1000), RunAsGroup: ptr.To[int64](0), FSGroup: ptr.To[int64](2000)}
	sc := d.PodSecurityContext()
	assert.Equal(t, []int64{1000, 0, 2000}, []int64{*sc.RunAsUser, *sc.RunAsGroup, *sc.FSGroup})
	*sc.RunAsUser = 5
	assert.Equal(t, int64(1000), *d.RunAsUser, "the context is a copy")
}

func TestHomeVolume(t *testing.T) {
	vol, mount, env, ok := podsecurity.NewDefaults().HomeVolume()
	assert.True(t, ok)
	assert.Equal(t, "home", vol.Name)
	assert.NotNil(t, vol.EmptyDir)
	assert.Equal(t, corev1.VolumeMount{Name: "home", MountPath: "/home/ml-operator"}, mount)
	assert.Equal(t, corev1.EnvVar{Name: "HOME", Value: "/home/ml-operator"}, env)
	_, _, _, ok = podsecurity.Defaults{}.HomeVolume()
	assert.False(t, ok, "an empty --pod-home adds nothing")
}

func TestValidate(t *testing.T) {
	assert.NoError(t, podsecurity.NewDefaults().Validate())
	assert.NoError(t, podsecurity.Defaults{RunAsUser: ptr.To[int64](1000), RunAsGroup: ptr.To[int64](0)}.Validate())
	assert.EqualError(t, podsecurity.Defaults{RunAsUser: ptr.To[int64](0)}.Validate(),
		"--pod-run-as-user 0: must be 1 or more (runAsNonRoot refuses user 0)")
	assert.EqualError(t, podsecurity.Defaults{FSGroup: ptr.To[int64](-1)}.Validate(), "--pod-fs-group -1: must be 0 or more")
	assert.EqualError(t, podsecurity.Defaults{Home: "home"}.Validate(), `--pod-home "home": must be an absolute path (or empty)`)
}

func TestNotStarting(t *testing.T) {
	pod := &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{
		{Name: "a", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}},
		{Name: "b", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
			Reason: "CreateContainerConfigError", Message: "container has runAsNonRoot and image will run as root"}}},
	}}}
	msg, ok := podsecurity.NotStarting(pod, "set runAsUser")
	assert.True(t, ok)
	assert.Equal(t, "container b: CreateContainerConfigError: container has runAsNonRoot and image will run as root (set runAsUser)", msg)
	pod.Status.ContainerStatuses = pod.Status.ContainerStatuses[:1]
	_, ok = podsecurity.NotStarting(pod, "set runAsUser")
	assert.False(t, ok, "ContainerCreating passes by itself")
	pod.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "init", State: corev1.ContainerState{
		Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "Back-off pulling image"}}}}
	msg, _ = podsecurity.NotStarting(pod, "set runAsUser")
	assert.Equal(t, "container init: ImagePullBackOff: Back-off pulling image", msg)
}

// Automatic IDs are 1000 off OpenShift and none on it; IDs the admin chose
// (even none) are kept on both.
func TestForCluster(t *testing.T) {
	auto := podsecurity.NewDefaults()
	assert.True(t, auto.AutoIDs)
	plain := auto.ForCluster(false)
	assert.Equal(t, []int64{1000, 1000, 1000}, []int64{*plain.RunAsUser, *plain.RunAsGroup, *plain.FSGroup})
	assert.False(t, plain.AutoIDs)
	ocp := auto.ForCluster(true)
	assert.Nil(t, ocp.RunAsUser)
	assert.Nil(t, ocp.RunAsGroup)
	assert.Nil(t, ocp.FSGroup)

	none := podsecurity.NewDefaults()
	none.AutoIDs = false
	assert.Nil(t, none.ForCluster(false).RunAsUser, "the admin's none stays none")
	pinned := podsecurity.NewDefaults()
	pinned.AutoIDs, pinned.RunAsUser = false, ptr.To[int64](2000)
	assert.Equal(t, int64(2000), *pinned.ForCluster(true).RunAsUser)
	assert.Nil(t, pinned.ForCluster(false).RunAsGroup)
}
