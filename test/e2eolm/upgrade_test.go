//go:build e2e_olm

package e2eolm

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/internal/realnode"
)

// The work the upgrade must not disturb.
const (
	// JobName runs one worker that holds until the test creates
	// ReleaseFile in its checkpoint volume, after the upgrade has been
	// checked (at most JobHold: the ModelDeployment's start, the approval,
	// OLM's install of 0.2.0, the manager's rollout and 30 s of load took
	// about 4 minutes at a load average of 20).
	JobName     = "inflight"
	ReleaseFile = "release"
	JobHold     = 15 * time.Minute
	// ModelName is served by the project's model server, two replicas.
	ModelName = "fraud"
)

// jobVolume is the host directory of the in-flight job's checkpoint
// volume, where the test creates ReleaseFile.
var jobVolume string

// managerSA is the manager's service account as OLM creates it.
const managerSA = "system:serviceaccount:" + realnode.OperatorNamespace + ":ml-operator-controller-manager"

// testWorkInFlight starts the work the upgrade runs under: a TrainingJob
// whose worker runs for minutes with its checkpoint PVC, and a
// ModelDeployment answering predictions. Both are made by 0.1.0.
func testWorkInFlight(t *testing.T) {
	ctx := context.Background()
	empty := ""
	size := resource.MustParse("1Gi")
	jobVolume = staticVolume(t, work, mlv1.CheckpointPVCName(JobName), size)
	job := &mlv1.TrainingJob{
		ObjectMeta: metav1.ObjectMeta{Name: JobName, Namespace: work},
		Spec: mlv1.TrainingJobSpec{
			Framework:     "pytorch",
			Image:         ProbeImage,
			Command:       []string{"/probe", "hold", "/checkpoints/" + ReleaseFile, JobHold.String()},
			NumWorkers:    1,
			GPUsPerWorker: ptr.To[int32](0),
			Checkpoint: mlv1.CheckpointSpec{
				Path:    "/checkpoints",
				Storage: mlv1.CheckpointStorage{StorageClassName: &empty, Size: &size},
			},
		},
	}
	require.NoError(t, c.Create(ctx, job))

	store := modelStore(t, work, map[string]string{"fraud.json": `{"weights":[2],"bias":1}`})
	md := &mlv1.ModelDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: ModelName, Namespace: work},
		Spec: mlv1.ModelDeploymentSpec{
			ModelName:   "fraud-detector",
			Framework:   mlv1.ModelFrameworkSKLearn,
			Image:       ModelServerImage,
			Versions:    []mlv1.ModelVersion{{Name: "v1", Weight: ptr.To[int32](100), ModelPath: store + "/fraud.json"}},
			Scaling:     mlv1.ScalingSpec{MinReplicas: 2, MaxReplicas: ptr.To[int32](2)},
			HealthCheck: mlv1.HealthCheckSpec{IntervalSeconds: 3, TimeoutSeconds: 2, FailureThreshold: 2},
		},
	}
	require.NoError(t, c.Create(ctx, md))

	began := time.Now()
	got := &mlv1.TrainingJob{}
	require.NoError(t, poll(3*time.Minute, func() bool {
		return c.Get(ctx, client.ObjectKeyFromObject(job), got) == nil && got.Status.State == mlv1.StateRunning && workerRunning(ctx)
	}), "TrainingJob state %q conditions %+v\n%s", got.Status.State, got.Status.Conditions, node.NamespaceDiagnostics(ctx, work))
	t.Logf("TrainingJob %s Running (its worker holds until released) %s after creation", JobName, time.Since(began).Round(100*time.Millisecond))
	gotMD := &mlv1.ModelDeployment{}
	require.NoError(t, poll(3*time.Minute, func() bool {
		if c.Get(ctx, client.ObjectKeyFromObject(md), gotMD) != nil || gotMD.Status.Phase != mlv1.PhaseRunning {
			return false
		}
		for _, v := range gotMD.Status.ActiveVersions {
			if v.Name == "v1" && v.HealthyReplicas == 2 {
				return true
			}
		}
		return false
	}), "ModelDeployment status %+v\n%s", gotMD.Status, node.NamespaceDiagnostics(ctx, work))
	// Ready pods are not yet routed pods: wait for kube-proxy's rules.
	require.NoError(t, node.WaitServiceRouted(ctx, work, ModelName, 2, time.Minute))
	counts := predict(t, "before", gotMD.Status.URL, 50)
	require.Equal(t, map[string]int{"200": 50}, counts.Codes, "errors: %v", counts.Errors)
	t.Logf("ModelDeployment %s serving at %s with 2 Ready replicas, %s after creation", ModelName, gotMD.Status.URL, time.Since(began).Round(100*time.Millisecond))
}

