//go:build e2e_olm

package e2eolm

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/internal/realnode"
)

// sampleOutcome is a state a sample of the CSV reaches on the real node:
// the condition that says what it waits for or why it failed, and its
// status, reason and message.
type sampleOutcome struct {
	// condition is the condition type; it has status (False when unset)
	// and reason.
	condition, reason string
	status            metav1.ConditionStatus
	// message is a regular expression its message matches.
	message string
	// phase is the ModelDeployment's status.phase, when set.
	phase mlv1.ModelDeploymentPhase
}

// sampleOutcomes are the outcomes of 0.2.0's alm-examples, by kind/name:
// any one of a sample's outcomes will do.
// The samples name upstream images on docker.io, models on S3 and GPUs: a
// cluster with GPUs, a way out to those registries and the models' bucket
// runs them (until the users' own scripts, which no upstream image holds).
// The real node has none of that, by the project's network rule and by
// its hardware, so each sample reaches the state in which the operator
// says, in its status, exactly what it waits for:
//   - the ModelDeployments' storage initializer cannot fetch their s3://
//     models (the cluster's DNS answers cluster names only): Healthy=False
//     ModelFetchFailed quoting the URL, phase Pending;
//   - the GPU jobs' ranks cannot be scheduled on a node without
//     nvidia.com/gpu (resnet50-ddp asks for more CPU and memory too):
//     Running=False Unschedulable, quoting the scheduler;
//   - mnist-simple (no GPU) is scheduled. Its image is the operator's
//     default PyTorch image, which make e2e-real pushes into the node's
//     registry (whose storage, ~/.cache/ml-operator/registry, outlives
//     the node) under that name: the trainer image, with python. Where
//     it was pushed, the rank runs and exits 2 (its /workspace/train.py
//     is in no image, not in the upstream one either) and the gang
//     restarts until backoffLimit (Restarting=True WorkerFailed, then
//     Failed=True BackoffLimitExceeded); where it was not, the image
//     cannot be pulled: Running=False ContainerCannotStart, quoting the
//     kubelet. Both were seen on the real node.
//
// Each TrainingJob's checkpoint claim is bound to a static volume first,
// as a provisioner would bind it, so that the claim is not what they wait
// for.
var sampleOutcomes = map[string][]sampleOutcome{
	"ModelDeployment/fraud-detector": {{condition: mlv1.ModelDeploymentHealthy, reason: mlv1.ReasonModelFetchFailed,
		message: `the storage initializer could not fetch the model: GET s3://models/fraud/v[12]/model\.bst: `, phase: mlv1.PhasePending}},
	"ModelDeployment/recommender": {{condition: mlv1.ModelDeploymentHealthy, reason: mlv1.ReasonModelFetchFailed,
		message: `the storage initializer could not fetch the model: GET s3://models/recommender/[ab]/model\.mar: `, phase: mlv1.PhasePending}},
	"TrainingJob/bert-finetune": {{condition: mlv1.TrainingJobRunning, reason: mlv1.ReasonUnschedulable,
		message: `\(pod bert-finetune-worker-\d+\) is unschedulable: .*Insufficient nvidia\.com/gpu`}},
	"TrainingJob/mnist-simple": {
		{condition: mlv1.TrainingJobRunning, reason: mlv1.ReasonContainerCannotStart,
			message: `rank 0 \(pod mnist-simple-worker-0\) cannot start: container \S+: (ErrImagePull|ImagePullBackOff): .*pytorch/pytorch:2\.5\.1-cuda12\.4-cudnn9-runtime`},
		{condition: mlv1.TrainingJobRestarting, status: metav1.ConditionTrue, reason: mlv1.ReasonWorkerFailed,
			message: `rank 0 \(pod mnist-simple-worker-0\) failed: exit code 2`},
		{condition: mlv1.TrainingJobFailed, status: metav1.ConditionTrue, reason: mlv1.ReasonBackoffLimitExceeded,
			message: `exit code 2`},
	},
	"TrainingJob/resnet50-ddp": {{condition: mlv1.TrainingJobRunning, reason: mlv1.ReasonUnschedulable,
		message: `\(pod resnet50-ddp-worker-\d+\) is unschedulable: .*Insufficient cpu.*Insufficient nvidia\.com/gpu`}},
}

// matches reports whether conds and phase show the outcome o.
func (o sampleOutcome) matches(conds []metav1.Condition, phase string) bool {
	status := o.status
	if status == "" {
		status = metav1.ConditionFalse
	}
	cond := meta.FindStatusCondition(conds, o.condition)
	return cond != nil && cond.Status == status && cond.Reason == o.reason && regexp.MustCompile(o.message).MatchString(cond.Message) &&
		(o.phase == "" || phase == string(o.phase))
}

