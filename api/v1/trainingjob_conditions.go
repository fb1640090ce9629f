package v1

// The conditions, reasons and event reasons a TrainingJob shows. Their
// strings are part of the contract: docs/operations.md documents each one
// (test/docs checks it), and alerts and scripts match on them.

// Condition types of a TrainingJob.
const (
	TrainingJobCreated    = "Created"
	TrainingJobRunning    = "Running"
	TrainingJobRestarting = "Restarting"
	TrainingJobSuspended  = "Suspended"
	TrainingJobSucceeded  = "Succeeded"
	TrainingJobFailed     = "Failed"
	// TrainingJobProgressAvailable says whether rank 0's progress endpoint
	// could be read. It never affects the job's state.
	TrainingJobProgressAvailable = "ProgressAvailable"
	// TrainingJobMLflowTracking says whether the job's MLflow run is
	// tracked. It never affects the job's state: an MLflow outage never
	// blocks or fails a job.
	TrainingJobMLflowTracking = "MLflowTracking"
	// TrainingJobStalled says whether rank 0's progress stopped for longer
	// than spec.failurePolicy.stallTimeout. Only jobs with a stall timeout
	// have it.
	TrainingJobStalled = "Stalled"
)

// Reasons of the Created condition.
const (
	// ReasonResourcesCreated: the Service, ConfigMap and checkpoint PVC exist.
	ReasonResourcesCreated = "ResourcesCreated"
	// ReasonFailedCreate (Created=False, or Running=False for pods): the
	// API server refused to create a child (quota, Pod Security, another
	// admission webhook, an invalid volume, a missing ServiceAccount); the
	// message quotes it. Retried every backoffBase.
	ReasonFailedCreate = "FailedCreate"
)

// Reasons of the Running condition (besides Restarting, while the gang
// restarts, and Suspended).
const (
	// ReasonWorkersPending: not every rank is running yet.
	ReasonWorkersPending = "WorkersPending"
	// ReasonUnschedulable: a rank's pod cannot be scheduled (the scheduler's
	// message, e.g. the resource that is short, is in the condition).
	ReasonUnschedulable = "Unschedulable"
	// ReasonContainerCannotStart: a rank's container waits on something
	// the kubelet cannot get past by itself (CreateContainerConfigError,
	// such as a root image under runAsNonRoot; an image that cannot be
	// pulled); the message is the kubelet's.
	ReasonContainerCannotStart = "ContainerCannotStart"
	// ReasonAllWorkersRunning: every rank is running.
	ReasonAllWorkersRunning = "AllWorkersRunning"
	// ReasonJobFinished: Running (and Restarting) is False because the job finished.
	ReasonJobFinished = "JobFinished"
)

// Reasons of the Restarting condition, of the restart events and of the
// trainingjob_restarts_total metric: a failure (counted against
// backoffLimit), a disruption or a placement timeout (neither counted).
const (
	// ReasonWorkerFailed: a rank exited non-zero and the gang restarts (a failure).
	ReasonWorkerFailed = "WorkerFailed"
	// ReasonPreempted: a rank was preempted (a disruption).
	ReasonPreempted = "Preempted"
	// ReasonEvicted: a rank was evicted (a disruption).
	ReasonEvicted = "Evicted"
	// ReasonNodeLost: a rank's node is gone or NotReady past the grace period (a disruption).
	ReasonNodeLost = "NodeLost"
	// ReasonNodeCordoned: a rank's node was cordoned for a drain
	// (spec.unschedulable, or the node.kubernetes.io/unschedulable taint);
	// the gang is ended gracefully before the drain evicts it (a disruption).
	ReasonNodeCordoned = "NodeCordoned"
	// ReasonPodDeleted: a rank's pod was deleted by someone else (a disruption).
	ReasonPodDeleted = "PodDeleted"
	// ReasonRescaled: numWorkers (or a TensorFlow job's cluster) changed
	// while the gang ran (a disruption).
	ReasonRescaled = "Rescaled"
	// ReasonResized: an elastic gang (spec.elastic) shrinks to the ranks
	// that can be placed, or grows back to numWorkers at a checkpoint (a
	// disruption; status.worldSize shows the new size).
	ReasonResized = "Resized"
	// ReasonPlacementTimeout: a rank was still unschedulable when
	// spec.scheduling.placementTimeout expired; the whole gang is released
	// and retried (counted in placementTimeouts, not against backoffLimit).
	ReasonPlacementTimeout = "PlacementTimeout"
	// ReasonStalled: rank 0's progress did not move for
	// spec.failurePolicy.stallTimeout (also the Stalled condition's reason
	// when True, and the Failed reason under stallAction Fail). A failure
	// under stallAction Restart, a disruption under RestartUncounted.
	ReasonStalled = "Stalled"
	// ReasonGangRecreated: Restarting is False, the restarted gang's pods were created.
	ReasonGangRecreated = "GangRecreated"
)