// testUpgrade approves the upgrade to 0.2.0 with the work running. 0.2.0
// differs from 0.1.0 as a release does: the manager is this tree's (0.1.0's
// is built from its commit), the TrainingJob schema has a new field
// (spec.scheduling.placementTimeout) and new rules, and the manager needs a
// new permission (StorageClasses get/list). Then: the CSV replaces the
// old one, the job keeps its pod and completes without a restart, the
// v1alpha1 object reads back, and the ModelDeployment answers every
// request sent during the upgrade.
func testUpgrade(t *testing.T) {
	ctx := context.Background()
	ns := realnode.OperatorNamespace

	// 0.1.0 as it runs: no StorageClasses permission, no placementTimeout.
	// (0.2.0's CSV also adds Namespaces get/list/watch, but OLM grants
	// those to every operator of an AllNamespaces OperatorGroup with the
	// roles it makes from the CSV: found on the real node, and in OLM's
	// ensureSingletonRBAC. So StorageClasses are the new permission the
	// upgrade really brings.)
	require.False(t, managerCan(t, "list", "storage.k8s.io", "storageclasses"), "0.1.0's manager may already list StorageClasses")
	require.True(t, managerCan(t, "list", "", "namespaces"), "OLM grants an AllNamespaces operator list on namespaces")
	require.False(t, hasPlacementTimeout(t), "0.1.0's TrainingJob schema already has spec.scheduling.placementTimeout")

	// The upgrade waits for approval.
	sub := &operatorsv1alpha1.Subscription{}
	ip := &operatorsv1alpha1.InstallPlan{}
	require.NoError(t, poll(3*time.Minute, func() bool {
		if c.Get(ctx, client.ObjectKey{Namespace: ns, Name: Package}, sub) != nil || sub.Status.InstallPlanRef == nil {
			return false
		}
		return c.Get(ctx, client.ObjectKey{Namespace: ns, Name: sub.Status.InstallPlanRef.Name}, ip) == nil &&
			len(ip.Spec.ClusterServiceVersionNames) == 1 && ip.Spec.ClusterServiceVersionNames[0] == CSV020 &&
			ip.Status.Phase == operatorsv1alpha1.InstallPlanPhaseRequiresApproval
	}), "Subscription state %q, InstallPlan %s csvs %v phase %q", sub.Status.State, ip.Name, ip.Spec.ClusterServiceVersionNames, ip.Status.Phase)
	t.Logf("InstallPlan %s for %s waits for approval (Subscription state %s)", ip.Name, CSV020, sub.Status.State)
	assert.True(t, isNotFound(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: CSV020}, &operatorsv1alpha1.ClusterServiceVersion{})),
		"the 0.2.0 CSV exists before the InstallPlan was approved")

	before := workerPod(t)
	md := &mlv1.ModelDeployment{}
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: work, Name: ModelName}, md))
	load := startLoad(md.Status.URL)

	ip.Spec.Approved = true
	require.NoError(t, c.Update(ctx, ip))
	began := time.Now()
	csv := &operatorsv1alpha1.ClusterServiceVersion{}
	err := poll(6*time.Minute, func() bool {
		return c.Get(ctx, client.ObjectKey{Namespace: ns, Name: CSV020}, csv) == nil &&
			(csv.Status.Phase == operatorsv1alpha1.CSVPhaseSucceeded || csv.Status.Phase == operatorsv1alpha1.CSVPhaseFailed)
	})
	require.NoError(t, err, "CSV phase %q reason %q message %q", csv.Status.Phase, csv.Status.Reason, csv.Status.Message)
	require.Equal(t, operatorsv1alpha1.CSVPhaseSucceeded, csv.Status.Phase, "reason %q message %q", csv.Status.Reason, csv.Status.Message)
	require.Equal(t, CSV010, csv.Spec.Replaces)
	t.Logf("CSV %s Succeeded %s after approval", CSV020, time.Since(began).Round(100*time.Millisecond))
	require.NoError(t, poll(3*time.Minute, func() bool {
		return isNotFound(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: CSV010}, &operatorsv1alpha1.ClusterServiceVersion{}))
	}), "the replaced CSV %s is still there", CSV010)
	dep := &appsv1.Deployment{}
	manager020 := managerImage(t, CSV020)
	require.NoError(t, poll(3*time.Minute, func() bool {
		if c.Get(ctx, client.ObjectKey{Namespace: ns, Name: realnode.ManagerDeployment}, dep) != nil {
			return false
		}
		s := dep.Status
		return dep.Spec.Template.Spec.Containers[0].Image == manager020 && s.ObservedGeneration == dep.Generation &&
			s.UpdatedReplicas == *dep.Spec.Replicas && s.AvailableReplicas == *dep.Spec.Replicas && s.Replicas == *dep.Spec.Replicas
	}), "manager Deployment status %+v\n%s", dep.Status, node.OperatorDiagnostics(ctx))
	t.Logf("%s replaced %s and the manager runs %s on all %d replicas, %s after approval", CSV020, CSV010, manager020, dep.Status.Replicas,
		time.Since(began).Round(100*time.Millisecond))
	// The new manager has taken over: let it reconcile the work for a
	// while under load.
	time.Sleep(30 * time.Second)
	total := load.stop()
	t.Logf("during the upgrade (%s): %d predictions, by code %v", time.Since(began).Round(100*time.Millisecond), total.n, total.codes)
	require.Greater(t, total.n, 0, "no prediction was sent during the upgrade")
	assert.Equal(t, map[string]int{"200": total.n}, total.codes, "failed predictions during the upgrade; errors: %v", total.errors)

	// 0.2.0's RBAC and schema are in place.
	assert.True(t, managerCan(t, "list", "storage.k8s.io", "storageclasses"), "0.2.0's manager may not list StorageClasses")
	assert.True(t, hasPlacementTimeout(t), "the TrainingJob schema has no spec.scheduling.placementTimeout after the upgrade")

	// The job kept its pod, unrestarted, and was running when 0.2.0 took
	// over.
	job := &mlv1.TrainingJob{}
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: work, Name: JobName}, job))
	require.Equal(t, mlv1.StateRunning, job.Status.State, "the job was not running through the upgrade")
	after := workerPod(t)
	require.Equal(t, before.UID, after.UID, "the worker pod was replaced during the upgrade")
	require.Equal(t, int32(0), after.Status.ContainerStatuses[0].RestartCount, "the worker restarted during the upgrade")
	// Let the worker finish: it exits 0 once the file is in its volume.
	require.NoError(t, os.WriteFile(filepath.Join(jobVolume, ReleaseFile), nil, 0o644))
	require.NoError(t, poll(3*time.Minute, func() bool {
		return c.Get(ctx, client.ObjectKeyFromObject(job), job) == nil &&
			(job.Status.State == mlv1.StateCompleted || job.Status.State == mlv1.StateFailed)
	}), "job state %q conditions %+v\n%s", job.Status.State, job.Status.Conditions, node.NamespaceDiagnostics(ctx, work))
	require.Equal(t, mlv1.StateCompleted, job.Status.State, "conditions %+v", job.Status.Conditions)
	assert.Equal(t, int32(0), job.Status.Restarts, "status.restarts")
	done := &corev1.Pod{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(after), done); err == nil {
		assert.Equal(t, before.UID, done.UID, "the worker pod was replaced")
		assert.Equal(t, int32(0), done.Status.ContainerStatuses[0].RestartCount, "the worker restarted")
	}
	t.Logf("TrainingJob %s Completed under 0.2.0 with its pod %s (uid %s) and no restart", JobName, after.Name, after.UID)

	// The object stored through v1alpha1 under 0.1.0 reads back in both
	// versions under 0.2.0's CRD and conversion webhook.
	v1 := kubectl(t, "get", "trainingjobs.v1.ml.example.com", "old-style", "-n", work,
		"-o", "jsonpath={.apiVersion} numWorkers={.spec.numWorkers} checkpoint.path={.spec.checkpoint.path}")
	assert.Equal(t, "ml.example.com/v1 numWorkers=3 checkpoint.path=/ckpt", v1)
	old := kubectl(t, "get", "trainingjobs.v1alpha1.ml.example.com", "old-style", "-n", work,
		"-o", "jsonpath={.apiVersion} workers={.spec.workers} checkpointDir={.spec.checkpointDir}")
	assert.Equal(t, "ml.example.com/v1alpha1 workers=3 checkpointDir=/ckpt", old)

	// 0.2.0's new field is one v1alpha1 cannot express: a write through
	// v1alpha1 keeps it only because 0.2.0's conversion webhook carries the
	// v1 spec across (in an annotation that never reaches the stored
	// object). placementTimeout may change at any time, even on a job that
	// is not suspended.
	out, err := kubectlIn("", "patch", "trainingjobs.v1.ml.example.com", "old-style", "-n", work,
		"--type=merge", "-p", `{"spec":{"scheduling":{"placementTimeout":"30m"}}}`)
	require.NoError(t, err, "setting 0.2.0's spec.scheduling.placementTimeout: %s", out)
	out, err = kubectlIn("", "label", "trainingjobs.v1alpha1.ml.example.com", "old-style", "-n", work, "roundtrip=v1alpha1")
	require.NoError(t, err, "a write through v1alpha1 after the upgrade: %s", out)
	rt := &mlv1.TrainingJob{}
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: work, Name: "old-style"}, rt))
	assert.Equal(t, "v1alpha1", rt.Labels["roundtrip"], "the write through v1alpha1")
	if assert.NotNil(t, rt.Spec.Scheduling.PlacementTimeout, "spec.scheduling.placementTimeout was lost by the write through v1alpha1") {
		assert.Equal(t, 30*time.Minute, rt.Spec.Scheduling.PlacementTimeout.Duration)
	}
	assert.NotContains(t, rt.Annotations, mlv1.AnnotationV1Spec, "the conversion's annotation reached the stored object")
	t.Logf("old-style written through v1alpha1 under 0.2.0 keeps placementTimeout %v (labels %v)", rt.Spec.Scheduling.PlacementTimeout, rt.Labels)
	t.Logf("kubectl get subscription,installplan,csv -n %s:\n%s", ns, kubectl(t, "get", "subscription,installplan,csv", "-n", ns))
}

