// Package security enforces the security posture of what the operator runs
// and creates (issue 10, item 4): worker pods pass the Pod Security Standard
// "restricted", checked with the Pod Security Admission library itself,
// unless the user's template asks for more; and the manager, with its
// default options against a real API server, serves /metrics over HTTPS
// only to callers that authenticate and are authorized. The manager pod,
// RBAC, NetworkPolicy and Dockerfile checks live in test/packaging.
package security
