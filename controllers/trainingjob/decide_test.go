package trainingjob

import (
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

type podOpt func(*corev1.Pod)

func phase(ph corev1.PodPhase) podOpt { return func(p *corev1.Pod) { p.Status.Phase = ph } }
func exited(code int32, reason string) podOpt {
	return func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodFailed
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: TrainerContainerName,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason}}}}
	}
}
func onNode(n string) podOpt { return func(p *corev1.Pod) { p.Spec.NodeName = n } }
func withCondition(t corev1.PodConditionType, reason string) podOpt {
	return func(p *corev1.Pod) {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, Reason: reason})
	}
}
func podReason(r string) podOpt {
	return func(p *corev1.Pod) { p.Status.Phase, p.Status.Reason = corev1.PodFailed, r }
}
func deleting() podOpt {
	return func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: t0} }
}

// gang builds one pod per rank of job (rank 0 first), running, with opts
// applied to the given rank only.
func gang(job *mlv1.TrainingJob, rank int32, opts ...podOpt) []*corev1.Pod {
	var pods []*corev1.Pod
	for r := int32(0); r < job.Spec.EffectiveNumWorkers(); r++ {
		p := desiredWorkerPod(job, r, job.Status.Attempt(), &testCfg, false)
		p.Status.Phase = corev1.PodRunning
		if r == rank {
			for _, o := range opts {
				o(p)
			}
		}
		pods = append(pods, p)
	}
	return pods
}

func jobWith(policy mlv1.RestartPolicy, restarts int32) *mlv1.TrainingJob {
	j := testJob(mlv1.FrameworkPyTorch)
	j.Spec.RestartPolicy = policy
	j.Spec.BackoffLimit = ptr.To(int32(3))
	j.Status.Restarts = restarts
	return j
}

