//go:build e2e_real

package e2ereal

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

// testModelPaths: a version's modelPath is honoured on the real node. An
// http:// model (the in-cluster model store) is fetched by the storage
// initializer built from ./cmd/storage-initializer; a pvc:// model is read
// from the claim, mounted read-only; each version serves its own model
// (predictions through its version Service show the weights). A model the
// store does not have gives Progressing=False ModelFetchFailed quoting the
// initializer's message.
func testModelPaths(t *testing.T) {
	ctx := context.Background()
	pushModelServers(t)

	ns := restrictedNamespace(t)
	store := modelStore(t, ns, map[string]string{"fraud-v1.json": `{"weights":[2],"bias":1}`})
	staticVolume(t, ns, "models", corev1.ReadWriteOnce)
	dir := filepath.Join(node.Workdir(), "volumes", ns+"-models", "fraud")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "v1.json"), []byte(`{"weights":[3],"bias":0}`), 0o644))
	empty := ""
	require.NoError(t, node.Client.Create(ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "models", Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: &empty,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}))

	md := &mlv1.ModelDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: "paths", Namespace: ns},
		Spec: mlv1.ModelDeploymentSpec{
			ModelName: "fraud-detector",
			Framework: mlv1.ModelFrameworkSKLearn,
			Image:     modelServerV1,
			Versions: []mlv1.ModelVersion{
				{Name: "web", Weight: ptr.To[int32](50), ModelPath: store + "/fraud-v1.json"},
				{Name: "pvc", Weight: ptr.To[int32](50), ModelPath: "pvc://models/fraud/v1.json"},
			},
			Scaling:     mlv1.ScalingSpec{MinReplicas: 2, MaxReplicas: ptr.To[int32](2)},
			HealthCheck: mlv1.HealthCheckSpec{IntervalSeconds: 3, TimeoutSeconds: 2, FailureThreshold: 2},
			Traffic:     mlv1.TrafficSpec{Router: mlv1.RouterService},
		},
	}
	bad := &mlv1.ModelDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: "badfetch", Namespace: ns},
		Spec: mlv1.ModelDeploymentSpec{
			ModelName: "fraud-detector",
			Framework: mlv1.ModelFrameworkSKLearn,
			Image:     modelServerV1,
			Versions:  []mlv1.ModelVersion{{Name: "v1", ModelPath: store + "/missing.json"}},
			Traffic:   mlv1.TrafficSpec{Router: mlv1.RouterService},
		},
	}
	require.NoError(t, opClient.Create(ctx, md))
	require.NoError(t, opClient.Create(ctx, bad))

	began := time.Now()
	waitRunning(t, md, 4*time.Minute, map[string]int32{"web": 1, "pvc": 1})
	t.Logf("http:// and pvc:// versions Ready in %s", time.Since(began).Round(100*time.Millisecond))

	// Each version's own Service answers with its own model: 2x+1 from the
	// store, 3x from the claim.
	for version, want := range map[string]string{"web": `"predictions":[21]`, "pvc": `"predictions":[30]`} {
		url := "http://" + mlv1.VersionResourceName(md.Name, version) + "." + ns + ".svc.cluster.local:8080/v1/models/fraud-detector:predict"
		phase, log := runToEnd(t, restricted(probePod(ns, "post-"+version, nil, "post", url, `{"instances":[[10]]}`)))
		t.Logf("%s: %s", version, strings.TrimSpace(log))
		require.Equal(t, corev1.PodSucceeded, phase, "log: %s", log)
		require.Contains(t, log, want)
	}

	// The server's MODEL_PATH is the local copy; the init container fetched it.
	pods := &corev1.PodList{}
	require.NoError(t, node.Client.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{mlv1.LabelModelDeployment: "paths"}))
	require.NotEmpty(t, pods.Items)
	for _, p := range pods.Items {
		env := map[string]string{}
		for _, e := range p.Spec.Containers[0].Env {
			env[e.Name] = e.Value
		}
		switch p.Labels[mlv1.LabelModelVersion] {
		case "web":
			require.Equal(t, "/mnt/model/fraud-v1.json", env["MODEL_PATH"])
			require.Len(t, p.Status.InitContainerStatuses, 1)
			term := p.Status.InitContainerStatuses[0].State.Terminated
			require.NotNil(t, term, "init status %+v", p.Status.InitContainerStatuses[0])
			require.Zero(t, term.ExitCode)
		case "pvc":
			require.Equal(t, "/mnt/model/fraud/v1.json", env["MODEL_PATH"])
			require.Empty(t, p.Spec.InitContainers, "a claim is mounted, not fetched")
		}
	}

	// The missing model: the initializer's message in the conditions.
	var progressing *metav1.Condition
	err := poll(3*time.Minute, func() bool {
		cur := &mlv1.ModelDeployment{}
		if opClient.Get(ctx, client.ObjectKeyFromObject(bad), cur) != nil {
			return false
		}
		progressing = meta.FindStatusCondition(cur.Status.Conditions, mlv1.ModelDeploymentProgressing)
		return progressing != nil && progressing.Reason == mlv1.ReasonModelFetchFailed
	})
	require.NoError(t, err, "Progressing %+v\n%s", progressing, node.NamespaceDiagnostics(ctx, ns))
	t.Logf("Progressing=%s %s: %s", progressing.Status, progressing.Reason, progressing.Message)
	require.Equal(t, metav1.ConditionFalse, progressing.Status)
	require.Contains(t, progressing.Message, "the storage initializer could not fetch the model: GET "+store+"/missing.json: 404 Not Found")
}
