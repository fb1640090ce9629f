//go:build e2e_real

package e2ereal

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ml-operator/ml-operator/internal/realnode"
)

// namespace creates a namespace of the test's own and deletes it after.
func namespace(t testing.TB) string {
	t.Helper()
	return namespaceNamed(t, "e2ereal-")
}

// namespaceNamed is namespace with names starting with prefix.
func namespaceNamed(t testing.TB, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix}}
	require.NoError(t, node.Client.Create(context.Background(), ns))
	t.Cleanup(func() { _ = node.Client.Delete(context.Background(), ns) })
	// Pods need the namespace's default service account.
	require.Eventually(t, func() bool {
		return node.Client.Get(context.Background(), client.ObjectKey{Namespace: ns.Name, Name: "default"}, &corev1.ServiceAccount{}) == nil
	}, 30*time.Second, 250*time.Millisecond, "default service account in %s", ns.Name)
	return ns.Name
}

// probePod is a pod running the probe image with args, never restarted.
func probePod(ns, name string, labels map[string]string, args ...string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: new(int64),
			Containers: []corev1.Container{{
				Name:    "probe",
				Image:   ProbeImage,
				Command: append([]string{"/probe"}, args...),
			}},
		},
	}
}

// runToEnd creates the pod, waits until it has exited and returns its
// phase and log.
func runToEnd(t *testing.T, pod *corev1.Pod) (corev1.PodPhase, string) {
	t.Helper()
	phase, log, err := runPod(pod)
	require.NoError(t, err)
	return phase, log
}

// runPod is runToEnd returning its error, for use inside retries.
func runPod(pod *corev1.Pod) (corev1.PodPhase, string, error) {
	ctx := context.Background()
	if err := node.Client.Create(ctx, pod); err != nil {
		return "", "", err
	}
	var phase corev1.PodPhase
	err := poll(2*time.Minute, func() bool {
		p := &corev1.Pod{}
		if err := node.Client.Get(ctx, client.ObjectKeyFromObject(pod), p); err != nil {
			return false
		}
		phase = p.Status.Phase
		return phase == corev1.PodSucceeded || phase == corev1.PodFailed
	})
	if err != nil {
		return phase, "", fmt.Errorf("pod %s/%s to exit (phase %q): %w", pod.Namespace, pod.Name, phase, err)
	}
	log, err := readLog(pod.Namespace, pod.Name)
	return phase, log, err
}

// poll calls cond every 250 ms until it is true or timeout has passed.
// onConflict is how a test's spec change retries on a conflict: for about
// 20 s. The operator writes a ModelDeployment's status often while a
// rollout runs (every scrape, step and replica change), and on the busy
// 2-core machine client-go's DefaultRetry (five tries within 50 ms) lost
// to those writes every time (a real-node run on 2026-11-26).
var onConflict = wait.Backoff{Steps: 25, Duration: 100 * time.Millisecond, Factor: 1.5, Jitter: 0.1, Cap: 2 * time.Second}

func poll(timeout time.Duration, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %s", timeout)
		}
		time.Sleep(250 * time.Millisecond)
	}
	return nil
}

// retry runs attempt (which creates a fresh pod each time) until it
// succeeds or timeout has passed, and returns the last log.
func retry(t *testing.T, timeout time.Duration, what string, attempt func(i int) (corev1.PodPhase, string, error)) string {
	t.Helper()
	var log string
	var lastErr error
	i := 0
	err := poll(timeout, func() bool {
		var phase corev1.PodPhase
		phase, log, lastErr = attempt(i)
		i++
		return lastErr == nil && phase == corev1.PodSucceeded
	})
	require.NoError(t, err, "%s: last attempt: %v, log: %s", what, lastErr, log)
	return log
}

// readLog reads the container log through the API server (kubectl logs).
func readLog(ns, name string) (string, error) {
	return node.PodLog(context.Background(), ns, name)
}

// runningPod creates the pod and waits until it is Ready; it returns the
// pod as read back (with its IP).
func runningPod(t testing.TB, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	pod.Spec.RestartPolicy = corev1.RestartPolicyAlways
	require.NoError(t, node.Client.Create(ctx, pod))
	got := &corev1.Pod{}
	require.Eventually(t, func() bool {
		if err := node.Client.Get(ctx, client.ObjectKeyFromObject(pod), got); err != nil {
			return false
		}
		for _, c := range got.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				return true
			}
		}
		return false
	}, 2*time.Minute, 250*time.Millisecond, "pod %s/%s Ready", pod.Namespace, pod.Name)
	return got
}

func TestNodeIsReadyWithItsOwnAddress(t *testing.T) {
	ctx := context.Background()
	n := &corev1.Node{}
	require.NoError(t, node.Client.Get(ctx, client.ObjectKey{Name: realnode.NodeName}, n))
	ready := false
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			ready = c.Status == corev1.ConditionTrue
		}
	}
	require.True(t, ready, "node conditions: %+v", n.Status.Conditions)
	require.Equal(t, "v1.36.3", n.Status.NodeInfo.KubeletVersion)
	require.Contains(t, n.Status.NodeInfo.ContainerRuntimeVersion, "containerd://1.6")
	// The only address the kubelet reports is the harness's: no address of
	// the machine's own network.
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP || a.Type == corev1.NodeExternalIP {
			require.Equal(t, realnode.NodeIP, a.Address, "node address %s", a.Type)
		}
	}
}

