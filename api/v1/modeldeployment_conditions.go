package v1

// The conditions, reasons, event reasons and history outcomes a
// ModelDeployment shows. Their strings are part of the contract:
// docs/operations.md documents each reason (test/docs checks it).

// Condition types of a ModelDeployment.
const (
	ModelDeploymentReady       = "Ready"
	ModelDeploymentHealthy     = "Healthy"
	ModelDeploymentScaled      = "Scaled"
	ModelDeploymentProgressing = "Progressing"
	ModelDeploymentRolledBack  = "RolledBack"
	// ModelDeploymentTrafficRouted says whether the router in use splits
	// traffic by the versions' weights.
	ModelDeploymentTrafficRouted = "TrafficRouted"
)

// Reasons of the Ready condition.
const (
	// ReasonServing: at least one version has a Ready pod.
	ReasonServing = "Serving"
	// ReasonNoVersionReady: no version has a Ready pod yet.
	ReasonNoVersionReady = "NoVersionReady"
)

// Reasons of the Healthy condition (besides the failure reasons below).
const (
	// ReasonHealthy: every rolled-out version has at least 80% of its
	// replicas Ready (versions not Ready yet are named, not judged).
	// Healthy=False also has ReasonFailedCreate and
	// ReasonContainerCannotStart: a version's pods cannot be created or
	// started.
	ReasonHealthy = "Healthy"
	// ReasonDegraded: a version has fewer than 80% of its replicas Ready.
	ReasonDegraded = "Degraded"
)

// Reasons of the Scaled condition.
const (
	// ReasonScalingComplete: every version has its desired replicas.
	ReasonScalingComplete = "ScalingComplete"
	// ReasonScaling: a version is still scaling.
	ReasonScaling = "Scaling"
)

// Reasons of the Progressing condition.
const (
	// ReasonRolloutInProgress: a version is rolling out.
	ReasonRolloutInProgress = "RolloutInProgress"
	// ReasonRolloutComplete: every version is rolled out.
	ReasonRolloutComplete = "RolloutComplete"
	// ReasonDraining: removed versions are draining.
	ReasonDraining = "Draining"
	// ReasonRolloutFailed: a version of this generation was rolled back; a spec change retries it.
	ReasonRolloutFailed = "RolloutFailed"
	// Progressing=False also has ReasonFailedCreate (the API server
	// refused a child, or the ReplicaSet's pods: quota, Pod Security, a
	// webhook) and ReasonContainerCannotStart (the kubelet will not start
	// a version's container, such as an image whose USER is a name under
	// runAsNonRoot), each quoting the message; they are defined with the
	// TrainingJob's reasons. A FailedCreate also gives a Warning event
	// EventFailedCreate.
)

// Reasons of the RolledBack condition (besides the failure reasons below).
const (
	// ReasonNoRollback: no version is rolled back.
	ReasonNoRollback = "NoRollback"
)

// Reasons of the TrafficRouted condition.
const (
	// ReasonWeightedRoutes: an HTTPRoute attached to a Gateway, or a
	// VirtualService bound to a gateway or serving a mesh namespace, splits
	// traffic by weight.
	ReasonWeightedRoutes = "WeightedRoutes"
	// ReasonReplicaCounts: router service; the weights are approximated by
	// replica counts behind the stable Service.
	ReasonReplicaCounts = "ReplicaCounts"
	// ReasonNoGateway: router gatewayapi with no Gateway named; the HTTPRoute
	// has no parentRefs and routes nothing.
	ReasonNoGateway = "NoGateway"
	// ReasonOutsideMesh: router istio with no gateway, in a namespace outside
	// Istio's mesh; the VirtualService routes nothing for clients outside it.
	ReasonOutsideMesh = "OutsideMesh"
	// ReasonRouterNotInstalled: the named router's API is not served by the
	// cluster; its objects are not written.
	ReasonRouterNotInstalled = "RouterNotInstalled"
)

// Reasons a version's rollout fails. They appear in status.failedVersions,
// the Healthy, Progressing and RolledBack conditions and the rollback events.
const (
	// ReasonProgressDeadlineExceeded: no Ready pod within the progress deadline.
	ReasonProgressDeadlineExceeded = "ProgressDeadlineExceeded"
	// ReasonCrashLoop: pods keep crashing past the failure threshold.
	ReasonCrashLoop = "CrashLoop"
	// ReasonErrorRate: Prometheus reports an error rate over the limit.
	ReasonErrorRate = "ErrorRate"
	// ReasonLatency: Prometheus reports a latency over the limit.
	ReasonLatency = "Latency"
)

// ReasonModelFetchFailed: the storage initializer of a version's pod could
// not fetch modelPath (Progressing=False and Healthy=False, quoting the
// initializer's one-line termination message). The kubelet retries it
// with a back-off; the progress deadline rolls the version back.
const ReasonModelFetchFailed = "ModelFetchFailed"

// Reasons of the events on a ModelDeployment, besides EventCreated.
const (
	// EventScaled: a version's replicas changed.
	EventScaled = "Scaled"
	// EventDegraded: the Healthy condition turned False.
	EventDegraded = "Degraded"
	// EventRemediated: crash-looping pods were deleted.
	EventRemediated = "Remediated"
	// EventRolledBack: a failing version was rolled back.
	EventRolledBack = "RolledBack"
	// EventPromoted: a generation finished rolling out.
	EventPromoted = "Promoted"
	// EventVersionRemoved: a removed version drained and was deleted.
	EventVersionRemoved = "VersionRemoved"
)

// Outcomes of a status.history entry.
const (
	// OutcomeProgressing: the version set is rolling out.
	OutcomeProgressing = "Progressing"
	// OutcomeSucceeded: it rolled out.
	OutcomeSucceeded = "Succeeded"
	// OutcomeRolledBack: a version of it was rolled back.
	OutcomeRolledBack = "RolledBack"
	// OutcomeSuperseded: a newer version set replaced it before it rolled out.
	OutcomeSuperseded = "Superseded"
)
