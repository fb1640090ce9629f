//go:build e2e_real

package e2ereal

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	clientretry "k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

// Two tags of the project's model server (./cmd/model-server): the two
// versions of a ModelDeployment name different images.
const (
	modelServerV1 = "ghcr.io/ml-operator/model-server:e2e-1"
	modelServerV2 = "ghcr.io/ml-operator/model-server:e2e-2"
)

// predictCounts is what `probe predict` prints.
type predictCounts struct {
	Versions map[string]int `json:"versions"`
	Pods     map[string]int `json:"pods"`
	Codes    map[string]int `json:"codes"`
	Errors   []string       `json:"errors"`
}

// restrictedNamespace is namespace(t) with Pod Security "restricted"
// enforced: what a ModelDeployment's pods promise to pass.
func restrictedNamespace(t testing.TB) string {
	t.Helper()
	ns := namespace(t)
	obj := &corev1.Namespace{}
	require.NoError(t, node.Client.Get(context.Background(), client.ObjectKey{Name: ns}, obj))
	obj.Labels["pod-security.kubernetes.io/enforce"] = "restricted"
	require.NoError(t, node.Client.Update(context.Background(), obj))
	return ns
}

// restricted makes a probe pod pass Pod Security "restricted".
func restricted(pod *corev1.Pod) *corev1.Pod {
	pod.Spec.SecurityContext = &corev1.PodSecurityContext{
		RunAsNonRoot:   ptr.To(true),
		RunAsUser:      ptr.To[int64](65532),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	for i := range pod.Spec.Containers {
		pod.Spec.Containers[i].SecurityContext = &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr.To(false),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		}
	}
	return pod
}

// predictFromPod sends n predictions to url from a pod (a ClusterIP is
// reachable only from the pod network) and returns the counts.
func predictFromPod(t *testing.T, ns, name, url string, n int) predictCounts {
	t.Helper()
	phase, log := runToEnd(t, restricted(probePod(ns, name, nil, "predict", url, fmt.Sprint(n))))
	require.Equal(t, corev1.PodSucceeded, phase, "log: %s", log)
	var c predictCounts
	require.NoError(t, json.Unmarshal([]byte(log), &c), "log: %s", log)
	return c
}

func versionStatus(md *mlv1.ModelDeployment, name string) *mlv1.VersionStatus {
	for i := range md.Status.ActiveVersions {
		if md.Status.ActiveVersions[i].Name == name {
			return &md.Status.ActiveVersions[i]
		}
	}
	return nil
}

func weights(md *mlv1.ModelDeployment) map[string]int32 {
	w := map[string]int32{}
	for _, v := range md.Status.ActiveVersions {
		w[v.Name] = v.Weight
	}
	return w
}

var (
	pushModelServersOnce sync.Once
	pushModelServersErr  error
)

// pushModelServers builds the model server once and pushes it as
// modelServerV1 and modelServerV2, for the tests that run side by side.
func pushModelServers(t testing.TB) {
	t.Helper()
	pushModelServersOnce.Do(func() {
		began := time.Now()
		pushModelServersErr = node.PushModelServer(context.Background(), modelServerV1, modelServerV2)
		t.Logf("model server images built and pushed in %s", time.Since(began).Round(100*time.Millisecond))
	})
	require.NoError(t, pushModelServersErr)
}