// testUninstall deletes the Subscription and the CSV, as docs/install.md
// §4 says: the operator goes; the CRDs, the user's objects and the
// checkpoint PVC stay.
func testUninstall(t *testing.T) {
	ctx := context.Background()
	ns := realnode.OperatorNamespace
	require.NoError(t, c.Delete(ctx, &operatorsv1alpha1.Subscription{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: Package}}))
	require.NoError(t, c.Delete(ctx, &operatorsv1alpha1.ClusterServiceVersion{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: CSV020}}))
	require.NoError(t, poll(3*time.Minute, func() bool {
		return isNotFound(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: realnode.ManagerDeployment}, &appsv1.Deployment{}))
	}), "the manager Deployment is still there after the CSV was deleted")
	t.Log("Subscription and CSV deleted; the manager Deployment is gone")

	for _, name := range []string{"trainingjobs.ml.example.com", "modeldeployments.ml.example.com"} {
		assert.NoError(t, c.Get(ctx, client.ObjectKey{Name: name}, &apiextensionsv1.CustomResourceDefinition{}), "CRD %s", name)
	}
	for _, obj := range []client.Object{
		&mlv1.TrainingJob{ObjectMeta: metav1.ObjectMeta{Namespace: work, Name: JobName}},
		&mlv1.TrainingJob{ObjectMeta: metav1.ObjectMeta{Namespace: work, Name: "old-style"}},
		&mlv1.ModelDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: work, Name: ModelName}},
		&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: work, Name: mlv1.CheckpointPVCName(JobName)}},
	} {
		key := client.ObjectKeyFromObject(obj)
		if assert.NoError(t, c.Get(ctx, key, obj), "%T %s after the uninstall", obj, key) {
			assert.Nil(t, obj.GetDeletionTimestamp(), "%T %s is being deleted", obj, key)
		}
	}
	t.Logf("after the uninstall, kubectl get tj,md,pvc -n %s:\n%s", work, kubectl(t, "get", "trainingjobs,modeldeployments,pvc", "-n", work))

	// OLM removed the webhook configurations with the CSV: with
	// failurePolicy Fail, a leftover one would refuse every write to the
	// objects that remain.
	owned := client.MatchingLabels{"olm.owner": CSV020}
	require.NoError(t, poll(2*time.Minute, func() bool {
		vw := &admissionregistrationv1.ValidatingWebhookConfigurationList{}
		mw := &admissionregistrationv1.MutatingWebhookConfigurationList{}
		return c.List(ctx, vw, owned) == nil && c.List(ctx, mw, owned) == nil && len(vw.Items) == 0 && len(mw.Items) == 0
	}), "webhook configurations of %s remain after the uninstall", CSV020)
	out, err := kubectlIn("", "label", "trainingjobs.v1.ml.example.com", JobName, "-n", work, "uninstalled=true")
	require.NoError(t, err, "a TrainingJob cannot be changed after the uninstall: %s", out)
	// OLM turns the conversion webhook off when it deletes a CSV that no
	// other CSV replaces (its Service is gone, and a CRD whose webhook
	// cannot be called refuses every read and write): the CRD's
	// conversion becomes None, which serves v1alpha1 by relabelling the
	// stored v1 object. v1 reads back as it was stored.
	crd := &apiextensionsv1.CustomResourceDefinition{}
	require.NoError(t, poll(2*time.Minute, func() bool {
		return c.Get(ctx, client.ObjectKey{Name: "trainingjobs.ml.example.com"}, crd) == nil &&
			crd.Spec.Conversion != nil && crd.Spec.Conversion.Strategy == apiextensionsv1.NoneConverter
	}), "the TrainingJob CRD's conversion after the uninstall: %+v", crd.Spec.Conversion)
	v1 := kubectl(t, "get", "trainingjobs.v1.ml.example.com", "old-style", "-n", work,
		"-o", "jsonpath={.apiVersion} numWorkers={.spec.numWorkers} checkpoint.path={.spec.checkpoint.path}")
	assert.Equal(t, "ml.example.com/v1 numWorkers=3 checkpoint.path=/ckpt", v1)
	out, err = kubectlIn("", "get", "trainingjobs.v1alpha1.ml.example.com", "old-style", "-n", work, "-o", "yaml")
	t.Logf("the TrainingJob CRD's conversion after the uninstall: %s; kubectl get trainingjobs.v1alpha1.ml.example.com old-style -o yaml (err %v):\n%s",
		crd.Spec.Conversion.Strategy, err, out)

	// What else remains, for docs/install.md §4.
	out, _ = kubectlIn("", "get", "all,serviceaccounts,secrets,configmaps,roles,rolebindings,operatorgroups,installplans,subscriptions,csv", "-n", ns)
	t.Logf("after the uninstall, in %s:\n%s", ns, out)
	out, _ = kubectlIn("", "get", "clusterroles,clusterrolebindings,validatingwebhookconfigurations,mutatingwebhookconfigurations,crds", "-l", "olm.owner.kind=ClusterServiceVersion")
	t.Logf("after the uninstall, cluster objects OLM labelled for a CSV:\n%s", out)
}

