// Package security enforces the pod security posture of what the operator
// creates (issue 10, item 4): worker pods and model server pods pass the Pod
// Security Standard "restricted", checked with the Pod Security Admission
// library itself, unless the user's template asks for more. The manager pod,
// RBAC, NetworkPolicy, metrics and Dockerfile checks live in test/packaging.
package security