// testServing: a ModelDeployment of the project's model server at 90/10
// on the real node. The pods become Ready through their probes,
// predictions through the stable Service reach both versions about as the
// replica split says, and a version whose model does not load is
// remediated and then rolled back.
func testServing(t *testing.T) {
	ctx := context.Background()
	pushModelServers(t)

	ns := restrictedNamespace(t)
	// fraud-v3.json has no weights: the storage initializer fetches it, and
	// the server exits when it loads it (testRollbackOfACrashingVersion).
	store := modelStore(t, ns, map[string]string{"fraud-v1.json": `{"weights":[2],"bias":1}`, "fraud-v3.json": `{"weights":[]}`})
	modelPath := store + "/fraud-v1.json"
	md := &mlv1.ModelDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: "fraud", Namespace: ns},
		Spec: mlv1.ModelDeploymentSpec{
			ModelName: "fraud-detector",
			Framework: mlv1.ModelFrameworkSKLearn,
			Image:     modelServerV1,
			Versions: []mlv1.ModelVersion{
				{Name: "v1", Weight: ptr.To[int32](90), ModelPath: modelPath},
				{Name: "v2", Weight: ptr.To[int32](10), ModelPath: modelPath, Image: modelServerV2},
			},
			// Under the service router the HPA bounds split by weight: v1
			// 9..9, v2 1..1, so the stable Service has 9 v1 endpoints to 1 v2.
			Scaling:     mlv1.ScalingSpec{MinReplicas: 10, MaxReplicas: ptr.To[int32](10)},
			HealthCheck: mlv1.HealthCheckSpec{IntervalSeconds: 3, TimeoutSeconds: 2, FailureThreshold: 2},
			Rollout:     mlv1.RolloutSpec{ProgressDeadlineSeconds: 300},
		},
	}
	require.NoError(t, opClient.Create(ctx, md))
	began := time.Now()
	got := waitRunning(t, md, 5*time.Minute, map[string]int32{"v1": 9, "v2": 1})
	t.Logf("10 model server pods Ready through their probes in %s; router %s, weights %v, url %s",
		time.Since(began).Round(100*time.Millisecond), got.Status.Router, weights(got), got.Status.URL)
	require.Equal(t, mlv1.RouterService, got.Status.Router, "no Gateway API or Istio on this cluster")
	require.Equal(t, map[string]int32{"v1": 90, "v2": 10}, weights(got))

	// The HPAs exist with the bounds the replica split gives.
	for name, bound := range map[string]int32{"fraud-v1": 9, "fraud-v2": 1} {
		hpa := &autoscalingv2.HorizontalPodAutoscaler{}
		require.NoError(t, node.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, hpa), "HPA %s", name)
		require.Equal(t, bound, *hpa.Spec.MinReplicas, "HPA %s min", name)
		require.Equal(t, bound, hpa.Spec.MaxReplicas, "HPA %s max", name)
	}

	// Through the stable Service at the URL the status gives, from a pod:
	// kube-proxy picks one of the 10 Ready endpoints for each connection.
	// Ready pods are not yet routed pods: wait for kube-proxy's rules.
	require.NoError(t, node.WaitServiceRouted(ctx, ns, md.Name, 10, time.Minute))
	url := got.Status.URL + "/v1/models/fraud-detector:predict"
	const n = 400
	c := predictFromPod(t, ns, "client-0", url, n)
	t.Logf("%d predictions through %s: by version %v, by code %v, by pod %v", n, url, c.Versions, c.Codes, c.Pods)
	require.Equal(t, map[string]int{"200": n}, c.Codes, "errors: %v", c.Errors)
	require.Equal(t, n, c.Versions["v1"]+c.Versions["v2"])
	// v2 holds 1 endpoint of 10: its count is Binomial(400, 0.1), mean 40,
	// standard deviation 6; 16..70 is four deviations and more each side.
	require.GreaterOrEqual(t, c.Versions["v2"], 16, "v2 answered too few: %v", c.Versions)
	require.LessOrEqual(t, c.Versions["v2"], 70, "v2 answered too many: %v", c.Versions)
	require.Len(t, c.Pods, 10, "every Ready pod answers some: %v", c.Pods)

	testRollbackOfACrashingVersion(t, md, store)
}