// testSamples creates the installed CSV's alm-examples as the OperatorHub
// form does (the example as written, in the namespace chosen) and waits
// for each to reach its outcome on the real node (sampleOutcomes); then it
// deletes them, and they go. It runs under 0.2.0, the channel's head: what
// a user installing today gets.
func testSamples(t *testing.T) {
	ctx := context.Background()
	csv := &operatorsv1alpha1.ClusterServiceVersion{}
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: realnode.OperatorNamespace, Name: CSV020}, csv))
	var examples []json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(csv.Annotations["alm-examples"]), &examples), "the CSV's alm-examples")
	ns := namespace(t)

	var samples []*unstructured.Unstructured
	seen := map[string]bool{}
	for _, raw := range examples {
		u := &unstructured.Unstructured{}
		require.NoError(t, u.UnmarshalJSON(raw))
		u.SetNamespace(ns)
		key := u.GetKind() + "/" + u.GetName()
		_, known := sampleOutcomes[key]
		require.True(t, known, "the CSV's alm-examples has %s, whose outcome on the real node the suite does not know: add it to sampleOutcomes", key)
		seen[key] = true
		if u.GetKind() == "TrainingJob" {
			var job mlv1.TrainingJob
			require.NoError(t, json.Unmarshal(raw, &job), key)
			if job.Spec.UsesCheckpointPVC() {
				size := resource.MustParse(mlv1.DefaultCheckpointSize)
				if s := job.Spec.Checkpoint.Storage.Size; s != nil {
					size = *s
				}
				staticVolume(t, ns, mlv1.CheckpointPVCName(job.Name), size)
			}
		}
		require.NoError(t, c.Create(ctx, u.DeepCopy()), "creating %s from the CSV's alm-examples", key)
		samples = append(samples, u)
	}
	for key := range sampleOutcomes {
		assert.True(t, seen[key], "sampleOutcomes has %s, which the CSV's alm-examples do not", key)
	}
	t.Logf("created the %d alm-examples of %s in %s", len(samples), CSV020, ns)

	began := time.Now()
	for _, u := range samples {
		key := u.GetKind() + "/" + u.GetName()
		want := sampleOutcomes[key]
		var conds []metav1.Condition
		var phase string
		// mnist-simple's wait may include pulling a 530 MB image (3 min 19 s
		// at a load average of 25).
		err := poll(8*time.Minute, func() bool {
			var err error
			conds, phase, err = sampleStatus(ctx, u.GetKind(), client.ObjectKey{Namespace: ns, Name: u.GetName()})
			if err != nil {
				return false
			}
			for _, o := range want {
				if o.matches(conds, phase) {
					return true
				}
			}
			return false
		})
		var lines []string
		for _, cd := range conds {
			lines = append(lines, fmt.Sprintf("  %s=%s %s: %s", cd.Type, cd.Status, cd.Reason, cd.Message))
		}
		require.NoError(t, err, "sample %s never reached %+v; phase/state %q, conditions:\n%s\n%s",
			key, want, phase, strings.Join(lines, "\n"), node.NamespaceDiagnostics(ctx, ns))
		t.Logf("sample %s (phase/state %q), %s after creation:\n%s", key, phase, time.Since(began).Round(time.Second), strings.Join(lines, "\n"))
	}
	t.Logf("kubectl get trainingjobs,modeldeployments,pvc -n %s:\n%s", ns,
		kubectl(t, "get", "trainingjobs,modeldeployments,pvc", "-n", ns))

	// The Subscription's spec.config.env reached the manager (OLM puts it
	// in the Deployment) and took effect: a GPU worker pod carries the
	// node selector it names.
	dep := &appsv1.Deployment{}
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: realnode.OperatorNamespace, Name: realnode.ManagerDeployment}, dep))
	assert.Contains(t, dep.Spec.Template.Spec.Containers[0].Env,
		corev1.EnvVar{Name: "ML_OPERATOR_GPU_NODE_SELECTOR", Value: GPUPool[0] + "=" + GPUPool[1]}, "the manager's environment under OLM")
	gpuPod := &corev1.Pod{}
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "bert-finetune-worker-0"}, gpuPod))
	assert.Equal(t, GPUPool[1], gpuPod.Spec.NodeSelector[GPUPool[0]], "bert-finetune-worker-0's nodeSelector %v", gpuPod.Spec.NodeSelector)
	t.Logf("the Subscription's ML_OPERATOR_GPU_NODE_SELECTOR took effect: bert-finetune-worker-0's nodeSelector %v", gpuPod.Spec.NodeSelector)

	// A user deletes the samples: they go, with their pods (the
	// finalizers are released by 0.2.0's manager).
	for _, u := range samples {
		require.NoError(t, client.IgnoreNotFound(c.Delete(ctx, u.DeepCopy())), "deleting %s/%s", u.GetKind(), u.GetName())
	}
	var left []string
	require.NoError(t, poll(2*time.Minute, func() bool {
		left = left[:0]
		for _, u := range samples {
			o := &unstructured.Unstructured{}
			o.SetGroupVersionKind(u.GroupVersionKind())
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: u.GetName()}, o); !isNotFound(err) {
				left = append(left, u.GetKind()+"/"+u.GetName())
			}
		}
		sort.Strings(left)
		return len(left) == 0
	}), "samples still there 2 minutes after their deletion: %v\n%s", left, node.NamespaceDiagnostics(ctx, ns))
}

// sampleStatus reads a sample's conditions and its TrainingJob state or
// ModelDeployment phase.
func sampleStatus(ctx context.Context, kind string, key client.ObjectKey) ([]metav1.Condition, string, error) {
	switch kind {
	case "TrainingJob":
		o := &mlv1.TrainingJob{}
		err := c.Get(ctx, key, o)
		return o.Status.Conditions, string(o.Status.State), err
	case "ModelDeployment":
		o := &mlv1.ModelDeployment{}
		err := c.Get(ctx, key, o)
		return o.Status.Conditions, string(o.Status.Phase), err
	}
	return nil, "", fmt.Errorf("no sample kind %s", kind)
}
