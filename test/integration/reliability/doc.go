// Package reliability shows that the TrainingJob and ModelDeployment
// reconcilers survive the API server's conflicts and transient errors
// (issue 10, item 2). Errors are injected with controller-runtime's
// interceptor client around a direct client of a real API server (envtest
// with the webhooks), and the reconcilers are used only through their public
// API, pass by pass, the way the controller's work queue would call them.
package reliability
