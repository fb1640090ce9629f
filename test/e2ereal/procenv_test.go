//go:build e2e_real

package e2ereal

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

// processEnv is the environment of the process in pod whose command line
// contains cmd, read from /proc on this machine (the node's containers are
// processes here; the pod's cgroup path names its UID). It is what the
// container really got: the pod's env as the kubelet resolved it, plus the
// image's, HOSTNAME and the Service links.
func processEnv(pod *corev1.Pod, cmd string) (map[string]string, error) {
	uid := strings.ReplaceAll(string(pod.UID), "-", "_")
	dashed := string(pod.UID)
	dirs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		return nil, err
	}
	for _, d := range dirs {
		cg, err := os.ReadFile(filepath.Join(d, "cgroup"))
		if err != nil || !(bytes.Contains(cg, []byte("pod"+dashed)) || bytes.Contains(cg, []byte("pod"+uid))) {
			continue
		}
		line, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err != nil || !bytes.Contains(line, []byte(cmd)) {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(d, "environ"))
		if err != nil {
			continue
		}
		env := map[string]string{}
		for _, kv := range bytes.Split(raw, []byte{0}) {
			if k, v, ok := strings.Cut(string(kv), "="); ok {
				env[k] = v
			}
		}
		return env, nil
	}
	return nil, fmt.Errorf("no process %q of pod %s (uid %s) on this machine", cmd, pod.Name, pod.UID)
}

// serviceLink is a variable the kubelet adds for each Service of the
// namespace (enableServiceLinks) and for the API server.
var serviceLink = regexp.MustCompile(`^[A-Z0-9_]+_(SERVICE_HOST|SERVICE_PORT(_[A-Z0-9_]+)?|PORT(_[0-9]+_(TCP|UDP|SCTP)(_PROTO|_PORT|_ADDR)?)?)$`)

// envMismatches compares what a container's process got with the pod's
// env: every variable of the pod with its value (field references resolved
// as the kubelet does), nothing the operator owns that the pod does not
// say, and nothing else but the image's PATH, HOSTNAME, the HOME runc
// sets and the Service links.
// It returns the differences and the variables beyond the pod's env.
func envMismatches(pod *corev1.Pod, got map[string]string) (diffs, extra []string) {
	want := map[string]string{}
	for _, e := range pod.Spec.Containers[0].Env {
		v := e.Value
		if f := e.ValueFrom; f != nil && f.FieldRef != nil {
			switch f.FieldRef.FieldPath {
			case "metadata.name":
				v = pod.Name
			case "metadata.namespace":
				v = pod.Namespace
			case "status.podIP":
				v = pod.Status.PodIP
			default:
				diffs = append(diffs, fmt.Sprintf("%s: field %s not checked", e.Name, f.FieldRef.FieldPath))
				continue
			}
		}
		want[e.Name] = v
		if g, ok := got[e.Name]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s: missing, want %q", e.Name, v))
		} else if g != v {
			diffs = append(diffs, fmt.Sprintf("%s=%q, want %q", e.Name, g, v))
		}
	}
	for k, v := range got {
		if _, ok := want[k]; ok {
			continue
		}
		switch {
		case mlv1.IsReservedEnvName(k) || k == mlv1.EnvNCCLDebug:
			diffs = append(diffs, fmt.Sprintf("%s=%q set, but not by the operator", k, v))
		case k == "PATH" || k == "HOSTNAME" || k == "HOME" || serviceLink.MatchString(k):
			extra = append(extra, k)
		default:
			diffs = append(diffs, fmt.Sprintf("%s=%q: neither the pod's, the image's nor a Service link", k, v))
		}
	}
	sort.Strings(diffs)
	sort.Strings(extra)
	return diffs, extra
}
