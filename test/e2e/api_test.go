//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/test/testutil"
)

// header returns the first line of kubectl's table output, columns
// separated by single spaces.
func header(out string) string {
	first, _, _ := strings.Cut(strings.TrimSpace(out), "\n")
	return strings.Join(strings.Fields(first), " ")
}

// cell returns the text in column col of the row whose first cell is row,
// cut at the header's column offsets (kubectl aligns cells under headers).
func cell(out, row, col string) string {
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	start := strings.Index(lines[0], col)
	if start < 0 {
		return "<no column " + col + ">"
	}
	end := len(lines[0])
	if next := strings.IndexFunc(lines[0][start+len(col):], func(r rune) bool { return r != ' ' }); next >= 0 {
		end = start + len(col) + next
	}
	for _, l := range lines[1:] {
		if f := strings.Fields(l); len(f) > 0 && f[0] == row {
			if start >= len(l) {
				return ""
			}
			return strings.TrimSpace(l[start:min(end, len(l))])
		}
	}
	return "<no row " + row + ">"
}

func TestKubectlGetTrainingJobPrinterColumns(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	tj := testutil.TrainingJob("columns", ns).Image("example.com/trainer:1").Workers(3).GPUs(0).Obj()
	tj.Spec.Template.Annotations = map[string]string{"sim.ml.example.com/complete-after": "1h"}
	require.NoError(t, env.client.Create(context.Background(), tj))

	out := kubectl(t, "get", "tj", "-n", ns)
	assert.Equal(t, "NAME STATE PROGRESS EPOCH AGE", header(out), out)
	assert.Regexp(t, regexp.MustCompile(`(?m)^columns\s`), out)

	wide := kubectl(t, "get", "tj", "-n", ns, "-o", "wide")
	assert.Equal(t, "NAME STATE PROGRESS EPOCH AGE WORKERS RESTARTS", header(wide), wide)
	assert.Equal(t, "3", cell(wide, "columns", "WORKERS"), "Workers shows spec.numWorkers\n%s", wide)

	if env.conversion {
		// The deprecated version keeps its own columns, read through the conversion webhook.
		out = kubectl(t, "get", "trainingjobs.v1alpha1.ml.example.com", "-n", ns)
		assert.Equal(t, "NAME FRAMEWORK WORKERS PHASE AGE", header(out), out)
		assert.Equal(t, "3", cell(out, "columns", "WORKERS"), out)
		assert.Equal(t, "pytorch", cell(out, "columns", "FRAMEWORK"), out)
	}

	md := testutil.ModelDeployment("columns-md", ns).Version("v1", 100, "s3://models/columns/v1").Obj()
	require.NoError(t, env.client.Create(context.Background(), md))
	out = kubectl(t, "get", "md", "-n", ns)
	assert.Equal(t, "NAME FRAMEWORK PHASE REPLICAS AGE", header(out), out)
}

func TestKubectlExplainCheckpoint(t *testing.T) {
	t.Parallel()
	out := kubectl(t, "explain", "trainingjob.spec.checkpoint")
	assert.Contains(t, out, "GROUP:      ml.example.com")
	assert.Contains(t, out, "VERSION:    v1")
	assert.Regexp(t, regexp.MustCompile(`FIELD:\s+checkpoint <Object>`), out)
	for _, field := range []string{"enabled", "frequency", "path", "storage", "retainOnDelete", "keepLast"} {
		assert.Regexp(t, regexp.MustCompile(`(?m)^\s+`+field+`\s+<`), out, "field %s", field)
	}

	out = kubectl(t, "explain", "trainingjob.spec.checkpoint.storage.type")
	for _, v := range []string{"pvc", "s3", "gcs"} {
		assert.Regexp(t, regexp.MustCompile(`(?m)^\s+`+v+`$`), out, "enum value %s", v)
	}
}

