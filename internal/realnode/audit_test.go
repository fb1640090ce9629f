package realnode

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestReadAuditFindsTheOperatorsForbiddenCalls(t *testing.T) {
	log := `{"kind":"Event","stage":"ResponseComplete","verb":"list","user":{"username":"` + OperatorServiceAccount + `"},"objectRef":{"resource":"pods","apiVersion":"v1"},"responseStatus":{"code":200}}
{"kind":"Event","stage":"ResponseComplete","verb":"patch","user":{"username":"` + OperatorServiceAccount + `"},"objectRef":{"resource":"deployments","namespace":"ml","name":"fraud-v1","apiGroup":"apps","apiVersion":"v1"},"responseStatus":{"code":403,"reason":"Forbidden"},"annotations":{"authorization.k8s.io/decision":"forbid"}}
{"kind":"Event","stage":"ResponseComplete","verb":"patch","user":{"username":"` + OperatorServiceAccount + `"},"objectRef":{"resource":"deployments","namespace":"ml","name":"fraud-v2","apiGroup":"apps","apiVersion":"v1"},"responseStatus":{"code":403,"reason":"Forbidden"},"annotations":{"authorization.k8s.io/decision":"forbid"}}
{"kind":"Event","stage":"ResponseComplete","verb":"update","user":{"username":"` + OperatorServiceAccount + `"},"objectRef":{"resource":"trainingjobs","subresource":"status","namespace":"ml","name":"a","apiGroup":"ml.example.com"},"responseStatus":{"code":403},"annotations":{"authorization.k8s.io/decision":"forbid"}}
{"kind":"Event","auditID":"w1","stage":"ResponseStarted","verb":"watch","user":{"username":"` + OperatorServiceAccount + `"},"objectRef":{"resource":"pods"},"responseStatus":{"code":200}}
{"kind":"Event","auditID":"w2","stage":"ResponseStarted","verb":"watch","user":{"username":"` + OperatorServiceAccount + `"},"objectRef":{"resource":"services"},"responseStatus":{"code":200}}
{"kind":"Event","auditID":"w1","stage":"ResponseComplete","verb":"watch","user":{"username":"` + OperatorServiceAccount + `"},"objectRef":{"resource":"pods"},"responseStatus":{"code":200}}
{"kind":"Event","auditID":"w3","stage":"ResponseComplete","verb":"watch","user":{"username":"` + OperatorServiceAccount + `"},"objectRef":{"resource":"nodes"},"responseStatus":{"code":403},"annotations":{"authorization.k8s.io/decision":"forbid"}}
{"kind":"Event","stage":"ResponseComplete","verb":"create","user":{"username":"` + OperatorServiceAccount + `"},"objectRef":{"resource":"services","namespace":"gone","name":"x-workers","apiVersion":"v1"},"responseStatus":{"code":403,"reason":"Forbidden","message":"unable to create new content in namespace gone because it is being terminated"},"annotations":{"authorization.k8s.io/decision":"allow"}}
{"kind":"Event","stage":"ResponseComplete","verb":"get","user":{"username":"` + OperatorServiceAccount + `"},"responseStatus":{"code":200}}
{"kind":"Event","stage":"ResponseComplete","verb":"delete","user":{"username":"system:serviceaccount:ml-operator-system:default"},"objectRef":{"resource":"pods"},"responseStatus":{"code":403}}
`
	path := filepath.Join(t.TempDir(), "audit.log")
	require.NoError(t, os.WriteFile(path, []byte(log), 0o644))
	calls, err := ReadAudit(path, OperatorServiceAccount)
	require.NoError(t, err)
	// The other user's call and the non-resource request are not the
	// operator's resource calls; a watch's two stages are one call, and a
	// watch still open counts. The 403 that RBAC allowed (admission refused
	// it: the namespace was being deleted) is no missing verb.
	require.Len(t, calls, 8)
	require.Equal(t, []string{
		"patch apps/deployments (e.g. ml/fraud-v1)",
		"update ml.example.com/trainingjobs/status (e.g. ml/a)",
		"watch core/nodes (e.g. all namespaces)",
	}, Forbidden(calls))
	require.Equal(t, []string{
		"create core/services",
		"list core/pods",
		"patch apps/deployments",
		"update ml.example.com/trainingjobs/status",
		"watch core/nodes",
		"watch core/pods",
		"watch core/services",
	}, Permissions(calls))
}