func TestPodFromHarnessImageRunsAndLogs(t *testing.T) {
	ns := namespace(t)
	msg := "hello from a real pod in " + ns
	phase, log := runToEnd(t, probePod(ns, "say", nil, "say", msg))
	require.Equal(t, corev1.PodSucceeded, phase, "log: %s", log)
	require.Equal(t, msg+"\n", log)
}

func TestMissingImageFailsLocally(t *testing.T) {
	// An image nobody pushed: containerd must ask the local registry, find
	// nothing and report it, instead of going to the internet.
	ns := namespace(t)
	ctx := context.Background()
	pod := probePod(ns, "missing", nil, "say", "never")
	pod.Spec.Containers[0].Image = "docker.io/library/not-pushed-here:1"
	require.NoError(t, node.Client.Create(ctx, pod))
	var reason, message string
	require.Eventually(t, func() bool {
		p := &corev1.Pod{}
		if err := node.Client.Get(ctx, client.ObjectKeyFromObject(pod), p); err != nil || len(p.Status.ContainerStatuses) == 0 {
			return false
		}
		if w := p.Status.ContainerStatuses[0].State.Waiting; w != nil {
			reason, message = w.Reason, w.Message
		}
		return reason == "ErrImagePull" || reason == "ImagePullBackOff"
	}, time.Minute, 250*time.Millisecond, "image pull to fail")
	// The local registry is the one that was asked (its access log names
	// the manifest), and the error names no other host.
	regLog, err := os.ReadFile(filepath.Join(node.LogsDir(), "registry.log"))
	require.NoError(t, err)
	require.Contains(t, string(regLog), "/v2/library/not-pushed-here/manifests/1")
	require.Contains(t, message, "not found", "pull error: %s", message)
	require.NotContains(t, message, "https://", "pull error: %s", message)
}

func TestHeadlessServiceResolvesThroughCoreDNS(t *testing.T) {
	ns := namespace(t)
	labels := map[string]string{"app": "web"}
	server := runningPod(t, probePod(ns, "web-0", labels, "serve", "8080"))
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: corev1.ServiceSpec{
			ClusterIP: corev1.ClusterIPNone,
			Selector:  labels,
			Ports:     []corev1.ServicePort{{Port: 8080}},
		},
	}
	require.NoError(t, node.Client.Create(context.Background(), svc))
	name := fmt.Sprintf("web.%s.svc.%s", ns, realnode.ClusterDomain)
	// The endpoints reach CoreDNS shortly after the Service: retry the
	// lookup pod until the name resolves, within a bound.
	log := retry(t, 90*time.Second, "lookup of "+name, func(i int) (corev1.PodPhase, string, error) {
		return runPod(probePod(ns, fmt.Sprintf("lookup-%d", i), nil, "lookup", name))
	})
	require.Equal(t, "addresses: "+server.Status.PodIP+"\n", log)

	// A name outside the cluster domain is not resolved: CoreDNS answers
	// for cluster.local only and forwards nothing.
	phase, log := runToEnd(t, probePod(ns, "lookup-outside", nil, "lookup", "example.com"))
	require.Equal(t, corev1.PodFailed, phase, "log: %s", log)
	require.Contains(t, log, "error:")
}

func TestClusterIPThroughKubeProxy(t *testing.T) {
	ns := namespace(t)
	labels := map[string]string{"app": "echo"}
	server := runningPod(t, probePod(ns, "echo-0", labels, "serve", "8080"))
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: ns},
		Spec: corev1.ServiceSpec{
			Selector: labels,
			Ports:    []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}
	require.NoError(t, node.Client.Create(context.Background(), svc))
	require.True(t, strings.HasPrefix(svc.Spec.ClusterIP, "10.96."), "ClusterIP %s", svc.Spec.ClusterIP)
	// Through the ClusterIP (kube-proxy's DNAT) and through the Service
	// name (CoreDNS, then kube-proxy). kube-proxy programs the rules
	// shortly after the endpoints exist: retry within a bound.
	for j, url := range []string{"http://" + svc.Spec.ClusterIP + "/", "http://echo/"} {
		log := retry(t, 90*time.Second, "GET "+url, func(i int) (corev1.PodPhase, string, error) {
			return runPod(probePod(ns, fmt.Sprintf("get-%d-%d", j, i), nil, "get", url))
		})
		require.Equal(t, "status 200: hello from "+server.Name+"\n", log, "GET %s", url)
	}
}

func TestPodCannotReachOutsideThePodNetwork(t *testing.T) {
	ctx := context.Background()
	// The rules are checked before any pod tries: with them in place the
	// packets below are refused on this machine and none leaves it.
	require.NoError(t, realnode.UnreachableRouteInPlace(ctx))
	require.NoError(t, realnode.ForwardRulesInPlace(ctx))
	ns := namespace(t)

	// An address outside every cluster range (TEST-NET-2): the FORWARD
	// chain rejects it with "net prohibited", so connect fails at once
	// with ENETUNREACH rather than timing out.
	phase, log := runToEnd(t, probePod(ns, "dial-outside", nil, "dial", "198.51.100.7:80"))
	require.Equal(t, corev1.PodFailed, phase, "log: %s", log)
	require.Contains(t, log, "network is unreachable")

	// A cluster address with nothing behind it (no Service has it): the
	// unreachable route answers, EHOSTUNREACH.
	unused := net.ParseIP("10.96.255.250").String()
	phase, log = runToEnd(t, probePod(ns, "dial-unused", nil, "dial", unused+":80"))
	require.Equal(t, corev1.PodFailed, phase, "log: %s", log)
	require.Contains(t, log, "no route to host")
}
