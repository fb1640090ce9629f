//go:build e2e_real

package e2ereal

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/cmd/localcluster/cluster"
	"github.com/ml-operator/ml-operator/internal/certmanager"
	"github.com/ml-operator/ml-operator/internal/images"
	"github.com/ml-operator/ml-operator/internal/realnode"
)

// The images the operator ships with, built here under the same names.
const (
	ManagerImage = "ghcr.io/ml-operator/ml-operator:v0.2.0"
	TrainerImage = "ghcr.io/ml-operator/trainer-example:e2e"
	// OperatorNamespace and ManagerDeployment are config/default's.
	OperatorNamespace = "ml-operator-system"
	ManagerDeployment = "ml-operator-controller-manager"
)

// opClient knows the operator's kinds and CRDs (node.Client knows only the
// built-in kinds).
var opClient client.Client

// TestOperator installs the operator the way a user does (`make deploy` of
// config/default, with cert-manager for the webhook certificate) on the
// real node and runs a real two-rank PyTorch job with it.
func TestOperator(t *testing.T) {
	ctx := context.Background()
	repo, err := filepath.Abs("../..")
	require.NoError(t, err)
	// cert-manager's injector logs through controller-runtime's logger.
	ctrllog.SetLogger(klog.NewKlogr())
	var err2 error
	opClient, err2 = client.New(node.Config, client.Options{Scheme: cluster.Scheme()})
	require.NoError(t, err2)
	deployOperator(t, ctx, repo)
	t.Run("WebhookAnswersThroughItsService", testWebhookAnswers)
	t.Run("TwoRankPyTorchJobCompletes", testTwoRankPyTorchJob)
}

func deployOperator(t *testing.T, ctx context.Context, repo string) {
	t.Helper()
	began := time.Now()
	bin := filepath.Join(t.TempDir(), "manager")
	require.NoError(t, images.GoBinary(ctx, repo, "./cmd", bin))
	require.NoError(t, node.PushImage(ctx, images.Spec{
		Ref:        ManagerImage,
		Files:      []images.File{{Source: bin, Path: "/manager"}},
		Entrypoint: []string{"/manager"},
		// As the Dockerfile's distroless nonroot image: the Deployment
		// says runAsNonRoot.
		User: "65532:65532",
	}))
	t.Logf("manager image built and pushed in %s", time.Since(began).Round(100*time.Millisecond))

	files, err := certmanager.CRDFiles(repo)
	require.NoError(t, err)
	for _, f := range files {
		applyFile(t, ctx, f)
	}
	waitCRDsEstablished(t, ctx, "cert-manager.io")
	cmCtx, stopCM := context.WithCancel(context.Background())
	done, err := certmanager.Run(cmCtx, node.Kubeconfig)
	require.NoError(t, err)
	t.Cleanup(func() { stopCM(); <-done })

	// make deploy, as documented, against the real node.
	began = time.Now()
	cmd := exec.CommandContext(ctx, "make", "--no-print-directory", "deploy", "IMG="+ManagerImage,
		"DEPLOY_KUBECTL="+filepath.Join(binDir(repo), "kubectl"))
	cmd.Dir = repo
	cmd.Env = append(os.Environ(), "KUBECONFIG="+node.Kubeconfig)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "make deploy:\n%s", out)

	var dep appsv1.Deployment
	err = poll(3*time.Minute, func() bool {
		if node.Client.Get(ctx, client.ObjectKey{Namespace: OperatorNamespace, Name: ManagerDeployment}, &dep) != nil {
			return false
		}
		return dep.Status.AvailableReplicas >= 1
	})
	if err != nil {
		t.Fatalf("manager Deployment not Available: %v\nstatus: %+v\n%s", err, dep.Status, managerDiagnostics(ctx))
	}
	t.Logf("make deploy to an Available manager in %s", time.Since(began).Round(100*time.Millisecond))
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
		Files:     []images.File{{Source: filepath.Join(repo, "test", "trainer", "train.py"), Path: "/opt/trainer/train.py", Mode: 0o644}},
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
			// its output is redirected; the operator reserves every PET_*
			// variable, so these are flags.
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
	logs := workerLogs(ctx, ns)
	require.NoError(t, err, "job state %q, conditions %+v\n%s", got.Status.State, got.Status.Conditions, logs)
	require.Equal(t, mlv1.StateCompleted, got.Status.State, "conditions %+v\n%s", got.Status.Conditions, logs)
	t.Logf("two-rank job Completed in %s", time.Since(began).Round(100*time.Millisecond))
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
	_ = opClient.List(ctx, secrets, client.InNamespace(OperatorNamespace))
	for _, s := range secrets.Items {
		fmt.Fprintf(&b, "secret %s type %s keys %d\n", s.Name, s.Type, len(s.Data))
	}
	return b.String() + managerDiagnostics(ctx)
}