func TestDecide(t *testing.T) {
	tests := []struct {
		name       string
		job        *mlv1.TrainingJob
		pods       func(*mlv1.TrainingJob) []*corev1.Pod
		nodes      map[string]nodeInfo
		seen       map[int32]bool
		wantKind   decisionKind
		wantReason string
		wantInMsg  string
	}{
		{
			name:     "all running keeps going",
			job:      jobWith(mlv1.RestartPolicyOnFailure, 0),
			pods:     func(j *mlv1.TrainingJob) []*corev1.Pod { return gang(j, -1) },
			wantKind: keepGoing,
		},
		{
			name:       "all succeeded completes",
			job:        jobWith(mlv1.RestartPolicyOnFailure, 0),
			pods:       func(j *mlv1.TrainingJob) []*corev1.Pod { return succeededGang(j) },
			wantKind:   complete,
			wantReason: "AllWorkersSucceeded",
		},
		{
			name:     "one of two succeeded keeps going",
			job:      jobWith(mlv1.RestartPolicyOnFailure, 0),
			pods:     func(j *mlv1.TrainingJob) []*corev1.Pod { return gang(j, 0, phase(corev1.PodSucceeded)) },
			wantKind: keepGoing,
		},
		{
			name:       "OnFailure: a failed rank restarts the gang",
			job:        jobWith(mlv1.RestartPolicyOnFailure, 0),
			pods:       func(j *mlv1.TrainingJob) []*corev1.Pod { return gang(j, 1, exited(1, "Error")) },
			wantKind:   restartForFailure,
			wantReason: mlv1.ReasonWorkerFailed,
			wantInMsg:  "rank 1 (pod bert-worker-1) failed: exit code 1 (Error)",
		},
		{
			name:       "OnFailure: after backoffLimit restarts the job fails",
			job:        jobWith(mlv1.RestartPolicyOnFailure, 3),
			pods:       func(j *mlv1.TrainingJob) []*corev1.Pod { return gang(j, 1, exited(1, "Error")) },
			wantKind:   fail,
			wantReason: mlv1.ReasonBackoffLimitExceeded,
			wantInMsg:  "backoffLimit 3",
		},
		{
			name:       "Never: a failed rank fails the job",
			job:        jobWith(mlv1.RestartPolicyNever, 0),
			pods:       func(j *mlv1.TrainingJob) []*corev1.Pod { return gang(j, 0, exited(2, "Error")) },
			wantKind:   fail,
			wantReason: mlv1.ReasonRestartPolicyNever,
			wantInMsg:  "rank 0",
		},
		{
			name:       "ExitCode: 1..127 is permanent",
			job:        jobWith(mlv1.RestartPolicyExitCode, 0),
			pods:       func(j *mlv1.TrainingJob) []*corev1.Pod { return gang(j, 1, exited(127, "Error")) },
			wantKind:   fail,
			wantReason: mlv1.ReasonPermanentExitCode,
			wantInMsg:  "rank 1 (pod bert-worker-1) failed: exit code 127",
		},
		{
			name:       "ExitCode: 137 (OOMKilled) is retried",
			job:        jobWith(mlv1.RestartPolicyExitCode, 0),
			pods:       func(j *mlv1.TrainingJob) []*corev1.Pod { return gang(j, 1, exited(137, "OOMKilled")) },
			wantKind:   restartForFailure,
			wantReason: mlv1.ReasonWorkerFailed,
			wantInMsg:  "exit code 137 (OOMKilled)",
		},
		{
			name:       "ExitCode: 143 after the backoff limit fails",
			job:        jobWith(mlv1.RestartPolicyExitCode, 3),
			pods:       func(j *mlv1.TrainingJob) []*corev1.Pod { return gang(j, 1, exited(143, "Error")) },
			wantKind:   fail,
			wantReason: mlv1.ReasonBackoffLimitExceeded,
		},
		{
			name: "DisruptionTarget (preemption) is a disruption even though the pod failed",
			job:  jobWith(mlv1.RestartPolicyNever, 3),
			pods: func(j *mlv1.TrainingJob) []*corev1.Pod {
				return gang(j, 1, exited(137, "Error"), withCondition(corev1.DisruptionTarget, "PreemptionByScheduler"))
			},
			wantKind:   restartForDisruption,
			wantReason: mlv1.ReasonPreempted,
		},
		{
			name: "eviction API is a disruption",
			job:  jobWith(mlv1.RestartPolicyOnFailure, 3),
			pods: func(j *mlv1.TrainingJob) []*corev1.Pod {
				return gang(j, 0, withCondition(corev1.DisruptionTarget, "EvictionByEvictionAPI"))
			},
			wantKind:   restartForDisruption,
			wantReason: mlv1.ReasonEvicted,
		},
		{
			name:       "kubelet eviction (reason Evicted) is a disruption",
			job:        jobWith(mlv1.RestartPolicyOnFailure, 3),
			pods:       func(j *mlv1.TrainingJob) []*corev1.Pod { return gang(j, 0, podReason("Evicted")) },
			wantKind:   restartForDisruption,
			wantReason: mlv1.ReasonEvicted,
		},
		{
			name:       "node gone is a disruption",
			job:        jobWith(mlv1.RestartPolicyOnFailure, 0),
			pods:       func(j *mlv1.TrainingJob) []*corev1.Pod { return gang(j, 1, onNode("n1")) },
			nodes:      map[string]nodeInfo{"n1": {gone: true}},
			wantKind:   restartForDisruption,
			wantReason: mlv1.ReasonNodeLost,
			wantInMsg:  "node n1 is gone",
		},
		{
			name:       "node NotReady past the grace period is a disruption",
			job:        jobWith(mlv1.RestartPolicyOnFailure, 0),
			pods:       func(j *mlv1.TrainingJob) []*corev1.Pod { return gang(j, 1, onNode("n1")) },
			nodes:      map[string]nodeInfo{"n1": {notReadySince: t0.Add(-3 * time.Minute)}},
			wantKind:   restartForDisruption,
			wantReason: mlv1.ReasonNodeLost,
			wantInMsg:  "NotReady since",
		},
		{
			name:     "node NotReady inside the grace period is waited for",
			job:      jobWith(mlv1.RestartPolicyOnFailure, 0),
			pods:     func(j *mlv1.TrainingJob) []*corev1.Pod { return gang(j, 1, onNode("n1")) },
			nodes:    map[string]nodeInfo{"n1": {notReadySince: t0.Add(-time.Minute)}},
			wantKind: keepGoing,
		},
		{
			name:       "a node cordoned for a drain ends the gang before the eviction",
			job:        jobWith(mlv1.RestartPolicyNever, 3),
			pods:       func(j *mlv1.TrainingJob) []*corev1.Pod { return gang(j, 1, onNode("n1")) },
			nodes:      map[string]nodeInfo{"n1": {cordoned: "spec.unschedulable"}},
			wantKind:   restartForDisruption,
			wantReason: mlv1.ReasonNodeCordoned,
			wantInMsg:  "rank 1 (pod bert-worker-1): node n1 is cordoned (spec.unschedulable) for a drain",
		},
		{
			name: "a gang that tolerates the cordon would come back to the node: not acted on",
			job: func() *mlv1.TrainingJob {
				j := jobWith(mlv1.RestartPolicyOnFailure, 0)
				j.Spec.Scheduling.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
				return j
			}(),
			pods:     func(j *mlv1.TrainingJob) []*corev1.Pod { return gang(j, 1, onNode("n1")) },
			nodes:    map[string]nodeInfo{"n1": {cordoned: "spec.unschedulable"}},
			wantKind: keepGoing,
		},
		{
			name:     "a finished rank on a cordoned node is not a disruption",
			job:      jobWith(mlv1.RestartPolicyOnFailure, 0),
			pods:     func(j *mlv1.TrainingJob) []*corev1.Pod { return gang(j, 1, onNode("n1"), phase(corev1.PodSucceeded)) },
			nodes:    map[string]nodeInfo{"n1": {cordoned: "spec.unschedulable"}},
			wantKind: keepGoing,
		},
		{
			name:       "a pod deleted by someone else is a disruption",
			job:        jobWith(mlv1.RestartPolicyOnFailure, 0),
			pods:       func(j *mlv1.TrainingJob) []*corev1.Pod { return gang(j, 1, deleting()) },
			wantKind:   restartForDisruption,
			wantReason: mlv1.ReasonPodDeleted,
		},
		{
			name:       "a seen rank whose pod vanished is a disruption",
			job:        jobWith(mlv1.RestartPolicyOnFailure, 0),
			pods:       func(j *mlv1.TrainingJob) []*corev1.Pod { return gang(j, -1)[:1] },
			seen:       map[int32]bool{0: true, 1: true},
			wantKind:   restartForDisruption,
			wantReason: mlv1.ReasonPodDeleted,
			wantInMsg:  "rank 1",
		},
		{
			name:     "a rank never seen yet is just missing (being created)",
			job:      jobWith(mlv1.RestartPolicyOnFailure, 0),
			pods:     func(j *mlv1.TrainingJob) []*corev1.Pod { return gang(j, -1)[:1] },
			seen:     map[int32]bool{0: true},
			wantKind: keepGoing,
		},
		{
			name: "numWorkers grown 2 -> 4 re-forms the gang",
			job:  jobWith(mlv1.RestartPolicyOnFailure, 0),
			pods: func(j *mlv1.TrainingJob) []*corev1.Pod {
				pods := gang(j, -1)
				j.Spec.NumWorkers = 4
				return pods
			},
			wantKind:   restartForDisruption,
			wantReason: mlv1.ReasonRescaled,
			wantInMsg:  "from 2 to 4",
		},
		{
			name: "numWorkers shrunk 2 -> 1 re-forms the gang",
			job:  jobWith(mlv1.RestartPolicyOnFailure, 0),
			pods: func(j *mlv1.TrainingJob) []*corev1.Pod {
				pods := gang(j, -1)
				j.Spec.NumWorkers = 1
				return pods
			},
			wantKind:   restartForDisruption,
			wantReason: mlv1.ReasonRescaled,
			wantInMsg:  "from 2 to 1",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pods := tt.pods(tt.job)
			d := decide(gangState{job: tt.job, pods: pods, nodes: tt.nodes, seenRanks: tt.seen, now: t0, nodeGrace: 2 * time.Minute})
			if d.kind != tt.wantKind {
				t.Fatalf("kind = %d, want %d (%s: %s)", d.kind, tt.wantKind, d.reason, d.message)
			}
			if tt.wantReason != "" && d.reason != tt.wantReason {
				t.Errorf("reason = %q, want %q (%s)", d.reason, tt.wantReason, d.message)
			}
			if !strings.Contains(d.message, tt.wantInMsg) {
				t.Errorf("message %q does not mention %q", d.message, tt.wantInMsg)
			}
		})
	}
}