// TestGarbageCollectorCascades deletes a TrainingJob and watches the real
// garbage collector (kube-controller-manager) delete what it owned.
func TestGarbageCollectorCascades(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	ctx := context.Background()
	tj := testutil.TrainingJob("cascade", ns).Image("example.com/trainer:1").GPUs(0).Obj()
	tj.Spec.Template.Annotations = map[string]string{"sim.ml.example.com/complete-after": "1h"}
	require.NoError(t, env.client.Create(ctx, tj))

	// A child of our own, so the cascade is tested whatever the controller creates.
	owned := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: "cascade-extra", Namespace: ns,
		OwnerReferences: []metav1.OwnerReference{{
			APIVersion: mlv1.GroupVersion.String(), Kind: "TrainingJob", Name: tj.Name, UID: tj.UID,
			Controller: ptr.To(false), BlockOwnerDeletion: ptr.To(true),
		}},
	}}
	require.NoError(t, env.client.Create(ctx, owned))

	// The operator's own children: wait until it has made them.
	children := []client.Object{
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: mlv1.WorkerPodName(tj.Name, 0), Namespace: ns}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: mlv1.WorkersServiceName(tj.Name), Namespace: ns}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: mlv1.ConfigMapName(tj.Name), Namespace: ns}},
	}
	checkpoints := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: mlv1.CheckpointPVCName(tj.Name), Namespace: ns}}
	for _, obj := range append(children, checkpoints) {
		waitFor(t, 60*time.Second, fmt.Sprintf("%T %s created", obj, obj.GetName()), func() (bool, string) {
			err := env.client.Get(ctx, client.ObjectKeyFromObject(obj), obj)
			return err == nil, fmt.Sprint(err)
		})
	}

	require.NoError(t, env.client.Delete(ctx, tj))
	for _, obj := range append(children, owned) {
		waitFor(t, 60*time.Second, fmt.Sprintf("%T %s deleted by the garbage collector", obj, obj.GetName()), func() (bool, string) {
			err := env.client.Get(ctx, client.ObjectKeyFromObject(obj), obj)
			return apierrors.IsNotFound(err), fmt.Sprint(err)
		})
	}
	waitFor(t, 60*time.Second, "the TrainingJob gone", func() (bool, string) {
		got := &mlv1.TrainingJob{}
		err := env.client.Get(ctx, client.ObjectKeyFromObject(tj), got)
		return apierrors.IsNotFound(err), fmt.Sprintf("%v finalizers=%v", err, got.Finalizers)
	})
	// checkpoint.retainOnDelete defaults to true: user data outlives the job.
	require.NoError(t, env.client.Get(ctx, client.ObjectKeyFromObject(checkpoints), checkpoints))
	assert.Nil(t, checkpoints.DeletionTimestamp, "the checkpoint PVC is kept")
}

// TestWebhooksAnswerOn127001 applies, through kubectl, an object only the
// validating webhook can refuse: the API server reaches the manager on this
// machine through the URL client configuration make run and the suite install.
func TestWebhooksAnswerOn127001(t *testing.T) {
	t.Parallel()
	require.Contains(t, env.webhooks, "vtrainingjob.ml.example.com", "the validating webhook is installed")
	ns := namespace(t)
	manifest := fmt.Sprintf(`apiVersion: ml.example.com/v1
kind: TrainingJob
metadata:
  name: reserved-env
  namespace: %s
spec:
  image: example.com/trainer:1
  gpusPerWorker: 0
  env:
  - name: MASTER_ADDR
    value: somewhere-else
`, ns)
	cmd := exec.Command(filepath.Join(testutil.RepoRoot(), "bin", "kubectl"), "apply", "-f", "-")
	cmd.Env = env.cluster.KubectlEnv()
	cmd.Stdin = strings.NewReader(manifest)
	out, err := cmd.CombinedOutput()
	require.Error(t, err, "MASTER_ADDR is reserved: %s", out)
	// Only the webhook says this (the CRD schema has no rule for it).
	assert.Contains(t, string(out), `spec.env[0].name: Invalid value: "MASTER_ADDR": is set by the operator`)
}
