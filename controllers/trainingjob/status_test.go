package trainingjob

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

func TestObserveWorkers(t *testing.T) {
	job := testJob(mlv1.FrameworkPyTorch)
	job.Spec.NumWorkers = 4
	pods := gang(job, -1)
	pods[0].Spec.NodeName, pods[1].Spec.NodeName, pods[2].Spec.NodeName = "n1", "n1", "n2"
	pods[2].Status.Phase = corev1.PodSucceeded
	pods[3].Status.Phase = ""
	pods[1].Status.ContainerStatuses = []corev1.ContainerStatus{{Name: TrainerContainerName, RestartCount: 2}}

	var st mlv1.TrainingJobStatus
	observeWorkers(&st, pods, "nvidia.com/gpu")

	if diff := cmp.Diff(mlv1.WorkerCounts{Pending: 1, Active: 2, Succeeded: 1}, st.Workers); diff != "" {
		t.Errorf("workers (-want +got):\n%s", diff)
	}
	want := []mlv1.WorkerStatus{
		{Rank: 0, PodName: "bert-worker-0", Phase: corev1.PodRunning, Node: "n1"},
		{Rank: 1, PodName: "bert-worker-1", Phase: corev1.PodRunning, Node: "n1", RestartCount: 2},
		{Rank: 2, PodName: "bert-worker-2", Phase: corev1.PodSucceeded, Node: "n2"},
		{Rank: 3, PodName: "bert-worker-3", Phase: corev1.PodPending},
	}
	if diff := cmp.Diff(want, st.WorkerStatuses); diff != "" {
		t.Errorf("workerStatuses (-want +got):\n%s", diff)
	}
	// Two bound, unfinished pods with 2 GPUs each, on one node.
	if st.AllocatedGPUs != 4 || st.AllocatedNodes != 1 {
		t.Errorf("allocatedGPUs=%d allocatedNodes=%d, want 4 and 1", st.AllocatedGPUs, st.AllocatedNodes)
	}
}

func TestActiveState(t *testing.T) {
	for _, tt := range []struct {
		c    mlv1.WorkerCounts
		want mlv1.TrainingJobState
	}{
		{mlv1.WorkerCounts{Active: 2}, mlv1.StateRunning},
		{mlv1.WorkerCounts{Active: 1, Succeeded: 1}, mlv1.StateRunning},
		{mlv1.WorkerCounts{Active: 1, Pending: 1}, mlv1.StateInitializing},
		{mlv1.WorkerCounts{}, mlv1.StateInitializing},
	} {
		if got := activeState(tt.c, 2); got != tt.want {
			t.Errorf("activeState(%+v) = %s, want %s", tt.c, got, tt.want)
		}
	}
}

func TestRunningCondition(t *testing.T) {
	job := testJob(mlv1.FrameworkPyTorch)
	job.Generation = 3
	for _, tt := range []struct {
		state      mlv1.TrainingJobState
		wantStatus metav1.ConditionStatus
		wantReason string
	}{
		{mlv1.StateRunning, metav1.ConditionTrue, mlv1.ReasonAllWorkersRunning},
		{mlv1.StateInitializing, metav1.ConditionFalse, mlv1.ReasonWorkersPending},
		{mlv1.StateSuspended, metav1.ConditionFalse, mlv1.ReasonSuspended},
		{mlv1.StateRestarting, metav1.ConditionFalse, "Restarting"},
		{mlv1.StateCompleted, metav1.ConditionFalse, mlv1.ReasonJobFinished},
		{mlv1.StateFailed, metav1.ConditionFalse, mlv1.ReasonJobFinished},
	} {
		job.Status.State = tt.state
		c := runningCondition(job)
		if c.Type != "Running" || c.Status != tt.wantStatus || c.Reason != tt.wantReason || c.ObservedGeneration != 3 || c.Message == "" {
			t.Errorf("%s: got %+v", tt.state, c)
		}
	}
}

