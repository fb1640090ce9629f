//go:build e2e_real

package e2ereal

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/internal/images"
)

// NonRootProbeImage is the probe with a numeric non-root USER, as images
// built for restricted clusters have.
const NonRootProbeImage = "ghcr.io/ml-operator/realnode-probe:nonroot"

// testRestrictedNamespace: in a namespace whose Pod Security admission
// enforces "restricted", a job with no security settings is admitted and
// completes under the operator's defaults; a job that asks for a
// privileged container is refused by the API server and its user sees
// the refusal on the job (Running=False FailedCreate and a Warning
// FailedCreate event); and a root image under the defaults is refused by
// the real kubelet, which the job shows as ContainerCannotStart.
func testRestrictedNamespace(t *testing.T) {
	ctx := context.Background()
	repo, err := filepath.Abs("../..")
	require.NoError(t, err)
	bin := filepath.Join(t.TempDir(), "probe")
	require.NoError(t, images.GoBinary(ctx, repo, "./test/e2ereal/probe", bin))
	require.NoError(t, node.PushImage(ctx, images.Spec{
		Ref: NonRootProbeImage, Files: []images.File{{Source: bin, Path: "/probe"}},
		Entrypoint: []string{"/probe"}, User: "1000:1000",
	}))

	ns := namespace(t)
	nsObj := &corev1.Namespace{}
	require.NoError(t, node.Client.Get(ctx, client.ObjectKey{Name: ns}, nsObj))
	nsObj.Labels["pod-security.kubernetes.io/enforce"] = "restricted"
	nsObj.Labels["pod-security.kubernetes.io/enforce-version"] = "latest"
	require.NoError(t, node.Client.Update(ctx, nsObj))

	job := func(name, image string, tpl mlv1.WorkerTemplate) *mlv1.TrainingJob {
		return &mlv1.TrainingJob{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: mlv1.TrainingJobSpec{
				Framework: "pytorch", Image: image, Command: []string{"/probe", "say", "trained"},
				NumWorkers: 1, GPUsPerWorker: ptr.To[int32](0), Template: tpl,
				// No provisioner on the node: checkpoints in S3 need no claim.
				Checkpoint: mlv1.CheckpointSpec{Storage: mlv1.CheckpointStorage{Type: mlv1.StorageTypeS3, URI: "s3://checkpoints/e2e"}},
			},
		}
	}
	defaults := job("defaults", NonRootProbeImage, mlv1.WorkerTemplate{})
	privileged := job("privileged", NonRootProbeImage, mlv1.WorkerTemplate{
		SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)}})
	// Off OpenShift the operator pins user 1000, so a root image starts;
	// a job whose own podSecurityContext asks for runAsNonRoot with no user
	// is what the kubelet refuses for a root image.
	root := job("root-image", ProbeImage, mlv1.WorkerTemplate{PodSecurityContext: &corev1.PodSecurityContext{
		RunAsNonRoot: ptr.To(true), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}})
	for _, j := range []*mlv1.TrainingJob{defaults, privileged, root} {
		require.NoError(t, opClient.Create(ctx, j))
	}

	cond := func(j *mlv1.TrainingJob, typ string) *metav1.Condition {
		for i := range j.Status.Conditions {
			if j.Status.Conditions[i].Type == typ {
				return &j.Status.Conditions[i]
			}
		}
		return nil
	}
	waitFor := func(j *mlv1.TrainingJob, what string, ok func(*mlv1.TrainingJob) bool) *mlv1.TrainingJob {
		got := &mlv1.TrainingJob{}
		err := poll(4*time.Minute, func() bool {
			return opClient.Get(ctx, client.ObjectKeyFromObject(j), got) == nil && ok(got)
		})
		require.NoError(t, err, "%s: %s; status %+v\n%s", j.Name, what, got.Status, node.NamespaceDiagnostics(ctx, ns))
		return got
	}

	got := waitFor(defaults, "Completed", func(j *mlv1.TrainingJob) bool { return j.Status.State == mlv1.StateCompleted })
	t.Logf("the default job completed in the restricted namespace: %s", cond(got, mlv1.TrainingJobSucceeded).Message)

	got = waitFor(privileged, "Running=False FailedCreate", func(j *mlv1.TrainingJob) bool {
		c := cond(j, mlv1.TrainingJobRunning)
		return c != nil && c.Reason == mlv1.ReasonFailedCreate
	})
	msg := cond(got, mlv1.TrainingJobRunning).Message
	t.Logf("privileged job: %s", msg)
	require.Contains(t, msg, `violates PodSecurity "restricted:latest": privileged`)
	var evs eventsv1.EventList
	require.NoError(t, poll(time.Minute, func() bool {
		if node.Client.List(ctx, &evs, client.InNamespace(ns)) != nil {
			return false
		}
		for _, e := range evs.Items {
			if e.Regarding.Name == privileged.Name && e.Reason == mlv1.EventFailedCreate && e.Type == corev1.EventTypeWarning &&
				strings.Contains(e.Note, "violates PodSecurity") {
				t.Logf("event: %s %s: %s", e.Type, e.Reason, e.Note)
				return true
			}
		}
		return false
	}), "no Warning FailedCreate event on the privileged job")

	got = waitFor(root, "Running=False ContainerCannotStart", func(j *mlv1.TrainingJob) bool {
		c := cond(j, mlv1.TrainingJobRunning)
		return c != nil && c.Reason == mlv1.ReasonContainerCannotStart
	})
	msg = cond(got, mlv1.TrainingJobRunning).Message
	t.Logf("root image job: %s", msg)
	require.Contains(t, msg, "CreateContainerConfigError: container has runAsNonRoot and image will run as root")
}
