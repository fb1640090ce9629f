package trainingjob

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

// contractJobs are jobs that, between them, make the controller set every
// variable of the worker contract: every framework, a parameter server,
// object-storage checkpoints with a checkpoint to resume from, MLflow and
// the nccl backend.
func contractJobs() []*mlv1.TrainingJob {
	var jobs []*mlv1.TrainingJob
	for _, fw := range []mlv1.Framework{mlv1.FrameworkPyTorch, mlv1.FrameworkTensorFlow, mlv1.FrameworkXGBoost, mlv1.FrameworkJAX} {
		job := testJob(fw)
		job.Spec.Checkpoint.Storage = mlv1.CheckpointStorage{Type: mlv1.StorageTypeS3, URI: "s3://bucket/ckpt"}
		job.Status.LastCheckpoint = &mlv1.CheckpointStatus{Epoch: 3}
		job.Spec.Tracking = &mlv1.TrackingSpec{MLflow: &mlv1.MLflowSpec{TrackingURI: "http://mlflow:5000", ExperimentName: "e"}}
		if fw == mlv1.FrameworkTensorFlow {
			job.Spec.ParameterServers = 1
		}
		jobs = append(jobs, job)
	}
	gloo := testJob(mlv1.FrameworkPyTorch)
	gloo.Spec.GPUsPerWorker = ptr.To(int32(0))
	elastic := testJob(mlv1.FrameworkPyTorch)
	elastic.Spec.Elastic = &mlv1.ElasticSpec{MinWorkers: 1, MaxWorkers: 2}
	return append(jobs, gloo, elastic)
}

// operatorEnv is the env of every pod the controller builds for the
// contract jobs, without the user's spec.env: each name with the spec of a
// job whose pods have it.
func operatorEnv(t *testing.T) map[string]*mlv1.TrainingJobSpec {
	t.Helper()
	names := map[string]*mlv1.TrainingJobSpec{}
	for _, job := range contractJobs() {
		pods := []*corev1.Pod{desiredWorkerPod(job, 0, 0, &testCfg, false), desiredWorkerPod(job, 1, 0, &testCfg, false)}
		for i := range job.Spec.ParameterServers {
			pods = append(pods, desiredPSPod(job, i, 0, &testCfg, false))
		}
		for _, pod := range pods {
			env := pod.Spec.Containers[0].Env
			user := len(job.Spec.Env)
			for _, e := range env[:len(env)-user] {
				names[e.Name] = &job.Spec
			}
		}
	}
	return names
}

// Every variable the controller sets is reserved by the worker contract in
// api/v1, which the admission webhook refuses in spec.env, except the
// defaults the contract lists as the user's to override. The rendezvous
// variables of an elastic job are reserved for such jobs only.
func TestEveryEnvNameTheControllerSetsIsReserved(t *testing.T) {
	for name, spec := range operatorEnv(t) {
		if !spec.ReservesEnvName(name) && !slices.Contains(mlv1.OverridableEnvNames, name) {
			t.Errorf("the controller sets %s, which the job's ReservesEnvName does not reserve: add it to the worker contract (api/v1/worker_contract.go, api/v1/elastic.go)", name)
		}
	}
}

// The contract reserves nothing the controller does not set: each exact
// name, each family and each overridable default is in some pod.
func TestEveryReservedEnvNameIsSet(t *testing.T) {
	set := operatorEnv(t)
	for _, name := range slices.Concat(mlv1.ReservedEnvNames, mlv1.OverridableEnvNames, mlv1.ElasticEnvNames) {
		if set[name] == nil {
			t.Errorf("%s is in the worker contract but no pod sets it", name)
		}
	}
	for _, prefix := range mlv1.ReservedEnvPrefixes {
		found := false
		for name := range set {
			found = found || strings.HasPrefix(name, prefix)
		}
		if !found {
			t.Errorf("the worker contract reserves %s*, but no pod sets such a variable", prefix)
		}
	}
}