func TestOtherConditions(t *testing.T) {
	job := testJob(mlv1.FrameworkPyTorch)
	job.Generation = 2
	job.Status.Restarts, job.Status.Disruptions = 1, 2
	for _, tt := range []struct {
		got                      metav1.Condition
		typ, reason, msgContains string
		status                   metav1.ConditionStatus
	}{
		{createdCondition(job), "Created", mlv1.ReasonResourcesCreated, "bert-checkpoints", metav1.ConditionTrue},
		{succeededCondition(job, "AllWorkersSucceeded", "done"), "Succeeded", "AllWorkersSucceeded", "done", metav1.ConditionTrue},
		{failedCondition(job, mlv1.ReasonPermanentExitCode, "rank 1"), "Failed", mlv1.ReasonPermanentExitCode, "rank 1", metav1.ConditionTrue},
		{restartingCondition(job, mlv1.ReasonWorkerFailed, "rank 0 exit 1"), "Restarting", mlv1.ReasonWorkerFailed, "rank 0", metav1.ConditionTrue},
		{restartDoneCondition(job, "Evicted: rank 0"), "Restarting", mlv1.ReasonGangRecreated, "attempt 3 created after 1 restarts and 2 disruptions; last restart: Evicted: rank 0", metav1.ConditionFalse},
		{suspendedCondition(job, true), "Suspended", mlv1.ReasonSuspended, "suspend is true", metav1.ConditionTrue},
		{suspendedCondition(job, false), "Suspended", mlv1.ReasonResumed, "suspend is false", metav1.ConditionFalse},
		{progressCondition(job, errors.New("refused"), "http://x/metrics"), mlv1.TrainingJobProgressAvailable, mlv1.ReasonScrapeFailed, "refused", metav1.ConditionFalse},
		{progressCondition(job, nil, "http://x/metrics"), mlv1.TrainingJobProgressAvailable, mlv1.ReasonScraped, "http://x/metrics", metav1.ConditionTrue},
	} {
		c := tt.got
		if c.Type != tt.typ || c.Reason != tt.reason || c.Status != tt.status || c.ObservedGeneration != 2 || !strings.Contains(c.Message, tt.msgContains) {
			t.Errorf("got %+v, want type %s reason %s status %s message containing %q", c, tt.typ, tt.reason, tt.status, tt.msgContains)
		}
	}
}

func TestSetConditionKeepsOrderAndTransitionTime(t *testing.T) {
	job := testJob(mlv1.FrameworkPyTorch)
	st := &job.Status
	t1, t2 := metav1.NewTime(t0), metav1.NewTime(t0.Add(60e9))
	setCondition(st, failedCondition(job, "X", "y"), t1)
	setCondition(st, createdCondition(job), t1)
	setCondition(st, createdCondition(job), t2)
	if st.Conditions[0].Type != "Created" || st.Conditions[1].Type != "Failed" {
		t.Errorf("order: %v", st.Conditions)
	}
	if !st.Conditions[0].LastTransitionTime.Equal(&t1) {
		t.Errorf("transition time moved without a status change")
	}
}

func TestV1Alpha1PhaseMapping(t *testing.T) {
	for state, want := range map[mlv1.TrainingJobState]string{
		mlv1.StatePending: "Pending", mlv1.StateInitializing: "Pending", mlv1.StateSuspended: "Pending",
		mlv1.StateRunning: "Running", mlv1.StateRestarting: "Running",
		mlv1.StateCompleted: "Succeeded", mlv1.StateFailed: "Failed", "": "Pending",
	} {
		if got := state.V1Alpha1Phase(); got != want {
			t.Errorf("%q.V1Alpha1Phase() = %s, want %s", state, got, want)
		}
	}
}