// managerCan asks the API server whether the manager's service account may
// do verb on resource of group ("" for core) cluster-wide.
func managerCan(t *testing.T, verb, group, resource string) bool {
	t.Helper()
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:               managerSA,
		Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + realnode.OperatorNamespace},
		ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: verb, Group: group, Resource: resource},
	}}
	require.NoError(t, c.Create(context.Background(), sar))
	return sar.Status.Allowed
}

// hasPlacementTimeout says whether the installed TrainingJob v1 schema has
// spec.scheduling.placementTimeout (new in 0.2.0).
func hasPlacementTimeout(t *testing.T) bool {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	require.NoError(t, c.Get(context.Background(), client.ObjectKey{Name: "trainingjobs.ml.example.com"}, crd))
	for _, v := range crd.Spec.Versions {
		if v.Name != "v1" || v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			continue
		}
		spec := v.Schema.OpenAPIV3Schema.Properties["spec"]
		_, ok := spec.Properties["scheduling"].Properties["placementTimeout"]
		return ok
	}
	return false
}

// workerPod is the job's one worker pod.
func workerPod(t *testing.T) *corev1.Pod {
	t.Helper()
	pods := &corev1.PodList{}
	require.NoError(t, c.List(context.Background(), pods, client.InNamespace(work), client.MatchingLabels{mlv1.LabelTrainingJob: JobName}))
	require.Len(t, pods.Items, 1, "worker pods of %s", JobName)
	require.NotEmpty(t, pods.Items[0].Status.ContainerStatuses)
	return &pods.Items[0]
}

