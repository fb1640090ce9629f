//go:build chaos

package chaos

import (
	"fmt"
	"math/rand/v2"
	"strconv"

	"k8s.io/utils/ptr"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/test/testutil"
)

// outcome is what a job's simulated workers do (hack/kwok/stages.yaml).
type outcome string

const (
	// succeed: every rank exits 0.
	succeed outcome = "succeed"
	// retryThenSucceed: one rank exits with a retryable code in attempt 0
	// only; the gang restarts once (a failure) and attempt 1 completes.
	retryThenSucceed outcome = "retryable-then-succeed"
	// retryExhausted: one rank exits with a retryable code in every
	// attempt; backoffLimit 1 allows one restart, the second failure fails.
	retryExhausted outcome = "retryable-exhausted"
	// permanent: one rank exits 1..127 under restartPolicy ExitCode.
	permanent outcome = "permanent-exit-code"
	// evicted: the "kubelet" evicts one rank in attempt 0 (a disruption);
	// backoffLimit 0 proves the restart spends no retry budget.
	evicted outcome = "eviction"
)

// outcomes and their weights (percent) in a run.
var outcomes = []struct {
	o      outcome
	weight int
}{
	{succeed, 35}, {retryThenSucceed, 15}, {retryExhausted, 10}, {permanent, 15}, {evicted, 25},
}

// checkpointKind is what the job does with its checkpoint PVC.
type checkpointKind string

const (
	noCheckpoint   checkpointKind = "none"
	retainedPVC    checkpointKind = "pvc-retained"
	notRetainedPVC checkpointKind = "pvc-deleted"
)

// expectation is the terminal status an outcome implies.
type expectation struct {
	state       mlv1.TrainingJobState
	reason      string // of the Failed condition; "" for Completed
	restarts    int32
	disruptions int32
}

// plan is one TrainingJob of the run: what it is and what it must end as.
type plan struct {
	name       string
	phase      string
	ranks      int32
	outcome    outcome
	rank       int32 // the rank that fails or is evicted
	exitCode   int
	policy     mlv1.RestartPolicy
	backoff    int32
	checkpoint checkpointKind
	sim        map[string]string
	want       expectation
}

func (p *plan) String() string {
	s := fmt.Sprintf("%s: %d ranks, %s, restartPolicy %s, backoffLimit %d, checkpoint %s",
		p.name, p.ranks, p.outcome, p.policy, p.backoff, p.checkpoint)
	if p.outcome != succeed {
		s += fmt.Sprintf(", rank %d", p.rank)
	}
	if p.exitCode != 0 {
		s += fmt.Sprintf(", exit code %d", p.exitCode)
	}
	return s
}

// secs is a random whole number of seconds in [lo, hi] as a Go duration.
func secs(rng *rand.Rand, lo, hi int) string {
	return strconv.Itoa(lo+rng.IntN(hi-lo+1)) + "s"
}

// newPlan draws job i of a run from rng: size, outcome, timings, restart
// policy and checkpoint handling, and derives its expected end.
func newPlan(rng *rand.Rand, i int, phase string, maxRanks int) *plan {
	p := &plan{phase: phase, ranks: int32(1 + rng.IntN(maxRanks))}
	n := rng.IntN(100)
	for _, o := range outcomes {
		if n < o.weight {
			p.outcome = o.o
			break
		}
		n -= o.weight
	}
	p.name = fmt.Sprintf("chaos-%03d", i)
	p.rank = int32(rng.IntN(int(p.ranks)))
	p.checkpoint = []checkpointKind{noCheckpoint, retainedPVC, notRetainedPVC}[rng.IntN(3)]
	p.sim = map[string]string{"sim.ml.example.com/complete-after": secs(rng, 3, 8)}
	rank := strconv.Itoa(int(p.rank))
	p.policy = []mlv1.RestartPolicy{mlv1.RestartPolicyOnFailure, mlv1.RestartPolicyExitCode}[rng.IntN(2)]
	p.backoff = int32(rng.IntN(3))

	switch p.outcome {
	case succeed:
		p.want = expectation{state: mlv1.StateCompleted}
	case retryThenSucceed:
		p.exitCode = 128 + rng.IntN(128)
		p.backoff = 1 + int32(rng.IntN(2))
		p.sim["sim.ml.example.com/fail-rank"] = rank
		p.sim["sim.ml.example.com/fail-attempt"] = "0"
		p.sim["sim.ml.example.com/fail-after"] = secs(rng, 1, 4)
		p.sim["sim.ml.example.com/exit-code"] = strconv.Itoa(p.exitCode)
		p.want = expectation{state: mlv1.StateCompleted, restarts: 1}
	case retryExhausted:
		p.exitCode = 128 + rng.IntN(128)
		p.backoff = 1
		p.sim["sim.ml.example.com/fail-rank"] = rank
		p.sim["sim.ml.example.com/fail-after"] = secs(rng, 1, 4)
		p.sim["sim.ml.example.com/exit-code"] = strconv.Itoa(p.exitCode)
		p.want = expectation{state: mlv1.StateFailed, reason: mlv1.ReasonBackoffLimitExceeded, restarts: 1}
	case permanent:
		p.exitCode = 1 + rng.IntN(127)
		p.policy = mlv1.RestartPolicyExitCode
		p.sim["sim.ml.example.com/fail-rank"] = rank
		p.sim["sim.ml.example.com/fail-after"] = secs(rng, 1, 4)
		p.sim["sim.ml.example.com/exit-code"] = strconv.Itoa(p.exitCode)
		p.want = expectation{state: mlv1.StateFailed, reason: mlv1.ReasonPermanentExitCode}
	case evicted:
		p.backoff = 0
		p.sim["sim.ml.example.com/evict-rank"] = rank
		p.sim["sim.ml.example.com/evict-attempt"] = "0"
		p.sim["sim.ml.example.com/evict-after"] = secs(rng, 1, 4)
		p.want = expectation{state: mlv1.StateCompleted, disruptions: 1}
	}
	return p
}

// job is the TrainingJob of a plan: CPU-only ranks (no GPU capacity to wait
// for), an explicit image (the webhooks, which would default it, are off).
func (p *plan) job(namespace string) *mlv1.TrainingJob {
	w := testutil.TrainingJob(p.name, namespace).
		Image("example.com/trainer:1").
		Workers(p.ranks).
		GPUs(0).
		RestartPolicy(p.policy).
		BackoffLimit(p.backoff)
	switch p.checkpoint {
	case noCheckpoint:
		w.Spec.Checkpoint.Enabled = ptr.To(false)
	case retainedPVC:
		w.RetainCheckpoints(true)
	case notRetainedPVC:
		w.RetainCheckpoints(false)
	}
	tj := w.Label("chaos.ml.example.com/phase", p.phase).Obj()
	tj.Spec.Template.Annotations = p.sim
	return tj
}
