//go:build e2e_real

package e2ereal

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ml-operator/ml-operator/internal/realnode"
)

// rbacRefusal is how kube-apiserver words an RBAC denial.
var rbacRefusal = regexp.MustCompile(`cannot \w+ resource "`)

// testManagerRBAC runs after the workloads: every API call the manager made
// as its own ServiceAccount (kube-apiserver's audit log) was allowed by the
// RBAC that `make deploy` installed (the audit's authorization decision),
// and its log quotes no RBAC refusal. A verb missing from config/rbac fails
// here, named (internal/realnode's TestReadAuditFindsTheOperatorsForbiddenCalls
// shows how it is named).
func testManagerRBAC(t *testing.T) {
	calls, err := realnode.ReadAudit(node.AuditLog(), realnode.OperatorServiceAccount)
	require.NoError(t, err)
	require.NotEmpty(t, calls, "the audit log has no call of %s", realnode.OperatorServiceAccount)
	perms := realnode.Permissions(calls)
	t.Logf("%d API calls of %s, %d distinct permissions:\n  %s", len(calls), realnode.OperatorServiceAccount, len(perms), strings.Join(perms, "\n  "))
	denied := realnode.Forbidden(calls)
	require.Empty(t, denied, "RBAC refused the manager (config/rbac lacks these verbs):\n  %s", strings.Join(denied, "\n  "))
	// The calls cover what the workloads needed: pods (a restarted gang
	// goes in one deletecollection), services, the
	// model servers' Deployments and HPAs, status writes, events.
	for _, want := range []string{"create core/pods", "deletecollection core/pods", "patch apps/deployments", "patch autoscaling/horizontalpodautoscalers", "update ml.example.com/trainingjobs/status", "watch core/pods", "watch ml.example.com/trainingjobs"} {
		require.Contains(t, perms, want)
	}

	// The manager's own log, which quotes RBAC's refusal (`User "..."
	// cannot patch resource "..."`). A "forbidden" from admission (the
	// seeds' namespaces being deleted under a reconcile) is not RBAC's.
	pods := managerPods(t)
	for _, p := range pods {
		log, err := node.PodLog(context.Background(), realnode.OperatorNamespace, p)
		require.NoError(t, err)
		for _, line := range strings.Split(log, "\n") {
			require.NotRegexp(t, rbacRefusal, line, "manager %s", p)
		}
	}
}