func workerRunning(ctx context.Context) bool {
	pods := &corev1.PodList{}
	if c.List(ctx, pods, client.InNamespace(work), client.MatchingLabels{mlv1.LabelTrainingJob: JobName}) != nil || len(pods.Items) != 1 {
		return false
	}
	return pods.Items[0].Status.Phase == corev1.PodRunning
}

// staticVolume makes a hostPath PersistentVolume of size bound in advance
// to the claim ns/claim (the node has no dynamic provisioner). It offers
// ReadWriteOnce and ReadWriteMany, so it binds whichever the operator asks
// for: for one rank, or a gang on no StorageClass known to be shared, that
// is ReadWriteOnce, which a volume offering ReadWriteMany only never binds
// (the claim stays Pending, and so does its pod). It returns the volume's
// directory on the host.
func staticVolume(t *testing.T, ns, claim string, size resource.Quantity) (dir string) {
	t.Helper()
	dir = filepath.Join(node.Workdir(), "volumes", ns+"-"+claim)
	require.NoError(t, os.MkdirAll(dir, 0o777))
	require.NoError(t, os.Chmod(dir, 0o777))
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + claim},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: size},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce, corev1.ReadWriteMany},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			ClaimRef:                      &corev1.ObjectReference{Namespace: ns, Name: claim},
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir}},
		},
	}
	// No cleanup: the volume must outlive the step that made it (the
	// checkpoint PVC stays through the upgrade and the uninstall), and the
	// node is thrown away after the suite.
	require.NoError(t, c.Create(context.Background(), pv))
	return dir
}

