//go:build chaos

package chaos

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

// auditPolicy records every pod create and delete with the pod in the
// response (its uid), and nothing else: enough to say whether the operator
// or someone else deleted a pod, at little cost to the API server.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: RequestResponse
  verbs: ["delete"]
  resources: [{group: "", resources: ["pods"]}]
- level: RequestResponse
  verbs: ["create"]
  resources: [{group: "", resources: ["pods"]}]
- level: None
`

// writeAuditPolicy writes the policy into the workdir and returns its path.
func writeAuditPolicy(workdir string) (string, error) {
	path := filepath.Join(workdir, "audit-policy.yaml")
	return path, os.WriteFile(path, []byte(auditPolicy), 0o644)
}

// auditEvent is the part of an audit.k8s.io/v1 Event read here.
type auditEvent struct {
	Stage     string `json:"stage"`
	Verb      string `json:"verb"`
	UserAgent string `json:"userAgent"`
	User      struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef struct {
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	} `json:"objectRef"`
	ResponseStatus struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	Received       string `json:"requestReceivedTimestamp"`
	ResponseObject struct {
		Metadata struct {
			UID    string            `json:"uid"`
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
		Status struct {
			Phase string `json:"phase"`
		} `json:"status"`
	} `json:"responseObject"`
}

// podRequest is one pod create or delete from the audit log.
type podRequest struct {
	at, verb, agent, pod string
	code                 int
	// Of a successful delete: the pod it hit.
	uid, job, attempt, phase string
}

// deletion is a successful pod deletion.
type deletion = podRequest

// podDeletions reads every pod create and delete from the audit log, in the
// order the API server received them.
func podDeletions(logsDir string) ([]podRequest, error) {
	f, err := os.Open(filepath.Join(logsDir, "audit.log"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []podRequest
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 4<<20), 4<<20)
	for sc.Scan() {
		var ev auditEvent
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			// A refused request answers with a Status, whose "status" is a
			// string; only the request itself matters then.
			ev = auditEvent{}
			var bare struct {
				auditEvent
				ResponseObject json.RawMessage `json:"responseObject"`
			}
			if json.Unmarshal(sc.Bytes(), &bare) != nil {
				continue
			}
			ev = bare.auditEvent
		}
		if ev.Stage != "ResponseComplete" || ev.ObjectRef.Name == "" {
			continue
		}
		r := podRequest{at: ev.Received, verb: ev.Verb, agent: agent(ev.UserAgent),
			pod: ev.ObjectRef.Namespace + "/" + ev.ObjectRef.Name, code: ev.ResponseStatus.Code}
		if (ev.Verb == "delete" && ev.ResponseStatus.Code == 200) || (ev.Verb == "create" && ev.ResponseStatus.Code == 201) {
			o := ev.ResponseObject
			r.uid, r.job = o.Metadata.UID, o.Metadata.Labels[mlv1.LabelTrainingJob]
			r.attempt, r.phase = o.Metadata.Labels[mlv1.LabelRestartAttempt], o.Status.Phase
		}
		out = append(out, r)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].at < out[j].at })
	return out, sc.Err()
}

// foreignDeletions are the deletions the operator did not ask for: a
// successful delete by someone else of a pod (by uid) that the operator had
// not asked to delete while that pod existed. The pod is identified by the
// uid its delete returned and its lifetime by the create that returned that
// uid, up to the next create of the same name: the order in which the API
// server received requests is not the order of their effect (a delete by
// name received just before a create can still remove the new pod). The
// operator asked if it sent a delete for the name in that window that did
// not find the pod gone (404) or replaced (409); a delete answered 504 may
// have been applied, so it counts as asking. By job, the set of attempts
// whose pods were deleted that way.
func foreignDeletions(reqs []podRequest) (byJob map[string]map[string]bool, n int) {
	born := map[string]string{}      // uid -> when its create was received
	creates := map[string][]string{} // pod name -> create times, in order
	for _, r := range reqs {
		if r.verb == "create" && r.code == 201 {
			creates[r.pod] = append(creates[r.pod], r.at)
			if r.uid != "" {
				born[r.uid] = r.at
			}
		}
	}
	byJob = map[string]map[string]bool{}
	for _, r := range reqs {
		if r.verb != "delete" || r.code != 200 || r.agent == operatorAgent || r.job == "" {
			continue
		}
		from, ok := born[r.uid]
		if !ok {
			continue // created before the audit log began: not ours to judge
		}
		until := "~" // after every timestamp
		for _, c := range creates[r.pod] {
			if c > from {
				until = c
				break
			}
		}
		asked := false
		for _, o := range reqs {
			if o.verb == "delete" && o.agent == operatorAgent && o.pod == r.pod &&
				o.at >= from && o.at < until && o.code != 404 && o.code != 409 {
				asked = true
				break
			}
		}
		if asked {
			continue
		}
		n++
		if byJob[r.job] == nil {
			byJob[r.job] = map[string]bool{}
		}
		byJob[r.job][r.attempt] = true
	}
	return byJob, n
}

// operatorAgent is the manager's user agent (its binary name).
const operatorAgent = "manager"

// podDeletes reads the audit log: every completed pod deletion, by pod
// (namespace/name), as "time agent -> code".
func podDeletes(logsDir string) (map[string][]string, error) {
	f, err := os.Open(filepath.Join(logsDir, "audit.log"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string][]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var ev auditEvent
		if json.Unmarshal(sc.Bytes(), &ev) != nil || ev.Stage != "ResponseComplete" || ev.ObjectRef.Name == "" {
			continue
		}
		key := ev.ObjectRef.Namespace + "/" + ev.ObjectRef.Name
		out[key] = append(out[key], fmt.Sprintf("%s %s by %q -> %d", ev.Received, ev.Verb, agent(ev.UserAgent), ev.ResponseStatus.Code))
	}
	for k := range out {
		sort.Strings(out[k])
	}
	return out, sc.Err()
}

// agent shortens a user agent to the program name ("manager", "kwok-controller", ...).
func agent(ua string) string {
	name, _, _ := strings.Cut(ua, " ")
	name, _, _ = strings.Cut(name, "/")
	return name
}

// deletesByAgent counts successful pod deletions per user agent.
func deletesByAgent(deletes map[string][]string) map[string]int {
	n := map[string]int{}
	for _, evs := range deletes {
		for _, e := range evs {
			if !strings.HasSuffix(e, "-> 200") {
				continue
			}
			_, rest, _ := strings.Cut(e, ` by "`)
			who, _, _ := strings.Cut(rest, `"`)
			n[who]++
		}
	}
	return n
}
