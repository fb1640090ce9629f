package trainingjob_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/internal/manager"
	"github.com/ml-operator/ml-operator/test/testutil"
)

var (
	volcanoPG = schema.GroupVersionKind{Group: "scheduling.volcano.sh", Version: "v1beta1", Kind: "PodGroup"}
	coschedPG = schema.GroupVersionKind{Group: "scheduling.x-k8s.io", Version: "v1alpha1", Kind: "PodGroup"}
)

func podGroup(t *testing.T, gvk schema.GroupVersionKind, ns, name string) (*unstructured.Unstructured, error) {
	t.Helper()
	pg := &unstructured.Unstructured{}
	pg.SetGroupVersionKind(gvk)
	return pg, env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pg)
}

func crdInstalled(t *testing.T, name string) bool {
	crd := &unstructured.Unstructured{}
	crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
	err := env.Client.Get(ctx, client.ObjectKey{Name: name}, crd)
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}

// With scheduling.schedulerName volcano or coscheduling and the PodGroup CRD
// installed, each attempt's gang gets a PodGroup (minMember = ranks,
// minResources = their requests) that its pods name; a restart replaces it.
// Without the CRD, the pods are created as usual.
func TestGangSchedulerPodGroups(t *testing.T) {
	ns := testutil.Namespace(t, env.Client)
	crds := filepath.Join("..", "..", "test", "testdata", "crds")
	files := []string{filepath.Join(crds, "podgroups.scheduling.volcano.sh.yaml"), filepath.Join(crds, "podgroups.scheduling.x-k8s.io.yaml")}

	if !crdInstalled(t, "podgroups.scheduling.volcano.sh") {
		w := testutil.TrainingJob("nocrd", ns).Workers(2).GPUs(0)
		w.Spec.Scheduling.SchedulerName = "volcano"
		job := create(t, w)
		for _, p := range waitPods(t, job, 2, 0) {
			assert.NotContains(t, p.Annotations, "scheduling.k8s.io/group-name", "no PodGroup CRD: pods name no group")
		}
		// No gang scheduler places it, and this suite's manager has no default placement timeout.
		waitGangPlacement(t, job, mlv1.GangPlacementNone)
	}
	_, err := envtest.InstallCRDs(env.Config, envtest.CRDInstallOptions{Paths: files, ErrorIfPathMissing: true})
	require.NoError(t, err)
	priority := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "podgroup-test-high"}, Value: 1000}
	require.NoError(t, env.Client.Create(ctx, priority))
	t.Cleanup(func() { _ = env.Client.Delete(ctx, priority) })

	// Volcano.
	w := testutil.TrainingJob("vc", ns).Workers(2).GPUs(2).Resources(corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}})
	w.Spec.Scheduling.SchedulerName = "volcano"
	w.Spec.Scheduling.PriorityClassName = priority.Name
	// The PodGroup exists before the first pod does: when the API server
	// tells of the first pod, the group is already there to read.
	groupFirst := make(chan error, 1)
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: manager.NewScheme()})
	require.NoError(t, err)
	pw, err := wc.Watch(ctx, &corev1.PodList{}, client.InNamespace(ns), client.MatchingLabels{mlv1.LabelTrainingJob: "vc"})
	require.NoError(t, err)
	t.Cleanup(pw.Stop)
	go func() {
		for ev := range pw.ResultChan() {
			if ev.Type == watch.Added {
				_, err := podGroup(t, volcanoPG, ns, "vc-0")
				groupFirst <- err
				return
			}
		}
	}()
	job := create(t, w)
	got := waitPods(t, job, 2, 0)
	select {
	case err := <-groupFirst:
		require.NoError(t, err, "PodGroup vc-0 when the first pod appeared")
	case <-time.After(30 * time.Second):
		t.Fatal("no pod event")
	}
	pg, err := podGroup(t, volcanoPG, ns, "vc-0")
	require.NoError(t, err, "PodGroup vc-0")
	ownedBy(t, pg, get(t, job))
	waitGangPlacement(t, job, mlv1.GangPlacementVolcano)
	minMember, _, _ := unstructured.NestedInt64(pg.Object, "spec", "minMember")
	assert.EqualValues(t, 2, minMember)
	minRes, _, _ := unstructured.NestedStringMap(pg.Object, "spec", "minResources")
	assert.Equal(t, map[string]string{"cpu": "2", "memory": "2Gi", "nvidia.com/gpu": "4"}, minRes)
	pc, _, _ := unstructured.NestedString(pg.Object, "spec", "priorityClassName")
	assert.Equal(t, priority.Name, pc, "Volcano's PodGroup carries the priority class")
	for _, p := range got {
		assert.Equal(t, "vc-0", p.Annotations["scheduling.k8s.io/group-name"], p.Name)
	}

	// A gang restart: the new attempt gets its own group, the old one goes.
	setAll(t, job, 2, corev1.PodRunning)
	setPhase(t, job, 1, corev1.PodFailed, testutil.WithExitCode("trainer", 1, "Error"))
	waitState(t, job, mlv1.StateRestarting)
	waitPods(t, job, 0, 0)
	step(t, job, 10*time.Second)
	for _, p := range waitPods(t, job, 2, 1) {
		assert.Equal(t, "vc-1", p.Annotations["scheduling.k8s.io/group-name"], p.Name)
	}
	_, err = podGroup(t, volcanoPG, ns, "vc-1")
	require.NoError(t, err, "PodGroup vc-1")
	testutil.Eventually(t, func() bool {
		_, err := podGroup(t, volcanoPG, ns, "vc-0")
		return apierrors.IsNotFound(err)
	}, "attempt 0's PodGroup deleted")

	// scheduler-plugins coscheduling, with a TensorFlow parameter server in the gang.
	w = testutil.TrainingJob("cs", ns).Framework(mlv1.FrameworkTensorFlow).Workers(2).GPUs(0).ParameterServers(1)
	w.Spec.Scheduling.SchedulerName = "scheduler-plugins-scheduler"
	w.Spec.Scheduling.PriorityClassName = priority.Name
	job = create(t, w)
	testutil.Eventually(t, func() bool { return len(pods(t, job)) == 3 }, "2 workers and 1 ps")
	pg, err = podGroup(t, coschedPG, ns, "cs-0")
	require.NoError(t, err, "PodGroup cs-0")
	minMember, _, _ = unstructured.NestedInt64(pg.Object, "spec", "minMember")
	assert.EqualValues(t, 3, minMember, "ranks and parameter servers")
	waitGangPlacement(t, job, mlv1.GangPlacementCoscheduling)
	_, found, _ := unstructured.NestedFieldNoCopy(pg.Object, "spec", "priorityClassName")
	assert.False(t, found, "scheduler-plugins' PodGroup has no priorityClassName (the pods carry it)")
	for _, p := range pods(t, job) {
		assert.Equal(t, "cs-0", p.Labels["scheduling.x-k8s.io/pod-group"], p.Name)
		assert.Equal(t, priority.Name, p.Spec.PriorityClassName, p.Name)
	}
}