// probePod is a pod running the probe image with args, never restarted,
// passing Pod Security "restricted".
func probePod(ns, name string, labels map[string]string, args ...string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: new(int64),
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   ptr.To(true),
				RunAsUser:      ptr.To[int64](65532),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name:    "probe",
				Image:   ProbeImage,
				Command: append([]string{"/probe"}, args...),
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(false),
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
			}},
		},
	}
}

// modelStore serves files over HTTP inside the cluster (a probe pod over a
// ConfigMap, behind the Service model-store) and returns its base URL.
func modelStore(t *testing.T, ns string, files map[string]string) string {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "models", Namespace: ns}, Data: files}))
	labels := map[string]string{"app": "model-store"}
	pod := probePod(ns, "model-store", labels, "files", "8080", "/models")
	pod.Spec.RestartPolicy = corev1.RestartPolicyAlways
	pod.Spec.Volumes = []corev1.Volume{{Name: "models", VolumeSource: corev1.VolumeSource{
		ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "models"}},
	}}}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "models", MountPath: "/models"}}
	require.NoError(t, c.Create(ctx, pod))
	require.NoError(t, c.Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "model-store", Namespace: ns},
		Spec: corev1.ServiceSpec{
			Selector: labels,
			Ports:    []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}))
	// Routed before a model server fetches from it (else its first pods
	// crash-loop and get remediated).
	require.NoError(t, node.WaitServiceRouted(ctx, ns, "model-store", 1, 2*time.Minute))
	return "http://model-store." + ns + ".svc.cluster.local"
}

