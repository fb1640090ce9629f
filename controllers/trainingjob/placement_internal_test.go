package trainingjob

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

// The mechanism that places a gang all-or-nothing, in the documented order:
// Kueue (a queue name), then an installed gang scheduler, then native gang
// scheduling, then the placement timeout (the job's, else the admin's), else none.
func TestGangPlacementOf(t *testing.T) {
	minute := &metav1.Duration{Duration: time.Minute}
	for name, tc := range map[string]struct {
		queue   string
		flavour string
		timeout *metav1.Duration
		admin   time.Duration
		want    mlv1.GangPlacement
	}{
		"kueue first":               {queue: "q", flavour: "volcano", timeout: minute, want: mlv1.GangPlacementKueue},
		"volcano installed":         {flavour: "volcano", timeout: minute, want: mlv1.GangPlacementVolcano},
		"coscheduling installed":    {flavour: "coscheduling", admin: time.Minute, want: mlv1.GangPlacementCoscheduling},
		"native gangs served":       {flavour: "native", timeout: minute, admin: time.Minute, want: mlv1.GangPlacementNative},
		"kueue over native gangs":   {queue: "q", flavour: "native", want: mlv1.GangPlacementKueue},
		"the job's timeout":         {timeout: minute, want: mlv1.GangPlacementTimeout},
		"the admin's timeout":       {admin: 10 * time.Minute, want: mlv1.GangPlacementTimeout},
		"0s overrides the admin":    {timeout: &metav1.Duration{}, admin: 10 * time.Minute, want: mlv1.GangPlacementNone},
		"no timeout and no gangers": {want: mlv1.GangPlacementNone},
	} {
		job := testJob(mlv1.FrameworkPyTorch)
		job.Spec.Scheduling.QueueName = tc.queue
		job.Spec.Scheduling.PlacementTimeout = tc.timeout
		assert.Equal(t, tc.want, gangPlacementOf(job, tc.flavour, tc.admin), name)
	}
}

func unschedulablePod(p *corev1.Pod) {
	p.Spec.NodeName = ""
	p.Status.Phase = corev1.PodPending
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Reason: corev1.PodReasonUnschedulable, Message: "0/6 nodes are available: 4 Insufficient nvidia.com/gpu."}}
}

// placementTimeoutOf releases a gang only under GangPlacementTimeout, only
// when a rank is unschedulable, and only once placementStartTime +
// placementTimeout has passed; before that it asks for a pass at the expiry.
func TestPlacementTimeoutOf(t *testing.T) {
	state := func(placement mlv1.GangPlacement, at time.Time, pods []*corev1.Pod) gangState {
		job := testJob(mlv1.FrameworkPyTorch)
		job.Spec.NumWorkers = 3
		job.Status.GangPlacement = placement
		job.Status.PlacementStartTime = &metav1.Time{Time: t0}
		return gangState{job: job, pods: pods, now: at, placementTimeout: 2 * time.Minute}
	}
	job := testJob(mlv1.FrameworkPyTorch)
	job.Spec.NumWorkers = 3
	stuck := gang(job, 2, unschedulablePod)
	for _, p := range stuck[:2] {
		p.Spec.NodeName = "gpu-0"
	}

	d, recheck, expired := placementTimeoutOf(state(mlv1.GangPlacementTimeout, t0.Add(time.Minute), stuck))
	assert.False(t, expired)
	assert.Equal(t, t0.Add(2*time.Minute), recheck, "a pass at the expiry")

	d, _, expired = placementTimeoutOf(state(mlv1.GangPlacementTimeout, t0.Add(2*time.Minute), stuck))
	assert.True(t, expired)
	assert.Equal(t, restartForPlacement, d.kind)
	assert.Equal(t, mlv1.ReasonPlacementTimeout, d.reason)
	assert.Equal(t, "rank 2 (pod bert-worker-2) still unschedulable 2m0s after the gang's pods were created (placementTimeout 2m0s): "+
		"0/6 nodes are available: 4 Insufficient nvidia.com/gpu.; releasing the whole gang (2 pods placed) and retrying", d.message)

	for name, s := range map[string]gangState{
		"a gang scheduler places it": state(mlv1.GangPlacementVolcano, t0.Add(time.Hour), stuck),
		"no timeout":                 state(mlv1.GangPlacementNone, t0.Add(time.Hour), stuck),
		"every rank placed":          state(mlv1.GangPlacementTimeout, t0.Add(time.Hour), gang(job, -1)),
		"pending, not yet tried":     state(mlv1.GangPlacementTimeout, t0.Add(time.Hour), gang(job, 2, phase(corev1.PodPending))),
	} {
		_, recheck, expired := placementTimeoutOf(s)
		assert.False(t, expired, name)
		assert.True(t, recheck.IsZero(), name)
	}

	// decide returns it after everything else, and asks for the recheck.
	g := state(mlv1.GangPlacementTimeout, t0.Add(time.Minute), stuck)
	assert.Equal(t, decision{kind: keepGoing, recheckAt: t0.Add(2 * time.Minute)}, decide(g))
	g.now = t0.Add(3 * time.Minute)
	assert.Equal(t, restartForPlacement, decide(g).kind)
}
