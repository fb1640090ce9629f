//go:build e2e_real

package e2ereal

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/internal/images"
	"github.com/ml-operator/ml-operator/internal/localcluster"
	"github.com/ml-operator/ml-operator/internal/realnode"
)

// TrainerImage is the example trainer (test/torch/trainer/train.py on Debian's
// PyTorch), built here.
const TrainerImage = "ghcr.io/ml-operator/trainer-example:e2e"

// opClient knows the operator's kinds and CRDs (node.Client knows only the
// built-in kinds).
var opClient client.Client

// TestOperator installs the operator the way a user does (`make deploy` of
// config/default, with cert-manager for the webhook certificate) on the
// real node and runs a real two-rank PyTorch job with it.
func TestOperator(t *testing.T) {
	// cert-manager's injector logs through controller-runtime's logger.
	ctrllog.SetLogger(klog.NewKlogr())
	var err error
	opClient, err = client.New(node.Config, client.Options{Scheme: localcluster.Scheme()})
	require.NoError(t, err)
	deployOperator(t)
	t.Run("WebhookAnswersThroughItsService", testWebhookAnswers)
	t.Run("TwoRankPyTorchJobCompletes", testTwoRankPyTorchJob)
	t.Run("RestrictedNamespace", testRestrictedNamespace)
}

func deployOperator(t *testing.T) {
	t.Helper()
	cmCtx, stopCM := context.WithCancel(context.Background())
	done, err := node.DeployOperator(cmCtx)
	if done != nil {
		t.Cleanup(func() { stopCM(); <-done })
	} else {
		t.Cleanup(stopCM)
	}
	require.NoError(t, err)
}

// testWebhookAnswers: the API server reaches the manager's webhook server
// through its Service with the certificate cert-manager issued and the CA
// its injector put into the webhook configuration.
func testWebhookAnswers(t *testing.T) {
	ns := namespace(t)
	job := &mlv1.TrainingJob{
		ObjectMeta: metav1.ObjectMeta{Name: "reserved-env", Namespace: ns},
		Spec: mlv1.TrainingJobSpec{
			Framework:  "pytorch",
			Image:      TrainerImage,
			NumWorkers: 1,
			Env:        []corev1.EnvVar{{Name: "RANK", Value: "7"}},
		},
	}
	var err error
	require.NoError(t, poll(2*time.Minute, func() bool {
		err = opClient.Create(context.Background(), job)
		// Until the CA is injected the call fails with a TLS error, not a
		// denial.
		return err != nil && strings.Contains(err.Error(), "denied the request")
	}), "last error: %v\n%s", err, webhookDiagnostics())
	require.Contains(t, err.Error(), "RANK")
}

