package security_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/controllers/modeldeployment"
	"github.com/ml-operator/ml-operator/controllers/trainingjob"
	"github.com/ml-operator/ml-operator/internal/podsecurity"
	"github.com/ml-operator/ml-operator/internal/storageinit"
	"github.com/ml-operator/ml-operator/test/testutil"
)

// restrictedNamespace is a namespace whose Pod Security admission enforces
// "restricted", with the default service account the ServiceAccount
// admission plugin looks for (envtest runs no controller-manager to make it).
func restrictedNamespace(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "restricted-", Labels: map[string]string{
		psaapi.EnforceLevelLabel:   string(psaapi.LevelRestricted),
		psaapi.EnforceVersionLabel: psaapi.VersionLatest,
	}}}
	require.NoError(t, k8s.Create(ctx, ns))
	require.NoError(t, k8s.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns.Name}}))
	return ns.Name
}

// createDryRun sends pod to the real API server (dry run, so nothing is
// stored); its Pod Security admission answers as it would for the operator.
func createDryRun(pod *corev1.Pod) error {
	return k8s.Create(context.Background(), pod, client.DryRunAll)
}

// The real API server's Pod Security admission, enforcing "restricted" in
// the namespace, admits every worker pod and every model server pod the
// operator builds and the manager pod of every install path, and refuses a worker whose template asks for more (so
// the namespace really enforces, and the operator's own pods are not
// admitted by accident).
func TestRestrictedNamespaceAdmitsTheOperatorsPods(t *testing.T) {
	ns := restrictedNamespace(t)

	t.Run("worker pods", func(t *testing.T) {
		for _, fw := range []mlv1.Framework{mlv1.FrameworkPyTorch, mlv1.FrameworkTensorFlow, mlv1.FrameworkXGBoost, mlv1.FrameworkJAX} {
			for _, gpus := range []int32{0, 1} {
				job := testutil.TrainingJob(fmt.Sprintf("%s-%d", fw, gpus), ns).Framework(fw).Workers(2).GPUs(gpus).Obj()
				job.UID = "0b6f2a9e-5a51-4c1e-9d0c-3f1f2b7f7c01" // the owner reference the pods carry needs one
				job.Spec.DataVolume = &mlv1.DataVolumeSpec{ClaimName: "imagenet", ReadOnly: true}
				for rank := range int32(2) {
					pod := trainingjob.DesiredWorkerPod(job, rank, 0, workerConfig())
					assert.NoErrorf(t, createDryRun(pod), "%s rank %d", job.Name, rank)
				}
			}
		}
	})

	t.Run("model server pods", func(t *testing.T) {
		md := testutil.ModelDeployment("sentiment", ns).Version("v1", 50, "s3://models/v1").Version("v2", 50, "pvc://models/m2").Obj()
		md.Spec.Storage = &mlv1.ModelStorageSpec{}
		for _, v := range md.Spec.Versions {
			d, err := modeldeployment.DesiredDeployment(md, v, nil, podsecurity.NewDefaults(), storageinit.DefaultImage)
			require.NoError(t, err)
			pod := &corev1.Pod{ObjectMeta: *d.Spec.Template.ObjectMeta.DeepCopy(), Spec: *d.Spec.Template.Spec.DeepCopy()}
			pod.Name, pod.Namespace = d.Name+"-pod", ns
			assert.NoErrorf(t, createDryRun(pod), "version %s", v.Name)
		}
	})

	t.Run("manager pods", func(t *testing.T) {
		for _, mp := range managerPods(t) {
			pod := &corev1.Pod{ObjectMeta: *mp.template.ObjectMeta.DeepCopy(), Spec: *mp.template.Spec.DeepCopy()}
			pod.GenerateName, pod.Namespace = "manager-", ns
			if sa := pod.Spec.ServiceAccountName; sa != "" && sa != "default" {
				err := k8s.Create(context.Background(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: ns}})
				if !apierrors.IsAlreadyExists(err) {
					require.NoError(t, err)
				}
			}
			assert.NoErrorf(t, createDryRun(pod), "%s", mp.source)
		}
	})

	t.Run("a template asking for more is refused by the namespace", func(t *testing.T) {
		job := testutil.TrainingJob("privileged", ns).Workers(1).GPUs(0).Obj()
		job.UID = "0b6f2a9e-5a51-4c1e-9d0c-3f1f2b7f7c02"
		job.Spec.Template.SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
		err := createDryRun(trainingjob.DesiredWorkerPod(job, 0, 0, workerConfig()))
		require.Error(t, err)
		assert.Truef(t, apierrors.IsForbidden(err), "want Forbidden, got %v", err)
		assert.Contains(t, err.Error(), `violates PodSecurity "restricted:latest"`)
	})
}