// modelStore serves files over HTTP inside the cluster (a probe pod over a
// ConfigMap, behind the Service model-store) and returns its base URL: a
// ModelDeployment's modelPath is a URL, and the model server loads it at
// start.
func modelStore(t testing.TB, ns string, files map[string]string) string {
	t.Helper()
	ctx := context.Background()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "models", Namespace: ns}, Data: files}
	require.NoError(t, node.Client.Create(ctx, cm))
	labels := map[string]string{"app": "model-store"}
	pod := restricted(probePod(ns, "model-store", labels, "files", "8080", "/models"))
	pod.Spec.Volumes = []corev1.Volume{{Name: "models", VolumeSource: corev1.VolumeSource{
		ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "models"}},
	}}}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "models", MountPath: "/models"}}
	runningPod(t, pod)
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "model-store", Namespace: ns},
		Spec: corev1.ServiceSpec{
			Selector: labels,
			Ports:    []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}
	require.NoError(t, node.Client.Create(ctx, svc))
	// Routed before a model server fetches from it.
	require.NoError(t, node.WaitServiceRouted(ctx, ns, "model-store", 1, time.Minute))
	return "http://model-store." + ns + ".svc.cluster.local"
}

// testRollbackOfACrashingVersion adds a version v3 whose model has no
// waitRunning waits until md is Running with the given Ready replicas per
// version, and returns it; on timeout it fails with the namespace's
// diagnostics.
func waitRunning(t testing.TB, md *mlv1.ModelDeployment, timeout time.Duration, healthy map[string]int32) *mlv1.ModelDeployment {
	t.Helper()
	ctx := context.Background()
	got := &mlv1.ModelDeployment{}
	err := poll(timeout, func() bool {
		if opClient.Get(ctx, client.ObjectKeyFromObject(md), got) != nil || got.Status.Phase != mlv1.PhaseRunning {
			return false
		}
		for name, n := range healthy {
			if v := versionStatus(got, name); v == nil || v.HealthyReplicas != n {
				return false
			}
		}
		return true
	})
	require.NoError(t, err, "status %+v\n%s", got.Status, node.NamespaceDiagnostics(ctx, md.Namespace))
	return got
}

// versionLog returns the log of one of a version's pods, or "" while none
// has one.
func versionLog(ctx context.Context, ns, version string) string {
	pods := &corev1.PodList{}
	if node.Client.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{mlv1.LabelModelVersion: version}) != nil {
		return ""
	}
	for _, p := range pods.Items {
		if log, err := node.PodLog(ctx, ns, p.Name); err == nil && log != "" {
			return log
		}
	}
	return ""
}