func testTwoRankPyTorchJob(t *testing.T) {
	ctx := context.Background()
	repo, err := filepath.Abs("../..")
	require.NoError(t, err)
	began := time.Now()
	rootfs, err := node.Images.Tarball(ctx, realnode.TrainerRootfs)
	require.NoError(t, err)
	t.Logf("trainer root filesystem ready in %s (%s)", time.Since(began).Round(100*time.Millisecond), rootfs)
	began = time.Now()
	require.NoError(t, node.PushImage(ctx, images.Spec{
		Ref:       TrainerImage,
		RootfsTar: rootfs,
		// A numeric non-root USER, as the operator's default runAsNonRoot
		// (with no fixed UID) needs; Debian's rootfs has no user 1000, and
		// HOME is the operator's emptyDir.
		User:  "1000:1000",
		Files: []images.File{{Source: filepath.Join(repo, "test", "torch", "trainer", "train.py"), Path: "/opt/trainer/train.py", Mode: 0o644}},
	}))
	t.Logf("trainer image built and pushed in %s", time.Since(began).Round(100*time.Millisecond))

	ns := namespace(t)
	name := "ddp"
	// The node has no dynamic provisioner: a hostPath volume bound to the
	// checkpoint claim the operator creates.
	dir := filepath.Join(node.Workdir(), "volumes", ns+"-"+name)
	require.NoError(t, os.MkdirAll(dir, 0o777))
	require.NoError(t, os.Chmod(dir, 0o777))
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			ClaimRef:                      &corev1.ObjectReference{Namespace: ns, Name: name + "-checkpoints"},
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir}},
		},
	}
	require.NoError(t, node.Client.Create(ctx, pv))
	t.Cleanup(func() { _ = node.Client.Delete(context.Background(), pv) })

	empty := ""
	size := resource.MustParse("1Gi")
	job := &mlv1.TrainingJob{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: mlv1.TrainingJobSpec{
			Framework: "pytorch",
			Image:     TrainerImage,
			// Debian's torch 1.13 torchrun crashes under Python 3.11 unless
			// its output is redirected (flags here; PET_REDIRECTS and
			// PET_TEE in spec.env work as well).
			Command:       []string{"/usr/bin/torchrun", "--redirects=1", "--tee=1", "/opt/trainer/train.py"},
			NumWorkers:    2,
			GPUsPerWorker: ptr.To[int32](0),
			Hyperparameters: map[string]mlv1.HyperparameterValue{
				"epochs": {Raw: []byte("3")},
			},
			Checkpoint: mlv1.CheckpointSpec{Storage: mlv1.CheckpointStorage{StorageClassName: &empty, Size: &size}},
		},
	}
	require.NoError(t, opClient.Create(ctx, job))
	began = time.Now()
	got := &mlv1.TrainingJob{}
	err = poll(10*time.Minute, func() bool {
		if opClient.Get(ctx, client.ObjectKeyFromObject(job), got) != nil {
			return false
		}
		return got.Status.State == mlv1.StateCompleted || got.Status.State == mlv1.StateFailed
	})
	logs := node.NamespaceDiagnostics(ctx, ns)
	require.NoError(t, err, "job state %q, conditions %+v\n%s", got.Status.State, got.Status.Conditions, logs)
	require.Equal(t, mlv1.StateCompleted, got.Status.State, "conditions %+v\n%s", got.Status.Conditions, logs)
	t.Logf("two-rank job Completed in %s", time.Since(began).Round(100*time.Millisecond))
	// The gang formed on its first attempt: rank 1 found rank 0 through the
	// headless Service's DNS name without a restart.
	require.Zero(t, got.Status.Restarts, "gang restarts")
	require.Zero(t, got.Status.Disruptions, "disruptions")
	ckpts, _ := filepath.Glob(filepath.Join(dir, "epoch-*"))
	require.NotEmpty(t, ckpts, "rank 0 wrote no checkpoint into the claim")
}

// webhookDiagnostics tells whether cert-manager issued the serving
// certificate and injected its CA.
func webhookDiagnostics() string {
	ctx := context.Background()
	var b strings.Builder
	mw := &admissionregistrationv1.MutatingWebhookConfigurationList{}
	_ = opClient.List(ctx, mw)
	for _, c := range mw.Items {
		fmt.Fprintf(&b, "mutating %s annotations %v\n", c.Name, c.Annotations)
		for _, w := range c.Webhooks {
			fmt.Fprintf(&b, "  %s caBundle %d bytes\n", w.Name, len(w.ClientConfig.CABundle))
		}
	}
	secrets := &corev1.SecretList{}
	_ = opClient.List(ctx, secrets, client.InNamespace(realnode.OperatorNamespace))
	for _, s := range secrets.Items {
		fmt.Fprintf(&b, "secret %s type %s keys %d\n", s.Name, s.Type, len(s.Data))
	}
	return b.String() + node.OperatorDiagnostics(ctx)
}

func binDir(repo string) string {
	if b := os.Getenv("REALNODE_BIN"); b != "" {
		return b
	}
	return filepath.Join(repo, "bin")
}