func TestDecideParameterServersChangedIsRescale(t *testing.T) {
	job := jobWith(mlv1.RestartPolicyOnFailure, 0)
	job.Spec.Framework = mlv1.FrameworkTensorFlow
	pods := gang(job, -1)
	if d := decide(gangState{job: job, pods: pods, now: t0}); d.kind != keepGoing {
		t.Fatalf("unchanged TF job: kind %d %s", d.kind, d.message)
	}
	job.Spec.ParameterServers = 1
	d := decide(gangState{job: job, pods: pods, now: t0})
	if d.kind != restartForDisruption || d.reason != mlv1.ReasonRescaled {
		t.Errorf("kind %d reason %s", d.kind, d.reason)
	}
}

// The shape comes from the pods' labels, not their env: a pod whose env
// says another size but whose label agrees with the spec is not resized,
// and a TensorFlow gang re-forms when its cluster hash is stale (here a new
// masterPort, which moves every task's address).
func TestDecideRescaleFromLabels(t *testing.T) {
	job := jobWith(mlv1.RestartPolicyOnFailure, 0)
	pods := gang(job, -1)
	for _, p := range pods {
		for i := range p.Spec.Containers[0].Env {
			p.Spec.Containers[0].Env[i].Value = "99" // what a trimmed cache or an env edit would show
		}
	}
	if d := decide(gangState{job: job, pods: pods, now: t0}); d.kind != keepGoing {
		t.Errorf("labels agree with the spec: kind %d %s", d.kind, d.message)
	}
	job.Spec.NumWorkers = 3
	if d := decide(gangState{job: job, pods: pods, now: t0}); d.reason != mlv1.ReasonRescaled || !strings.Contains(d.message, "from 2 to 3") {
		t.Errorf("label 2, spec 3: %s %s", d.reason, d.message)
	}

	tf := jobWith(mlv1.RestartPolicyOnFailure, 0)
	tf.Spec.Framework = mlv1.FrameworkTensorFlow
	pods = gang(tf, -1)
	tf.Spec.Networking.MasterPort = 23456
	if d := decide(gangState{job: tf, pods: pods, now: t0}); d.reason != mlv1.ReasonRescaled || !strings.Contains(d.message, "TensorFlow cluster changed") {
		t.Errorf("stale TF cluster hash: %s %s", d.reason, d.message)
	}
}