// testRollbackOfACrashingVersion adds v3, whose model file has no
// weights: the storage initializer fetches it, its server exits at start,
// the operator deletes the crash-looping pod (Remediated) and, when the
// replacement crash-loops too, rolls v3 back (CrashLoop), giving its share
// to v1.
func testRollbackOfACrashingVersion(t *testing.T, md *mlv1.ModelDeployment, store string) {
	ctx := context.Background()
	ns := md.Namespace
	require.NoError(t, clientretry.RetryOnConflict(onConflict, func() error {
		cur := &mlv1.ModelDeployment{}
		if err := opClient.Get(ctx, client.ObjectKeyFromObject(md), cur); err != nil {
			return err
		}
		cur.Spec.Versions = []mlv1.ModelVersion{
			{Name: "v1", Weight: ptr.To[int32](80), ModelPath: store + "/fraud-v1.json"},
			{Name: "v2", Weight: ptr.To[int32](10), ModelPath: store + "/fraud-v1.json", Image: modelServerV2},
			{Name: "v3", Weight: ptr.To[int32](10), ModelPath: store + "/fraud-v3.json", Image: modelServerV2},
		}
		return opClient.Update(ctx, cur)
	}))
	began := time.Now()
	got := &mlv1.ModelDeployment{}
	var maxRemediations int32
	var failed *mlv1.FailedVersion
	// What a user finds in the crashing pod's log, read while v3 crash-loops:
	// once it is rolled back, its pods and their logs go.
	var crashLog string
	err := poll(5*time.Minute, func() bool {
		if opClient.Get(ctx, client.ObjectKeyFromObject(md), got) != nil {
			return false
		}
		if v3 := versionStatus(got, "v3"); v3 != nil {
			maxRemediations = max(maxRemediations, v3.Remediations)
		}
		if crashLog == "" {
			crashLog = versionLog(ctx, ns, "v3")
		}
		for i := range got.Status.FailedVersions {
			if got.Status.FailedVersions[i].Name == "v3" {
				failed = &got.Status.FailedVersions[i]
			}
		}
		return failed != nil
	})
	require.NoError(t, err, "status %+v\n%s", got.Status, node.NamespaceDiagnostics(ctx, ns))
	t.Logf("v3 rolled back %s after the spec change: %s: %s", time.Since(began).Round(100*time.Millisecond), failed.Reason, failed.Message)
	require.Equal(t, "CrashLoop", failed.Reason)
	rolledBack := meta.FindStatusCondition(got.Status.Conditions, mlv1.ModelDeploymentRolledBack)
	require.NotNil(t, rolledBack, "conditions %+v", got.Status.Conditions)
	require.Equal(t, metav1.ConditionTrue, rolledBack.Status)
	require.Equal(t, "CrashLoop", rolledBack.Reason)
	t.Logf("RolledBack=%s %s: %s", rolledBack.Status, rolledBack.Reason, rolledBack.Message)

	// The remediation came first: the operator's event names the deleted
	// pod, and the status counted it (the count may have been read after it
	// reset).
	events := &corev1.EventList{}
	require.NoError(t, node.Client.List(ctx, events, client.InNamespace(ns)))
	var remediated, rolledBackEvents []string
	for _, e := range events.Items {
		switch e.Reason {
		case "Remediated":
			remediated = append(remediated, e.Message)
		case "RolledBack":
			rolledBackEvents = append(rolledBackEvents, e.Message)
		}
	}
	t.Logf("events: Remediated %q; RolledBack %q; v3 remediations seen in status: %d", remediated, rolledBackEvents, maxRemediations)
	require.NotEmpty(t, remediated, "no Remediated event before the rollback")
	require.True(t, strings.Contains(strings.Join(remediated, " "), "fraud-v3-"), "Remediated events name no v3 pod: %q", remediated)
	require.NotEmpty(t, rolledBackEvents)

	t.Logf("log of a v3 pod: %s", strings.TrimSpace(crashLog))
	require.Contains(t, crashLog, "has no weights", "the crashing v3 pod's log")

	// v3's share went to v1, the last healthy version, and v3 is sized to
	// zero; serving goes on without an error.
	err = poll(3*time.Minute, func() bool {
		if opClient.Get(ctx, client.ObjectKeyFromObject(md), got) != nil {
			return false
		}
		w := weights(got)
		return w["v1"] == 90 && w["v2"] == 10 && w["v3"] == 0
	})
	require.NoError(t, err, "effective weights %v", weights(got))
	c := predictFromPod(t, ns, "client-1", got.Status.URL+"/v1/models/fraud-detector:predict", 100)
	t.Logf("100 predictions after the rollback: by version %v, by code %v", c.Versions, c.Codes)
	require.Equal(t, map[string]int{"200": 100}, c.Codes, "errors: %v", c.Errors)
	require.Zero(t, c.Versions["v3"])

	hpas := &autoscalingv2.HorizontalPodAutoscalerList{}
	require.NoError(t, node.Client.List(ctx, hpas, client.InNamespace(ns)))
	var names []string
	for _, h := range hpas.Items {
		names = append(names, fmt.Sprintf("%s %d..%d", h.Name, ptr.Deref(h.Spec.MinReplicas, 1), h.Spec.MaxReplicas))
	}
	sort.Strings(names)
	t.Logf("HPAs after the rollback: %v", names)
}
