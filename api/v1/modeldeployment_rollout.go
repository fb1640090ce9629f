package v1

import (
	"fmt"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RolloutStep is one stage of a stepped rollout.
type RolloutStep struct {
	// Weight is the share (0..100) of the traffic the new version set gets
	// at this step; the last promoted set keeps the rest. Each version's
	// weight is the mix of its weight in the two sets.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +required
	Weight int32 `json:"weight"`

	// Pause holds the step at least this long after its weight took effect
	// (the new versions with a weight have a Ready pod): 30s, 5m, 1h.
	// +kubebuilder:validation:Pattern=`^[1-9][0-9]*(s|m|h)$`
	// +optional
	Pause string `json:"pause,omitempty"`

	// Analysis judges the new versions at this step with rollout.analysis'
	// queries against rollout.maxErrorRate and rollout.maxLatencyMs. The
	// step ends once checks analyses in a row have passed; one that fails
	// aborts the rollout. Without it the step ends when its pause does.
	// +optional
	Analysis *StepAnalysis `json:"analysis,omitempty"`
}

// StepAnalysis is the analysis of one rollout step.
type StepAnalysis struct {
	// Checks is how many analyses, rollout.analysis.interval apart, must
	// pass before the next step. An analysis that cannot judge (no traffic
	// yet, Prometheus unreachable) neither passes nor fails.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +kubebuilder:default=1
	// +optional
	Checks int32 `json:"checks,omitempty"`
}

// RollbackStrategy is how rollout.rollbackTo moves the traffic.
// +kubebuilder:validation:Enum=Immediate;Steps
type RollbackStrategy string

// Rollback strategies.
const (
	// RollbackImmediate moves all the traffic to rollbackTo at once.
	RollbackImmediate RollbackStrategy = "Immediate"
	// RollbackSteps moves it through rollout.steps, with their analysis.
	RollbackSteps RollbackStrategy = "Steps"
)

// CanaryHeader is an HTTP header that routes a request to the canary version.
type CanaryHeader struct {
	// Name of the header (matched case-insensitively, as HTTP does).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9!#$%&'*+\-.^_|~]+$`
	// +required
	Name string `json:"name"`
	// Value the header must have, exactly.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	// +required
	Value string `json:"value"`
}

// AnnotationRollout is how a kubectl user steers a stepped rollout:
// "pause" holds it at its step until the annotation is removed; "promote"
// skips the remaining steps and their analysis; "abort" rolls the traffic
// back to the last promoted set. The operator removes promote and abort
// once it has acted on them.
const AnnotationRollout = "ml.example.com/rollout"

// Values of AnnotationRollout.
const (
	RolloutActionPause   = "pause"
	RolloutActionPromote = "promote"
	RolloutActionAbort   = "abort"
)

// RolloutPhase is where a stepped rollout is.
// +kubebuilder:validation:Enum=Progressing;Paused;Promoting;Promoted;Aborted
type RolloutPhase string

// Rollout phases.
const (
	// RolloutProgressing: the steps are running.
	RolloutProgressing RolloutPhase = "Progressing"
	// RolloutPaused: held at its step (the pause annotation, or a failed
	// analysis with autoRollback off).
	RolloutPaused RolloutPhase = "Paused"
	// RolloutPromoting: every step passed (or promote was asked for); the
	// new versions scale to their own capacity, and the last promoted set
	// keeps its capacity and share until they are fully Ready.
	RolloutPromoting RolloutPhase = "Promoting"
	// RolloutPromoted: the new version set serves as spec.versions asks.
	RolloutPromoted RolloutPhase = "Promoted"
	// RolloutAborted: an analysis failed, a new version failed its
	// rollout, or abort was asked for; the last promoted set serves.
	RolloutAborted RolloutPhase = "Aborted"
)

// Outcomes of an analysis.
const (
	AnalysisPassed       = "Passed"
	AnalysisFailed       = "Failed"
	AnalysisInconclusive = "Inconclusive"
)

// RolloutStatus is the progress of a stepped rollout.
type RolloutStatus struct {
	// Generation of the status.history entry (version set) being rolled out.
	Generation int64 `json:"generation"`
	// Phase: Progressing, Paused, Promoting, Promoted or Aborted.
	Phase RolloutPhase `json:"phase"`
	// Step is the index of the current step in rollout.steps (the number of
	// steps once they have all passed).
	Step int32 `json:"step"`
	// StepWeight is the new set's share at the current step.
	StepWeight int32 `json:"stepWeight"`
	// StepStartTime is when the current step's weight took effect.
	// +optional
	StepStartTime *metav1.Time `json:"stepStartTime,omitempty"`
	// ChecksPassed counts the current step's passed analyses.
	// +optional
	ChecksPassed int32 `json:"checksPassed,omitempty"`
	// LastCheckTime is when the current step was last analysed.
	// +optional
	LastCheckTime *metav1.Time `json:"lastCheckTime,omitempty"`
	// Stable are the weights of the last promoted set, which the rollout
	// starts from and an abort returns to.
	// +optional
	Stable []VersionWeight `json:"stable,omitempty"`
	// Canaries are the new versions: judged by the analysis, and the target
	// of traffic.canaryHeader.
	// +optional
	Canaries []string `json:"canaries,omitempty"`
	// Message says what the rollout waits for, or why it ended.
	// +optional
	Message string `json:"message,omitempty"`
	// Analyses are the last analyses of this rollout, newest first.
	// +kubebuilder:validation:MaxItems=10
	// +optional
	Analyses []AnalysisResult `json:"analyses,omitempty"`
}

// VersionWeight is a version's share of the traffic.
type VersionWeight struct {
	// Name of the version.
	Name string `json:"name"`
	// Weight in percent.
	Weight int32 `json:"weight"`
}

// AnalysisResult is one analysis of one version.
type AnalysisResult struct {
	// Time of the analysis.
	Time metav1.Time `json:"time"`
	// Step it was taken at.
	Step int32 `json:"step"`
	// Version judged.
	Version string `json:"version"`
	// Outcome: Passed, Failed or Inconclusive.
	Outcome string `json:"outcome"`
	// Metric that decided it: ErrorRate or Latency (when failed), or empty.
	// +optional
	Metric string `json:"metric,omitempty"`
	// Query sent to Prometheus for that metric.
	// +optional
	Query string `json:"query,omitempty"`
	// Value the query answered, as text.
	// +optional
	Value string `json:"value,omitempty"`
	// Threshold the value was held against, as text.
	// +optional
	Threshold string `json:"threshold,omitempty"`
	// Message for humans.
	// +optional
	Message string `json:"message,omitempty"`
}

// DefaultAnalysisInterval is the time between a step's analyses when
// rollout.analysis.interval is unset.
const DefaultAnalysisInterval = "30s"

// ParseShortDuration parses a duration of the form the API's pause, window
// and interval fields allow: a positive whole number of s, m or h.
func ParseShortDuration(s string) (time.Duration, error) {
	if len(s) < 2 {
		return 0, fmt.Errorf("%q is not a duration such as 30s, 5m or 1h", s)
	}
	n, err := strconv.ParseInt(s[:len(s)-1], 10, 32)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%q is not a duration such as 30s, 5m or 1h", s)
	}
	unit := map[byte]time.Duration{'s': time.Second, 'm': time.Minute, 'h': time.Hour}[s[len(s)-1]]
	if unit == 0 {
		return 0, fmt.Errorf("%q is not a duration such as 30s, 5m or 1h", s)
	}
	return time.Duration(n) * unit, nil
}

