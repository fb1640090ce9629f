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
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/internal/localcluster"
	"github.com/ml-operator/ml-operator/internal/manager"
	"github.com/ml-operator/ml-operator/internal/realnode"
)

// TrainerImage is the example trainer (test/torch/trainer/train.py on Debian's
// PyTorch), built here.
const TrainerImage = "ghcr.io/ml-operator/trainer-example:e2e"

// opClient knows the operator's kinds and CRDs (node.Client knows only the
// built-in kinds).
var opClient client.Client

// TestOperator installs the operator the way a user does (`make deploy` of
// config/default, with cert-manager for the webhook certificate, and
// --prometheus-url naming a Prometheus built here that scrapes the model
// servers) on the real node, then runs real workloads with it side by side:
// a two-rank PyTorch job that loses a rank, a ModelDeployment of the
// project's model server, stepped rollouts judged by that Prometheus, the
// users' seed manifests, and a certificate renewal under admission load.
// Then, alone, a two-rank job whose node is drained. Last, the manager's
// API calls are checked against the RBAC it ships.
func TestOperator(t *testing.T) {
	// cert-manager's injector logs through controller-runtime's logger.
	ctrllog.SetLogger(klog.NewKlogr())
	var err error
	opClient, err = client.New(node.Config, client.Options{Scheme: localcluster.Scheme()})
	require.NoError(t, err)
	deployPrometheus(t)
	deployOperator(t)
	if !t.Run("WebhookAnswersThroughItsService", testWebhookAnswers) {
		return
	}
	// Side by side: most of each is waiting (epochs, probes, the kubelet's
	// Secret sync), and the machine has two cores.
	t.Run("Workloads", func(t *testing.T) {
		for name, f := range map[string]func(*testing.T){
			"TwoRankPyTorchJobResumesAfterARankIsKilled": testTwoRankPyTorchJob,
			"ServingTwoVersionsThenRollback":             testServing,
			"ModelPathsFetchedAndMounted":                testModelPaths,
			"SeedExamples":                               testSeedExamples,
			"WebhookCertificateRenewedUnderLoad":         testCertificateRenewalUnderLoad,
			"RestrictedNamespace":                        testRestrictedNamespace,
			"ProgressiveDelivery":                        testProgressiveDelivery,
			"ElasticGangShrinksAndGrowsBack":             testElasticGangShrinksAndGrowsBack,
			"StalledGangRestarts":                        testStalledGangRestarts,
		} {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				f(t)
			})
		}
	})
	// It cordons the only node, so it runs alone, after the workloads.
	t.Run("DrainResumesFromTheStepSavedAtSIGTERM", testDrainResumesFromTheStepSavedAtSIGTERM)
	t.Run("ManagerRBACCoversEveryCall", testManagerRBAC)
}

// deployOperator runs `make deploy` of config/default with the manager's
// --prometheus-url set (testdata/deploy-with-prometheus, in the flag's
// environment form) to the Prometheus deployPrometheus started.
func deployOperator(t testing.TB) {
	t.Helper()
	cmCtx, stopCM := context.WithCancel(context.Background())
	done, err := node.DeployOperatorWith(cmCtx, realnode.OperatorOptions{DeployDir: "test/e2ereal/testdata/deploy-with-prometheus"})
	if done != nil {
		t.Cleanup(func() { stopCM(); <-done })
	} else {
		t.Cleanup(stopCM)
	}
	require.NoError(t, err)
	dep := &appsv1.Deployment{}
	require.NoError(t, node.Client.Get(context.Background(), client.ObjectKey{Namespace: realnode.OperatorNamespace, Name: realnode.ManagerDeployment}, dep))
	env := map[string]string{}
	for _, e := range dep.Spec.Template.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	require.Equal(t, realnode.PrometheusURL, env[manager.EnvName("prometheus-url")], "the overlay's Prometheus URL")
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

	// `kubectl apply` of manifests from the invalid corpus gets the
	// webhook's words, field path first: a v1 TrainingJob, a v1alpha1 one
	// (converted by the conversion webhook, its causes naming v1alpha1
	// fields) and a ModelDeployment.
	for _, file := range []string{
		"trainingjob-elastic-min-above-max.yaml",
		"trainingjob-v1alpha1-gpus-out-of-range.yaml",
		"modeldeployment-weights-sum.yaml",
	} {
		path := filepath.Join(mustAbs("../.."), "test", "testdata", "invalid", file)
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		var expect string
		for _, line := range strings.Split(string(data), "\n") {
			if e, ok := strings.CutPrefix(line, "# expect: "); ok {
				expect = e
				break
			}
		}
		var obj struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		require.NoError(t, yaml.Unmarshal(data, &obj), file)
		require.NotEmpty(t, expect, "%s has no # expect: line", file)
		out, err := kubectl("apply", "-n", ns, "-f", path)
		require.Error(t, err, "kubectl apply -f %s was accepted:\n%s", file, out)
		want := fmt.Sprintf("The %s %q is invalid: %s", obj.Kind, obj.Metadata.Name, expect)
		require.Contains(t, out, want, "kubectl apply -f %s", file)
		t.Logf("$ kubectl apply -f test/testdata/invalid/%s\n%s", file, strings.TrimSpace(out))
	}
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
