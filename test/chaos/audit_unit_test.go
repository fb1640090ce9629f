//go:build chaos

package chaos

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// auditLine is a pod deletion as kube-apiserver logs it at RequestResponse.
func auditLine(agent, name, uid, attempt, phase, at string) string {
	return `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"RequestResponse","stage":"ResponseComplete",` +
		`"verb":"delete","user":{"username":"kwok-admin"},"userAgent":"` + agent + ` (linux/amd64) kubernetes/$Format",` +
		`"objectRef":{"resource":"pods","namespace":"chaos","name":"` + name + `","apiVersion":"v1"},` +
		`"responseStatus":{"metadata":{},"code":200},"requestReceivedTimestamp":"2026-11-22T` + at + `000Z",` +
		`"responseObject":{"kind":"Pod","apiVersion":"v1","metadata":{"name":"` + name + `","uid":"` + uid + `",` +
		`"labels":{"ml.example.com/trainingjob":"job-a","ml.example.com/restart-attempt":"` + attempt + `"}},` +
		`"status":{"phase":"` + phase + `"}}}`
}

// timeoutLine is a deletion answered 504 (with a Status object).
func timeoutLine(agent, name, at string) string {
	return `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"RequestResponse","stage":"ResponseComplete",` +
		`"verb":"delete","userAgent":"` + agent + `","objectRef":{"resource":"pods","namespace":"chaos","name":"` + name + `"},` +
		`"responseStatus":{"metadata":{},"status":"Failure","code":504},"requestReceivedTimestamp":"2026-11-22T` + at + `000Z",` +
		`"responseObject":{"kind":"Status","apiVersion":"v1","status":"Failure","code":504}}`
}

// notFoundLine is a deletion answered 404.
func notFoundLine(agent, name, at string) string {
	return strings.Replace(strings.Replace(timeoutLine(agent, name, at), "504", "404", 2), "Failure", "Failure", 1)
}

// createLine is a pod creation as logged at RequestResponse.
func createLine(name, uid, at string) string {
	return `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"RequestResponse","stage":"ResponseComplete",` +
		`"verb":"create","userAgent":"manager/v0.0.0","objectRef":{"resource":"pods","namespace":"chaos","name":"` + name + `"},` +
		`"responseStatus":{"metadata":{},"code":201},"requestReceivedTimestamp":"2026-11-22T` + at + `000Z",` +
		`"responseObject":{"kind":"Pod","apiVersion":"v1","metadata":{"name":"` + name + `","uid":"` + uid + `",` +
		`"labels":{"ml.example.com/trainingjob":"job-a","ml.example.com/restart-attempt":"0"}},"status":{"phase":"Pending"}}}`
}

// The operator deletes the evicted gang (attempt 0) and kwok finishes
// those deletions; then kwok's late delete of worker-0, received just
// before the operator's create of the attempt-1 pod, removes that new pod:
// only that one is foreign. An operator delete that timed out (504) but was
// applied still counts as the operator's.
func TestForeignDeletionsFromTheAuditLog(t *testing.T) {
	dir := t.TempDir()
	lines := []string{
		createLine("job-a-worker-0", "uid-old", "08:38:40.000"),
		createLine("job-a-worker-1", "uid-old1", "08:38:40.001"),
		auditLine("manager/v0.0.0", "job-a-worker-0", "uid-old", "0", "Failed", "08:38:43.900"),
		timeoutLine("manager/v0.0.0", "job-a-worker-1", "08:38:43.950"),
		auditLine("kwok-controller/v0.7.0", "job-a-worker-0", "uid-old", "0", "Failed", "08:38:44.100"),
		auditLine("kwok-controller/v0.7.0", "job-a-worker-1", "uid-old1", "0", "Running", "08:38:44.150"),
		auditLine("kwok-controller/v0.7.0", "job-a-worker-0", "uid-new", "1", "Pending", "08:38:44.559"),
		createLine("job-a-worker-0", "uid-new", "08:38:44.560"),
		// attempt 2: the operator's delete of the old name does not cover
		// the pod created after it, and a 404 means it came too late.
		createLine("job-a-worker-0", "uid-2", "08:38:45.000"),
		auditLine("kwok-controller/v0.7.0", "job-a-worker-0", "uid-2", "2", "Pending", "08:38:45.100"),
		notFoundLine("manager/v0.0.0", "job-a-worker-0", "08:38:45.200"),
		createLine("job-a-worker-0", "uid-3", "08:38:45.300"),
		"not json",
	}
	if err := os.WriteFile(filepath.Join(dir, "audit.log"), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	reqs, err := podDeletions(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(reqs) != 12 {
		t.Fatalf("read %d requests, want 12: %+v", len(reqs), reqs)
	}
	if d := reqs[6]; d.verb != "delete" || d.agent != "kwok-controller" || d.uid != "uid-new" || d.job != "job-a" || d.attempt != "1" || d.phase != "Pending" {
		t.Errorf("kwok's late delete read as %+v", d)
	}
	byJob, n := foreignDeletions(reqs)
	if n != 2 {
		t.Errorf("%d foreign deletions, want 2 (uid-new, uid-2)", n)
	}
	if len(byJob["job-a"]) != 2 || !byJob["job-a"]["1"] || !byJob["job-a"]["2"] {
		t.Errorf("foreign attempts %v, want attempts 1 and 2", byJob["job-a"])
	}
	if got := deletesByAgent(map[string][]string{"chaos/x": {`t delete by "manager" -> 200`, `t delete by "kwok-controller" -> 404`}}); got["manager"] != 1 || got["kwok-controller"] != 0 {
		t.Errorf("deletesByAgent = %v", got)
	}
}
