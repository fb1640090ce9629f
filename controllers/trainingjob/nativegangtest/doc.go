// Package nativegangtest runs the real manager (internal/manager) against
// an envtest API server that serves scheduling.k8s.io/v1alpha2, as a user
// bound only to the manager's generated RBAC. It is a package of its own:
// controller-runtime refuses a second controller of the same name in one
// process, so each package runs one manager.
package nativegangtest
