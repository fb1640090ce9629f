// Package integration tests the admission and conversion webhooks through a
// real kube-apiserver (envtest): the webhook configurations from
// config/webhook and the TrainingJob CRD's conversion webhook point at the
// webhooks served by the test process.
package integration