// Pods created before the operator labelled the gang's shape carry no shape
// labels. Complete and unchanged, such a gang keeps going; a shrink shows
// through the ranks; and a pod missing from it (a grow, or more parameter
// servers) re-forms the gang, so no labelled pod joins a gang of unknown
// size.
func TestDecideRescaleOfUnlabelledPods(t *testing.T) {
	job := jobWith(mlv1.RestartPolicyOnFailure, 0)
	job.Spec.Framework = mlv1.FrameworkTensorFlow
	pods := gang(job, -1)
	for _, p := range pods {
		delete(p.Labels, mlv1.LabelNumWorkers)
		delete(p.Labels, mlv1.LabelTFClusterHash)
	}
	if d := decide(gangState{job: job, pods: pods, now: t0}); d.kind != keepGoing {
		t.Errorf("unchanged unlabelled gang: kind %d %s", d.kind, d.message)
	}
	shrunk := job.DeepCopy()
	shrunk.Spec.NumWorkers = 1
	if d := decide(gangState{job: shrunk, pods: pods, now: t0}); d.reason != mlv1.ReasonRescaled || !strings.Contains(d.message, "from 2 to 1") {
		t.Errorf("shrink of an unlabelled gang: %s %s", d.reason, d.message)
	}
	grown := job.DeepCopy()
	grown.Spec.NumWorkers = 4
	if d := decide(gangState{job: grown, pods: pods, now: t0}); d.reason != mlv1.ReasonRescaled || !strings.Contains(d.message, "bert-worker-2 is missing") {
		t.Errorf("grow of an unlabelled gang: %s %s", d.reason, d.message)
	}
	withPS := job.DeepCopy()
	withPS.Spec.ParameterServers = 1
	if d := decide(gangState{job: withPS, pods: pods, now: t0}); d.reason != mlv1.ReasonRescaled || !strings.Contains(d.message, "bert-ps-0 is missing") {
		t.Errorf("a parameter server added to an unlabelled gang: %s %s", d.reason, d.message)
	}
}

func TestDecideParameterServers(t *testing.T) {
	job := jobWith(mlv1.RestartPolicyOnFailure, 0)
	job.Spec.Framework, job.Spec.ParameterServers = mlv1.FrameworkTensorFlow, 1
	ps := desiredPSPod(job, 0, 0, &testCfg, false)
	ps.Status.Phase = corev1.PodRunning

	// Workers done, the parameter server still serving: complete.
	if d := decide(gangState{job: job, pods: succeededGang(job), ps: []*corev1.Pod{ps}, now: t0}); d.kind != complete {
		t.Errorf("kind %d (%s), want complete", d.kind, d.message)
	}
	// A failed parameter server restarts the gang like a failed rank.
	exited(1, "Error")(ps)
	d := decide(gangState{job: job, pods: gang(job, -1), ps: []*corev1.Pod{ps}, now: t0})
	if d.kind != restartForFailure || !strings.Contains(d.message, "ps 0 (pod bert-ps-0) failed") {
		t.Errorf("kind %d message %q", d.kind, d.message)
	}
}