func TestJobOfLabel(t *testing.T) {
	pvc := desiredPVC(testJob(mlv1.FrameworkPyTorch), false)
	reqs := jobOfLabel(context.Background(), pvc)
	if len(reqs) != 1 || reqs[0].Namespace != "team-a" || reqs[0].Name != "bert" {
		t.Errorf("requests %v", reqs)
	}
	pvc.Labels = nil
	if reqs := jobOfLabel(context.Background(), pvc); len(reqs) != 0 {
		t.Errorf("unlabelled object mapped to %v", reqs)
	}
}

func TestUnschedulableCondition(t *testing.T) {
	job := testJob(mlv1.FrameworkPyTorch)
	job.Status.State = mlv1.StateInitializing
	pending := runningCondition(job)
	mk := func(rank int32, node string, cond *corev1.PodCondition) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: mlv1.WorkerPodName(job.Name, rank),
			Labels: map[string]string{mlv1.LabelRank: fmt.Sprint(rank)}}}
		p.Spec.NodeName = node
		if cond != nil {
			p.Status.Conditions = []corev1.PodCondition{*cond}
		}
		return p
	}
	unsched := &corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Reason: corev1.PodReasonUnschedulable, Message: "0/6 nodes are available: 4 Insufficient nvidia.com/gpu."}
	other := &corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "SchedulingGated"}

	c := unschedulableCondition(pending, []*corev1.Pod{mk(2, "", unsched), mk(0, "n1", nil), mk(1, "", unsched)}, mlv1.GangPlacementTimeout)
	if c.Reason != mlv1.ReasonUnschedulable || c.Status != metav1.ConditionFalse ||
		!strings.Contains(c.Message, "rank 1 (pod "+mlv1.WorkerPodName(job.Name, 1)+") is unschedulable: 0/6 nodes are available: 4 Insufficient nvidia.com/gpu.") {
		t.Errorf("condition %+v", c)
	}
	if c := unschedulableCondition(pending, []*corev1.Pod{mk(0, "", other), mk(1, "n1", nil)}, mlv1.GangPlacementNone); c != pending {
		t.Errorf("no unschedulable pod: %+v", c)
	}
	// Native gangs: ranks 0 and 1 fit but wait for the gang; rank 2 is why.
	waiting := &corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Reason: corev1.PodReasonUnschedulable, Message: "pod group is unschedulable, waiting for minCount pods from a gang to be scheduled, " +
			"one or more plugins asked to wait and no plugin rejected pod"}
	c = unschedulableCondition(pending, []*corev1.Pod{mk(0, "", waiting), mk(2, "", unsched), mk(1, "", waiting)}, mlv1.GangPlacementNative)
	assert.Equal(t, mlv1.ReasonUnschedulable, c.Reason)
	assert.Contains(t, c.Message, "rank 2 (pod "+mlv1.WorkerPodName(job.Name, 2)+") is unschedulable: 0/6 nodes are available: 4 Insufficient nvidia.com/gpu.")
	assert.Contains(t, c.Message, "native gang scheduling binds no pod of the gang until every pod fits")
	// Only waiting members: the lowest rank is named.
	c = unschedulableCondition(pending, []*corev1.Pod{mk(1, "", waiting), mk(0, "", waiting)}, mlv1.GangPlacementNative)
	assert.Contains(t, c.Message, "rank 0 (pod "+mlv1.WorkerPodName(job.Name, 0)+") is unschedulable: pod group is unschedulable, waiting for minCount pods")
	// Without native gangs the lowest rank is named whatever its message.
	c = unschedulableCondition(pending, []*corev1.Pod{mk(0, "", waiting), mk(2, "", unsched)}, mlv1.GangPlacementTimeout)
	assert.Contains(t, c.Message, "rank 0 (pod ")
	assert.NotContains(t, c.Message, "native gang")

	job.Status.State = mlv1.StateRunning
	if running := runningCondition(job); unschedulableCondition(running, []*corev1.Pod{mk(0, "", unsched)}, mlv1.GangPlacementNone) != running {
		t.Errorf("only a pending condition is explained")
	}
}
