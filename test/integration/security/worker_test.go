package security_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
	"k8s.io/utils/ptr"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/controllers/trainingjob"
	"github.com/ml-operator/ml-operator/internal/manager"
	"github.com/ml-operator/ml-operator/internal/podsecurity"
	"github.com/ml-operator/ml-operator/test/testutil"
)

// restricted evaluates a pod at the "restricted" level of the newest Pod
// Security Standard, as the admission plugin would.
func restricted(t *testing.T, meta *metav1.ObjectMeta, spec *corev1.PodSpec) policy.AggregateCheckResult {
	t.Helper()
	evaluator, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	require.NoError(t, err)
	return policy.AggregateCheckResults(evaluator.EvaluatePod(
		psaapi.LevelVersion{Level: psaapi.LevelRestricted, Version: psaapi.LatestVersion()}, meta, spec))
}

func workerConfig() trainingjob.Config {
	return trainingjob.Config{DefaultImages: manager.DefaultFrameworkImages(), PodSecurity: podsecurity.NewDefaults()}
}

// Every worker pod the operator builds by default is restricted: each
// framework, with and without GPUs, with checkpoints on a PVC or in S3, with
// a data volume, on every rank.
func TestWorkerPodsAreRestrictedByDefault(t *testing.T) {
	jobs := map[string]*mlv1.TrainingJob{}
	for _, fw := range []mlv1.Framework{mlv1.FrameworkPyTorch, mlv1.FrameworkTensorFlow, mlv1.FrameworkXGBoost, mlv1.FrameworkJAX} {
		for _, gpus := range []int32{0, 2} {
			jobs[fmt.Sprintf("%s-%dgpu", fw, gpus)] = testutil.TrainingJob("job", "ns").Framework(fw).Workers(3).GPUs(gpus).Obj()
		}
	}
	s3 := testutil.TrainingJob("job", "ns").CheckpointStorage(mlv1.CheckpointStorage{Type: mlv1.StorageTypeS3, URI: "s3://ckpt/job"}).Obj()
	jobs["s3-checkpoints"] = s3
	data := testutil.TrainingJob("job", "ns").Workers(2).Obj()
	data.Spec.DataVolume = &mlv1.DataVolumeSpec{ClaimName: "imagenet", ReadOnly: true}
	data.Spec.Tracking = &mlv1.TrackingSpec{MLflow: &mlv1.MLflowSpec{TrackingURI: "http://mlflow:5000"}}
	jobs["data-volume-and-mlflow"] = data

	for name, job := range jobs {
		t.Run(name, func(t *testing.T) {
			for rank := int32(0); rank < job.Spec.EffectiveNumWorkers(); rank++ {
				pod := trainingjob.DesiredWorkerPod(job, rank, 0, workerConfig())
				agg := restricted(t, &pod.ObjectMeta, &pod.Spec)
				assert.Truef(t, agg.Allowed, "rank %d violates restricted: %s", rank, agg.ForbiddenDetail())
				assert.Emptyf(t, restrictedV2(&pod.Spec), "rank %d violates OpenShift's restricted-v2", rank)
			}
		})
	}
}

// An admin who pins the IDs (--pod-run-as-user and friends) gets them in
// every worker pod, which stays Pod Security restricted.
func TestAdminPinnedIDsReachTheWorkers(t *testing.T) {
	cfg := workerConfig()
	cfg.PodSecurity.RunAsUser, cfg.PodSecurity.RunAsGroup, cfg.PodSecurity.FSGroup = ptr.To[int64](2000), ptr.To[int64](3000), ptr.To[int64](4000)
	pod := trainingjob.DesiredWorkerPod(testutil.TrainingJob("job", "ns").Workers(1).Obj(), 0, 0, cfg)
	sc := pod.Spec.SecurityContext
	assert.Equal(t, []int64{2000, 3000, 4000}, []int64{*sc.RunAsUser, *sc.RunAsGroup, *sc.FSGroup})
	agg := restricted(t, &pod.ObjectMeta, &pod.Spec)
	assert.True(t, agg.Allowed, agg.ForbiddenDetail())
}

// A template that asks for more than restricted gets it: the operator does
// not silently take away what the user's security context or volumes ask
// for (the namespace's Pod Security admission is the place to refuse it).
func TestWorkerTemplateAskingForMoreIsHonoured(t *testing.T) {
	cases := map[string]func(*mlv1.WorkerTemplate){
		"privileged container": func(tpl *mlv1.WorkerTemplate) {
			tpl.SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
		},
		"runs as root": func(tpl *mlv1.WorkerTemplate) {
			tpl.PodSecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](0)}
		},
		"hostPath volume": func(tpl *mlv1.WorkerTemplate) {
			tpl.Volumes = []corev1.Volume{{Name: "nvme", VolumeSource: corev1.VolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: "/mnt/nvme"}}}}
			tpl.VolumeMounts = []corev1.VolumeMount{{Name: "nvme", MountPath: "/scratch"}}
		},
	}
	for name, change := range cases {
		t.Run(name, func(t *testing.T) {
			job := testutil.TrainingJob("job", "ns").GPUs(1).Obj()
			change(&job.Spec.Template)
			pod := trainingjob.DesiredWorkerPod(job, 0, 0, workerConfig())
			assert.False(t, restricted(t, &pod.ObjectMeta, &pod.Spec).Allowed,
				"the template asked for more than restricted; the pod should carry it")
			assert.NotEmpty(t, restrictedV2(&pod.Spec), "restricted-v2 must refuse it too (the check is not vacuous)")
		})
	}
}
