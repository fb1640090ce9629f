// Package rules holds the defaulting and validation rules the admission
// webhooks enforce (DefaultTrainingJob, ValidateTrainingJob,
// TrainingJobProblems, and the same for ModelDeployment), the checks on a
// request's raw JSON (explicit zeros, undecodable values) and the v1alpha1
// wording of refusals, free of admission plumbing: package webhooks adapts
// them to controller-runtime's admission interfaces.
//
// Keeping them apart lets them be unit-tested and fuzzed without
// controller-runtime's webhook server or client-go: fuzzing rebuilds every
// dependency of a fuzzed package's test binary with coverage
// instrumentation, and this package's test binary has few.
package rules