// EffectiveAnalysisInterval is rollout.analysis.interval, or 30s when unset
// (or, without the schema, unparsable).
func (s *ModelDeploymentSpec) EffectiveAnalysisInterval() time.Duration {
	if a := s.Rollout.Analysis; a != nil && a.Interval != "" {
		if d, err := ParseShortDuration(a.Interval); err == nil {
			return d
		}
	}
	return 30 * time.Second
}

// PauseDuration is the step's pause, 0 when unset (or unparsable).
func (s RolloutStep) PauseDuration() time.Duration {
	d, err := ParseShortDuration(s.Pause)
	if err != nil {
		return 0
	}
	return d
}

// EffectiveChecks is analysis.checks, 1 when unset; 0 without analysis.
func (s RolloutStep) EffectiveChecks() int32 {
	switch {
	case s.Analysis == nil:
		return 0
	case s.Analysis.Checks < 1:
		return 1
	}
	return s.Analysis.Checks
}

// EffectiveRollbackStrategy is rollout.rollbackStrategy, Immediate when unset.
func (s *ModelDeploymentSpec) EffectiveRollbackStrategy() RollbackStrategy {
	if s.Rollout.RollbackStrategy == "" {
		return RollbackImmediate
	}
	return s.Rollout.RollbackStrategy
}
