//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/internal/localcluster"
)

// TestPlacementTimeoutReleasesPartialGang is issue 27's 5 x 8-GPU job on the
// 4 x 8-GPU local cluster, with no gang scheduler: the real kube-scheduler
// binds four ranks, which hold every GPU, and cannot place the fifth. Once
// spec.scheduling.placementTimeout (20s) expires, the operator deletes the
// whole gang, so no GPU stays held, with a Warning event; the restarts
// counter (backoffLimit's) does not move. It takes every GPU, so it runs
// alone (before the parallel tests).
func TestPlacementTimeoutReleasesPartialGang(t *testing.T) {
	ns := namespace(t)
	ctx := context.Background()
	gpusInCluster := int32(0)
	nodes := &corev1.NodeList{}
	require.NoError(t, env.client.List(ctx, nodes))
	for _, n := range nodes.Items {
		q := n.Status.Allocatable[localcluster.GPUResource]
		gpusInCluster += int32(q.Value())
	}
	placed := gpusInCluster / 8
	tj := simJob(ns, "five-by-eight", placed+1, 8, map[string]string{"sim.ml.example.com/complete-after": "1h"})
	tj.Spec.Scheduling.PlacementTimeout = &metav1.Duration{Duration: 20 * time.Second}
	require.NoError(t, env.client.Create(ctx, tj))
	t.Cleanup(func() { _ = env.client.Delete(context.Background(), tj) })

	waitFor(t, jobTimeout, fmt.Sprintf("%d ranks Running and one Unschedulable", placed), func() (bool, string) {
		running, stuck := int32(0), 0
		var seen []string
		for _, p := range workerPods(t, tj, "0") {
			seen = append(seen, fmt.Sprintf("%s %s on %q", p.Name, p.Status.Phase, p.Spec.NodeName))
			if p.Status.Phase == corev1.PodRunning && p.Spec.NodeName != "" {
				running++
			}
			if c := podCondition(&p, corev1.PodScheduled); c != nil && c.Reason == corev1.PodReasonUnschedulable {
				stuck++
			}
		}
		return running == placed && stuck == 1, strings.Join(seen, ", ")
	})
	// The status follows the pods within a status batch period.
	var waiting *mlv1.TrainingJob
	waitFor(t, jobTimeout, "the status showing the placed ranks' GPUs", func() (bool, string) {
		waiting = getJob(t, tj)
		return waiting.Status.AllocatedGPUs == placed*8 || waiting.Status.PlacementTimeouts > 0, describeJob(waiting)
	})
	assert.Equal(t, mlv1.GangPlacementTimeout, waiting.Status.GangPlacement, describeJob(waiting))
	require.NotNil(t, waiting.Status.PlacementStartTime)
	assert.EqualValues(t, 0, waiting.Status.PlacementTimeouts, "released within the first 20s: %s", describeJob(waiting))

	var released *mlv1.TrainingJob
	waitFor(t, jobTimeout, "the gang released at its placement timeout", func() (bool, string) {
		released = getJob(t, tj)
		return released.Status.PlacementTimeouts >= 1, describeJob(released)
	})
	assert.EqualValues(t, 0, released.Status.Restarts, "a placement timeout spends no backoffLimit: %s", describeJob(released))
	assert.EqualValues(t, 0, released.Status.Disruptions, describeJob(released))
	assert.False(t, released.Status.LastRestartTime.Time.Before(waiting.Status.PlacementStartTime.Add(20*time.Second)),
		"released at %s, before the timeout (pods created at %s)", released.Status.LastRestartTime, waiting.Status.PlacementStartTime)

	waitFor(t, jobTimeout, "every pod of attempt 0 gone (no GPU held)", func() (bool, string) {
		left := workerPods(t, tj, "0")
		return len(left) == 0, fmt.Sprintf("%d pods of attempt 0 left", len(left))
	})
	var warning *eventsv1.Event
	waitFor(t, jobTimeout, "a Warning event PlacementTimeout", func() (bool, string) {
		list := &eventsv1.EventList{}
		require.NoError(t, env.client.List(ctx, list, client.InNamespace(ns)))
		for i, e := range list.Items {
			if e.Regarding.Name == tj.Name && e.Reason == mlv1.ReasonPlacementTimeout {
				warning = &list.Items[i]
				return true, e.Note
			}
		}
		return false, fmt.Sprintf("%d events", len(list.Items))
	})
	assert.Equal(t, corev1.EventTypeWarning, warning.Type)
	// Which rank the scheduler leaves out is its choice, not always the last.
	assert.Contains(t, warning.Note, "still unschedulable 20s after the gang's pods were created (placementTimeout 20s)")
	assert.Contains(t, warning.Note, fmt.Sprintf("releasing the whole gang (%d pods placed)", placed))
	assert.Contains(t, warning.Note, "nvidia.com/gpu")

	// Give the GPUs back before the parallel tests start.
	require.NoError(t, env.client.Delete(ctx, tj))
	waitFor(t, jobTimeout, "the job's pods gone", func() (bool, string) {
		pods := &corev1.PodList{}
		require.NoError(t, env.client.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{mlv1.LabelTrainingJob: tj.Name}))
		return len(pods.Items) == 0, fmt.Sprintf("%d pods left", len(pods.Items))
	})
}
