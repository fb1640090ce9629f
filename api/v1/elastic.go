package v1

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Elastic gangs (spec.elastic, docs/trainingjob.md#elastic-gangs): a
// pytorch job whose ranks were lost to node loss or preemption, and whose
// replacements cannot be placed, goes on with the ranks that can be, as
// long as there are at least minWorkers; it grows back to numWorkers at a
// checkpoint boundary. The bounds, the rules and the names torchrun reads
// live here; the webhook, the CRD's markers and the controller use them.

// Bounds of spec.elastic.minWorkers and maxWorkers: those of numWorkers.
// The CRD's markers on ElasticSpec repeat them (TestBoundsMatchTheSchema).
const (
	MinElasticWorkers = MinNumWorkers
	MaxElasticWorkers = MaxNumWorkers
)

// ElasticShrinkGrace is how long, after an elastic job's attempt created
// its pods (status.placementStartTime), a rank may stay unschedulable
// before the gang goes on without it: the next attempt runs with the ranks
// that were placed, if they are at least minWorkers. When the job's
// placement timeout applies (status.gangPlacement PlacementTimeout) and is
// shorter, it is used instead, so that a shrink always comes before a
// release.
const ElasticShrinkGrace = 2 * time.Minute

// Torchrun's elastic rendezvous, driven by the env torchrun reads (each of
// its flags as PET_<FLAG>): --rdzv-backend, --rdzv-endpoint, --rdzv-id,
// --rdzv-conf and --max-restarts. PET_NNODES (EnvPETNNodes) holds
// "<min>:<max>" for an elastic job. These names are the operator's in an
// elastic job's pods only (ElasticEnvNames); other jobs may set them in
// spec.env.
const (
	EnvPETRdzvBackend  = EnvPrefixTorchrun + "RDZV_BACKEND"
	EnvPETRdzvEndpoint = EnvPrefixTorchrun + "RDZV_ENDPOINT"
	EnvPETRdzvID       = EnvPrefixTorchrun + "RDZV_ID"
	EnvPETRdzvConf     = EnvPrefixTorchrun + "RDZV_CONF"
	EnvPETMaxRestarts  = EnvPrefixTorchrun + "MAX_RESTARTS"
)

// ElasticRendezvousBackend is torchrun's rendezvous backend for an elastic
// gang: c10d, a TCPStore that the agent on rank 0's host (the endpoint's
// host) serves.
const ElasticRendezvousBackend = "c10d"

// ElasticRendezvousConf is PET_RDZV_CONF (torchrun's --rdzv-conf) for a
// rank of an elastic gang: rank 0's agent hosts the c10d store
// (is_host=true), every other rank's connects to it (is_host=false).
// Left to itself, torchrun decides by comparing the endpoint's host with
// the machine's host name and canonical name; in a pod those are
// "<job>-worker-0" and "<job>-worker-0.<job>-workers.<ns>.svc.<cluster
// domain>", neither of which is the endpoint's "...svc", so no agent
// hosted the store and every rank timed out connecting to it (found on the
// real node, docs/decisions.md).
func ElasticRendezvousConf(rank int32) string {
	return "is_host=" + strconv.FormatBool(rank == 0)
}

// ElasticMaxRestarts is torchrun's --max-restarts for an elastic gang: the
// operator restarts gangs, torchrun does not restart its workers.
const ElasticMaxRestarts = 0

// ElasticEnvNames are the variables the operator sets in an elastic job's
// pods on top of ReservedEnvNames; such a job may not set them in spec.env.
var ElasticEnvNames = []string{EnvPETRdzvBackend, EnvPETRdzvEndpoint, EnvPETRdzvID, EnvPETRdzvConf, EnvPETMaxRestarts}

// ReservesEnvName reports whether the operator sets the variable name in
// this job's pods, so its spec.env may not: the reserved names, and for an
// elastic job the rendezvous names too.
func (s *TrainingJobSpec) ReservesEnvName(name string) bool {
	return IsReservedEnvName(name) || (s.Elastic != nil && slices.Contains(ElasticEnvNames, name))
}

// TorchrunNNodes is PET_NNODES (torchrun's --nnodes) for an attempt of
// attemptWorkers ranks: "<minWorkers>:<maxWorkers>" for an elastic job,
// else the attempt's ranks.
func (s *TrainingJobSpec) TorchrunNNodes(attemptWorkers int32) string {
	if e := s.Elastic; e != nil {
		return fmt.Sprintf("%d:%d", e.MinWorkers, e.MaxWorkers)
	}
	return strconv.Itoa(int(attemptWorkers))
}

// ElasticRendezvousEndpoint is PET_RDZV_ENDPOINT: rank 0's stable DNS name
// through the headless Service (MASTER_ADDR) and the rendezvous port.
func (s *TrainingJobSpec) ElasticRendezvousEndpoint(job, namespace string) string {
	return MasterAddr(job, namespace) + ":" + strconv.Itoa(int(s.EffectiveMasterPort()))
}

// AttemptWorkers is the number of ranks of the job's current attempt.
// Without spec.elastic it is numWorkers. With it, it is
// status.worldSize.current (set when the gang shrinks or grows) while
// status.worldSize.desired is still numWorkers and current lies between
// minWorkers and numWorkers; otherwise numWorkers. So a job never shrunk
// runs at numWorkers, and a numWorkers change re-forms the gang at the new
// size at once (reason Rescaled), as it does for a fixed-size job.
func (j *TrainingJob) AttemptWorkers() int32 {
	want := j.Spec.EffectiveNumWorkers()
	e, ws := j.Spec.Elastic, j.Status.WorldSize
	if e == nil || ws == nil || ws.Desired != want || ws.Current < e.MinWorkers || ws.Current > want {
		return want
	}
	return ws.Current
}

// AttemptWorldSize is WORLD_SIZE of the current attempt: its ranks x
// nprocPerNode.
func (j *TrainingJob) AttemptWorldSize() int32 {
	return j.AttemptWorkers() * j.Spec.EffectiveNProcPerNode()
}

// AttemptGangSize is the number of pods of the current attempt: its ranks
// and, for tensorflow, the parameter servers.
func (j *TrainingJob) AttemptGangSize() int32 {
	n := j.AttemptWorkers()
	if j.Spec.EffectiveFramework() == FrameworkTensorFlow {
		n += j.Spec.ParameterServers
	}
	return n
}

// ObservedWorldSize is status.worldSize for the current attempt.
func (j *TrainingJob) ObservedWorldSize() *WorldSize {
	return &WorldSize{Current: j.AttemptWorkers(), Desired: j.Spec.EffectiveNumWorkers()}
}

// ValidateElastic is everything wrong with spec.elastic (p is the spec's
// path): each bound outside MinElasticWorkers..MaxElasticWorkers,
// minWorkers above maxWorkers, a framework other than pytorch, and a
// numWorkers outside minWorkers..maxWorkers. The CRD's CEL rules on
// ElasticSpec and TrainingJobSpec spell the same rules.
func (s *TrainingJobSpec) ValidateElastic(p *field.Path) field.ErrorList {
	e := s.Elastic
	if e == nil {
		return nil
	}
	ep := p.Child("elastic")
	var errs field.ErrorList
	for _, f := range []struct {
		name string
		v    int32
	}{{"minWorkers", e.MinWorkers}, {"maxWorkers", e.MaxWorkers}} {
		if f.v < MinElasticWorkers || f.v > MaxElasticWorkers {
			errs = append(errs, field.Invalid(ep.Child(f.name), f.v,
				fmt.Sprintf("must be between %d and %d", MinElasticWorkers, MaxElasticWorkers)))
		}
	}
	if len(errs) > 0 {
		return errs
	}
	if e.MinWorkers > e.MaxWorkers {
		return field.ErrorList{field.Invalid(ep.Child("minWorkers"), e.MinWorkers,
			fmt.Sprintf("must be less than or equal to %s (%d)", ep.Child("maxWorkers"), e.MaxWorkers))}
	}
	if fw := s.EffectiveFramework(); fw != FrameworkPyTorch {
		errs = append(errs, field.Forbidden(ep, fmt.Sprintf(
			"only supported with framework pytorch (torchrun's elastic rendezvous), not %s", fw)))
	}
	if n := s.NumWorkers; n >= MinNumWorkers && n <= MaxNumWorkers && (n < e.MinWorkers || n > e.MaxWorkers) {
		errs = append(errs, field.Invalid(p.Child("numWorkers"), n, fmt.Sprintf(
			"must be between %s (%d) and %s (%d): it is the size an elastic gang starts at and grows back to",
			ep.Child("minWorkers"), e.MinWorkers, ep.Child("maxWorkers"), e.MaxWorkers)))
	}
	return errs
}