func binDir(repo string) string {
	if b := os.Getenv("REALNODE_BIN"); b != "" {
		return b
	}
	return filepath.Join(repo, "bin")
}

// applyFile creates every object of a YAML file (server-side apply).
func applyFile(t *testing.T, ctx context.Context, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err == io.EOF {
			break
		} else {
			require.NoError(t, err, path)
		}
		if len(u.Object) == 0 {
			continue
		}
		require.NoError(t, node.Client.Patch(ctx, u, client.Apply, client.FieldOwner("e2ereal"), client.ForceOwnership), "%s %s", u.GetKind(), u.GetName())
	}
}

func waitCRDsEstablished(t *testing.T, ctx context.Context, group string) {
	t.Helper()
	require.NoError(t, poll(time.Minute, func() bool {
		list := &apiextensionsv1.CustomResourceDefinitionList{}
		if opClient.List(ctx, list) != nil {
			return false
		}
		for _, crd := range list.Items {
			if crd.Spec.Group != group {
				continue
			}
			established := false
			for _, c := range crd.Status.Conditions {
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					established = true
				}
			}
			if !established {
				return false
			}
		}
		return true
	}))
}

// managerDiagnostics is what a failing deploy needs: the manager pods'
// states and the events of the operator namespace.
func managerDiagnostics(ctx context.Context) string {
	var b strings.Builder
	pods := &corev1.PodList{}
	_ = node.Client.List(ctx, pods, client.InNamespace(OperatorNamespace))
	for _, p := range pods.Items {
		fmt.Fprintf(&b, "pod %s: %s\n", p.Name, p.Status.Phase)
		for _, c := range p.Status.ContainerStatuses {
			fmt.Fprintf(&b, "  %s ready=%t restarts=%d state=%+v last=%+v\n", c.Name, c.Ready, c.RestartCount, c.State, c.LastTerminationState)
		}
		if log, err := readLog(OperatorNamespace, p.Name); err == nil {
			if len(log) > 3000 {
				log = log[len(log)-3000:]
			}
			fmt.Fprintf(&b, "  log:\n%s\n", log)
		}
	}
	events := &corev1.EventList{}
	_ = node.Client.List(ctx, events, client.InNamespace(OperatorNamespace))
	for _, e := range events.Items {
		fmt.Fprintf(&b, "event %s %s: %s\n", e.InvolvedObject.Name, e.Reason, e.Message)
	}
	return b.String()
}

func workerLogs(ctx context.Context, ns string) string {
	var b strings.Builder
	pods := &corev1.PodList{}
	_ = node.Client.List(ctx, pods, client.InNamespace(ns))
	for _, p := range pods.Items {
		fmt.Fprintf(&b, "pod %s: %s\n", p.Name, p.Status.Phase)
		if log, err := readLog(ns, p.Name); err == nil {
			if len(log) > 2000 {
				log = log[len(log)-2000:]
			}
			fmt.Fprintf(&b, "%s\n", log)
		} else {
			fmt.Fprintf(&b, "  (no log: %v)\n", err)
		}
	}
	events := &corev1.EventList{}
	_ = node.Client.List(ctx, events, client.InNamespace(ns))
	for _, e := range events.Items {
		fmt.Fprintf(&b, "event %s %s: %s\n", e.InvolvedObject.Name, e.Reason, e.Message)
	}
	return b.String()
}