// predictCounts is what `probe predict` prints.
type predictCounts struct {
	Codes  map[string]int `json:"codes"`
	Errors []string       `json:"errors"`
}

// predict sends n predictions to the model at base (a ModelDeployment's
// status.url) from a pod: a ClusterIP is reachable from the pod network.
func predict(t *testing.T, name, base string, n int) predictCounts {
	t.Helper()
	counts, err := predictOnce(name, base, n)
	require.NoError(t, err)
	return counts
}

func predictOnce(name, base string, n int) (predictCounts, error) {
	ctx := context.Background()
	pod := probePod(work, "predict-"+name, nil, "predict", base+"/v1/models/fraud-detector:predict", fmt.Sprint(n))
	if err := c.Create(ctx, pod); err != nil {
		return predictCounts{}, err
	}
	defer func() { _ = c.Delete(ctx, pod) }()
	p := &corev1.Pod{}
	if err := poll(2*time.Minute, func() bool {
		return c.Get(ctx, client.ObjectKeyFromObject(pod), p) == nil &&
			(p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed)
	}); err != nil {
		return predictCounts{}, fmt.Errorf("predict pod %s (phase %q): %w", pod.Name, p.Status.Phase, err)
	}
	log, err := node.PodLog(ctx, work, pod.Name)
	if err != nil {
		return predictCounts{}, err
	}
	if p.Status.Phase != corev1.PodSucceeded {
		return predictCounts{}, fmt.Errorf("predict pod %s failed: %s", pod.Name, log)
	}
	var counts predictCounts
	if err := json.Unmarshal([]byte(log), &counts); err != nil {
		return predictCounts{}, fmt.Errorf("predict pod %s: %w: %s", pod.Name, err, log)
	}
	return counts, nil
}

// load sends predictions from one pod after another until stopped.
type load struct {
	stopCh chan struct{}
	wg     sync.WaitGroup
	mu     sync.Mutex
	total  loadTotal
}

type loadTotal struct {
	n      int
	codes  map[string]int
	errors []string
}

func startLoad(base string) *load {
	l := &load{stopCh: make(chan struct{}), total: loadTotal{codes: map[string]int{}}}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		for i := 0; ; i++ {
			select {
			case <-l.stopCh:
				return
			default:
			}
			counts, err := predictOnce(fmt.Sprintf("upgrade-%d", i), base, 100)
			l.mu.Lock()
			if err != nil {
				// A pod that could not send counts as failed requests.
				l.total.n += 100
				l.total.codes["pod failed"] += 100
				l.total.errors = append(l.total.errors, err.Error())
			} else {
				for code, k := range counts.Codes {
					l.total.n += k
					l.total.codes[code] += k
				}
				l.total.errors = append(l.total.errors, counts.Errors...)
			}
			l.mu.Unlock()
		}
	}()
	return l
}

func (l *load) stop() loadTotal {
	close(l.stopCh)
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total
}