// Reasons of the Failed condition and of the trainingjob_failed_total metric.
const (
	// ReasonBackoffLimitExceeded: a rank failed after backoffLimit gang restarts.
	ReasonBackoffLimitExceeded = "BackoffLimitExceeded"
	// ReasonPermanentExitCode: restartPolicy ExitCode and a rank exited 1..127.
	ReasonPermanentExitCode = "PermanentExitCode"
	// ReasonRestartPolicyNever: restartPolicy Never and a rank failed.
	ReasonRestartPolicyNever = "RestartPolicyNever"
	// ReasonDeadlineExceeded: runPolicy.activeDeadlineSeconds passed.
	ReasonDeadlineExceeded = "DeadlineExceeded"
	// ReasonInvalidSpec: the job cannot run as written (for example no image).
	ReasonInvalidSpec = "InvalidSpec"
)

// Reasons of the Succeeded condition.
const (
	// ReasonAllWorkersSucceeded: every rank exited 0.
	ReasonAllWorkersSucceeded = "AllWorkersSucceeded"
)

// Reasons of the Suspended condition.
const (
	// ReasonSuspended: spec.suspend is true.
	ReasonSuspended = "Suspended"
	// ReasonResumed: spec.suspend went back to false.
	ReasonResumed = "Resumed"
)

// Reasons of the ProgressAvailable condition.
const (
	// ReasonScraped: rank 0's metrics endpoint was read.
	ReasonScraped = "Scraped"
	// ReasonScrapeFailed: rank 0's metrics endpoint could not be read; retried with backoff.
	ReasonScrapeFailed = "ScrapeFailed"
)

// Reasons of the Stalled condition besides ReasonStalled.
const (
	// ReasonProgressing: rank 0's progress moved within the stall timeout
	// (or the current attempt has not reported any yet).
	ReasonProgressing = "Progressing"
)

// Reasons of the MLflowTracking condition.
const (
	// ReasonRunTracked: the run exists and the last call to MLflow worked.
	ReasonRunTracked = "RunTracked"
	// ReasonRunEnded: the run was given its final status.
	ReasonRunEnded = "RunEnded"
	// ReasonTrackingFailed: the last call to MLflow failed; retried with backoff.
	ReasonTrackingFailed = "TrackingFailed"
)

// Reasons of the events on a TrainingJob, besides the restart reasons
// (a gang restart's event has the Restarting condition's reason).
const (
	// EventCreated: the job's (or ModelDeployment's) children were created.
	EventCreated = "Created"
	// EventFailedCreate (Warning): the API server refused to create a
	// child; the note quotes it, as the Job controller's FailedCreate does.
	EventFailedCreate = "FailedCreate"
	// EventWorkersCreated: a pass created pods of the gang.
	EventWorkersCreated = "WorkersCreated"
	// EventForceDeleted: pods stuck terminating on lost nodes were force-deleted.
	EventForceDeleted = "ForceDeleted"
	// EventRunning: every rank is running.
	EventRunning = "Running"
	// EventSuspended: spec.suspend is true and the gang was deleted.
	EventSuspended = "Suspended"
	// EventResumed: spec.suspend is false again and the gang is recreated.
	EventResumed = "Resumed"
	// EventCompleted: the job completed.
	EventCompleted = "Completed"
	// EventFailed: the job failed.
	EventFailed = "Failed"
	// EventMLflowRunCreated: the job's MLflow run was created.
	EventMLflowRunCreated = "MLflowRunCreated"
	// EventMLflowRunEnded: a deleted job's MLflow run was ended.
	EventMLflowRunEnded = "MLflowRunEnded"
	// EventMLflowRunNotEnded: a deleted job's MLflow run could not be ended.
	EventMLflowRunNotEnded = "MLflowRunNotEnded"
)
