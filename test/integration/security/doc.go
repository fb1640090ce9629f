// Package security enforces the security posture of what the operator runs
// and creates (issue 10, item 4), on every install path (kustomize
// config/default and config/manager, and the OLM bundle's CSV):
//
//   - the manager pod passes the Pod Security Standard "restricted", checked
//     with the Pod Security Admission library itself, with seccomp
//     RuntimeDefault, a read-only root filesystem and every capability
//     dropped (manager_test.go);
//   - the manager image runs as a numeric non-root user on a distroless
//     base (image_test.go, which parses the Dockerfile);
//   - RBAC: the generated ClusterRole (config/rbac/role.yaml), every role of
//     the kustomize install and what the CSV grants have no wildcards, no
//     Secrets and no escalate, bind or impersonate (rbac_test.go);
//   - the manager's NetworkPolicies admit only the webhook and metrics ports
//     the manager's args configure (networkpolicy_test.go);
//   - worker pods (worker_test.go) and model server pods
//     (modelserver_test.go) are restricted unless the user's template asks
//     for more;
//   - the real API server's Pod Security admission, enforcing "restricted"
//     in a namespace, admits all of these pods (server-side dry run) and
//     refuses a worker whose template asks for more (admission_test.go);
//   - the real manager, with its default options against a real API server,
//     serves /metrics over HTTPS only to callers that authenticate and are
//     authorized (metrics_test.go).
//
// test/integration/packaging checks the same install paths for packaging (the bundle
// validators, the overlays); this package is the one place the posture is
// asserted as a whole.
package security
