package realnode

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// OperatorServiceAccount is the user the manager's pods call the API server
// as (config/default's ServiceAccount).
const OperatorServiceAccount = "system:serviceaccount:" + OperatorNamespace + ":ml-operator-controller-manager"

// auditPolicy records, at Metadata level (no bodies), every request a
// service account of the operator's namespace makes: what `make deploy`
// installed is what calls, and the RBAC it ships is what judges.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  userGroups: ["system:serviceaccounts:` + OperatorNamespace + `"]
- level: None
`

// AuditLog is kube-apiserver's audit log of the node.
func (n *Node) AuditLog() string { return filepath.Join(n.LogsDir(), "audit.log") }

func writeAuditPolicy(workdir string) (string, error) {
	p := filepath.Join(workdir, "audit-policy.yaml")
	return p, os.WriteFile(p, []byte(auditPolicy), 0o644)
}

// APICall is one request of the audit log.
type APICall struct {
	User        string
	Verb        string
	Group       string
	Resource    string
	Subresource string
	Namespace   string
	Name        string
	Code        int
	Reason      string
	// Decision is the authorizer's: "allow" or "forbid". A 403 with
	// "allow" was refused after authorization (by admission, e.g. a
	// namespace being deleted), not by RBAC.
	Decision string
}

// Permission is what RBAC is asked: the verb on group/resource[/subresource].
func (c APICall) Permission() string {
	r := c.Resource
	if c.Subresource != "" {
		r += "/" + c.Subresource
	}
	g := c.Group
	if g == "" {
		g = "core"
	}
	return fmt.Sprintf("%s %s/%s", c.Verb, g, r)
}

type auditEvent struct {
	AuditID string `json:"auditID"`
	Verb    string `json:"verb"`
	User    struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		APIGroup    string `json:"apiGroup"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code   int    `json:"code"`
		Reason string `json:"reason"`
	} `json:"responseStatus"`
	Stage       string            `json:"stage"`
	Annotations map[string]string `json:"annotations"`
}

// decisionAnnotation is where kube-apiserver's audit records the
// authorizer's decision.
const decisionAnnotation = "authorization.k8s.io/decision"

// ReadAudit returns the requests user made, once each in the order they
// started, from an audit log in JSON lines (kube-apiserver's
// --audit-log-format=json). A watch still open has only its
// ResponseStarted event (client-go's informers list through a watch, so
// their lists are among these); every other request counts when complete.
// Requests without an object (discovery, /healthz) are left out.
func ReadAudit(path, user string) ([]APICall, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var calls []APICall
	index := map[string]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e auditEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if e.User.Username != user || e.ObjectRef == nil || (e.Stage != "ResponseComplete" && e.Stage != "ResponseStarted") {
			continue
		}
		c := APICall{
			User: e.User.Username, Verb: e.Verb,
			Group: e.ObjectRef.APIGroup, Resource: e.ObjectRef.Resource, Subresource: e.ObjectRef.Subresource,
			Namespace: e.ObjectRef.Namespace, Name: e.ObjectRef.Name,
			Decision: e.Annotations[decisionAnnotation],
		}
		if e.ResponseStatus != nil {
			c.Code, c.Reason = e.ResponseStatus.Code, e.ResponseStatus.Reason
		}
		if i, ok := index[e.AuditID]; ok && e.AuditID != "" {
			calls[i] = c
			continue
		}
		index[e.AuditID] = len(calls)
		calls = append(calls, c)
	}
	return calls, sc.Err()
}

// Forbidden lists, sorted and once each, the permissions of the calls RBAC
// refused (403 with the authorizer's decision "forbid"), with an example
// object. A 403 from admission (a namespace being deleted) is not RBAC's.
func Forbidden(calls []APICall) []string {
	seen := map[string]string{}
	for _, c := range calls {
		if c.Code != 403 || c.Decision != "forbid" {
			continue
		}
		if _, ok := seen[c.Permission()]; !ok {
			where := c.Namespace
			if c.Name != "" {
				where = strings.TrimPrefix(where+"/"+c.Name, "/")
			}
			if where == "" {
				where = "all namespaces"
			}
			seen[c.Permission()] = where
		}
	}
	out := make([]string, 0, len(seen))
	for p, where := range seen {
		out = append(out, fmt.Sprintf("%s (e.g. %s)", p, where))
	}
	sort.Strings(out)
	return out
}

// Permissions lists, sorted and once each, the permissions of all calls.
func Permissions(calls []APICall) []string {
	seen := map[string]bool{}
	for _, c := range calls {
		seen[c.Permission()] = true
	}
	out := make([]string, 0, len(seen))
	for p := range seen {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}