func TestDecideRechecksNotReadyNodeAtGraceEnd(t *testing.T) {
	job := jobWith(mlv1.RestartPolicyOnFailure, 0)
	d := decide(gangState{job: job, pods: gang(job, 1, onNode("n1")), now: t0, nodeGrace: 2 * time.Minute,
		nodes: map[string]nodeInfo{"n1": {notReadySince: t0.Add(-30 * time.Second)}}})
	if want := t0.Add(90 * time.Second); !d.recheckAt.Equal(want) {
		t.Errorf("recheckAt = %s, want %s", d.recheckAt, want)
	}
}

func succeededGang(j *mlv1.TrainingJob) []*corev1.Pod {
	pods := gang(j, -1)
	for _, p := range pods {
		p.Status.Phase = corev1.PodSucceeded
	}
	return pods
}

func TestExitOf(t *testing.T) {
	p := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "UnexpectedAdmissionError"}}
	if code, why := exitOf(p); code != 0 || !strings.Contains(why, "UnexpectedAdmissionError") {
		t.Errorf("exitOf = %d %q", code, why)
	}
	p = gang(jobWith(mlv1.RestartPolicyOnFailure, 0), 0, exited(139, "Error"))[0]
	if code, why := exitOf(p); code != 139 || why != "exit code 139 (Error)" {
		t.Errorf("exitOf = %d %q", code, why)
	}
}

func TestPodNumWorkersAndLabels(t *testing.T) {
	job := jobWith(mlv1.RestartPolicyOnFailure, 2)
	job.Status.Disruptions = 1
	p := desiredWorkerPod(job, 1, job.Status.Attempt(), &testCfg, false)
	if podNumWorkers(p) != 2 || rankOf(p) != 1 || attemptOf(p) != 3 {
		t.Errorf("numWorkers=%d rank=%d attempt=%d", podNumWorkers(p), rankOf(p), attemptOf(p))
	}
	if p.Labels[mlv1.LabelRestartAttempt] != strconv.Itoa(3) || p.Labels[mlv1.LabelNumWorkers] != "2" {
		t.Errorf("labels %v", p.Labels)
	}
}

// A node is cordoned by spec.unschedulable or by the unschedulable
// NoSchedule taint alone; a gang is only exempt when its tolerations let
// the scheduler put it back on such a node.
func TestCordonOfAndTolerations(t *testing.T) {
	taint := func(key string, effect corev1.TaintEffect) *corev1.Node {
		return &corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: key, Effect: effect}}}}
	}
	for name, tc := range map[string]struct {
		node *corev1.Node
		want string
	}{
		"schedulable":                 {&corev1.Node{}, ""},
		"spec.unschedulable":          {&corev1.Node{Spec: corev1.NodeSpec{Unschedulable: true}}, "spec.unschedulable"},
		"the unschedulable taint":     {taint(corev1.TaintNodeUnschedulable, corev1.TaintEffectNoSchedule), "taint node.kubernetes.io/unschedulable"},
		"another NoSchedule taint":    {taint("nvidia.com/gpu", corev1.TaintEffectNoSchedule), ""},
		"the key with another effect": {taint(corev1.TaintNodeUnschedulable, corev1.TaintEffectPreferNoSchedule), ""},
	} {
		if got := cordonOf(tc.node); got != tc.want {
			t.Errorf("%s: cordonOf = %q, want %q", name, got, tc.want)
		}
	}
	for name, tc := range map[string]struct {
		tolerations []corev1.Toleration
		want        bool
	}{
		"none":                  {nil, false},
		"the GPU toleration":    {[]corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}, false},
		"everything":            {[]corev1.Toleration{{Operator: corev1.TolerationOpExists}}, true},
		"every NoExecute only":  {[]corev1.Toleration{{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}}, false},
		"the unschedulable key": {[]corev1.Toleration{{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists}}, true},
		"the key, Equal, no value": {[]corev1.Toleration{{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpEqual,
			Effect: corev1.TaintEffectNoSchedule}}, true},
		"the key, another value": {[]corev1.Toleration{{Key: corev1.TaintNodeUnschedulable, Value: "x"}}, false},
	} {
		if got := toleratesCordon(tc.tolerations); got != tc.want {
			t.Errorf("%s: toleratesCordon = %t, want %t", name, got, tc.want)
		}
	}
}
