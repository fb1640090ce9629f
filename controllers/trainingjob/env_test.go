package trainingjob

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

// With parameter servers rank 0 is TensorFlow's `chief` (the coordinator of
// ParameterServerStrategy, the chief of Estimator training), the other ranks
// are workers counted from 0, and the ps pods are `ps`; every task sees the
// same cluster.
func TestTFConfigWithParameterServers(t *testing.T) {
	job := testJob(mlv1.FrameworkTensorFlow)
	job.Spec.NumWorkers = 3
	job.Spec.ParameterServers = 2
	cluster := map[string][]string{
		"chief":  {"bert-worker-0.bert-workers.team-a.svc:29500"},
		"worker": {"bert-worker-1.bert-workers.team-a.svc:29500", "bert-worker-2.bert-workers.team-a.svc:29500"},
		"ps":     {"bert-ps-0.bert-workers.team-a.svc:29500", "bert-ps-1.bert-workers.team-a.svc:29500"},
	}
	for _, tc := range []struct {
		pod  *corev1.Pod
		task TFTask
	}{
		{desiredWorkerPod(job, 0, 0, &testCfg, false), TFTask{Type: "chief", Index: 0}},
		{desiredWorkerPod(job, 1, 0, &testCfg, false), TFTask{Type: "worker", Index: 0}},
		{desiredWorkerPod(job, 2, 0, &testCfg, false), TFTask{Type: "worker", Index: 1}},
		{desiredPSPod(job, 0, 0, &testCfg, false), TFTask{Type: "ps", Index: 0}},
		{desiredPSPod(job, 1, 0, &testCfg, false), TFTask{Type: "ps", Index: 1}},
	} {
		var got TFConfig
		if err := json.Unmarshal([]byte(trainerEnv(tc.pod, "TF_CONFIG")), &got); err != nil {
			t.Fatalf("%s: %v", tc.pod.Name, err)
		}
		if diff := cmp.Diff(TFConfig{Cluster: cluster, Task: tc.task}, got); diff != "" {
			t.Errorf("%s TF_CONFIG mismatch (-want +got):\n%s", tc.pod.Name, diff)
		}
	}
}

// A single rank with parameter servers is the chief alone: no empty
// "worker" list in the cluster.
func TestTFConfigSingleRankWithParameterServers(t *testing.T) {
	job := testJob(mlv1.FrameworkTensorFlow)
	job.Spec.NumWorkers = 1
	job.Spec.ParameterServers = 1
	var got TFConfig
	if err := json.Unmarshal([]byte(tfConfig(job, 0)), &got); err != nil {
		t.Fatal(err)
	}
	want := TFConfig{
		Cluster: map[string][]string{
			"chief": {"bert-worker-0.bert-workers.team-a.svc:29500"},
			"ps":    {"bert-ps-0.bert-workers.team-a.svc:29500"},
		},
		Task: TFTask{Type: "chief", Index: 0},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("TF_CONFIG mismatch (-want +got):\n%s", diff)
	}
}

// trainerEnv is a literal env var of a pod's trainer container.
func trainerEnv(p *corev1.Pod, name string) string {
	for _, e := range p.Spec.Containers[0].Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

func TestCheckpointEnvForObjectStorage(t *testing.T) {
	job := testJob(mlv1.FrameworkPyTorch)
	job.Spec.Checkpoint.Storage = mlv1.CheckpointStorage{Type: "s3", URI: "s3://bucket/run/"}
	job.Status.LastCheckpoint = &mlv1.CheckpointStatus{Epoch: 7}
	env := map[string]string{}
	for _, e := range workerEnv(job, 0) {
		env[e.Name] = e.Value
	}
	if env["CHECKPOINT_URI"] != "s3://bucket/run/" || env["RESUME_FROM_CHECKPOINT"] != "s3://bucket/run/epoch-7" {
		t.Errorf("CHECKPOINT_URI=%q RESUME_FROM_CHECKPOINT=%q", env["CHECKPOINT_URI"], env["RESUME_FROM_CHECKPOINT"])
	}
	pod := desiredWorkerPod(job, 0, 0, &testCfg, false)
	for _, v := range pod.Spec.Volumes {
		if v.Name == "checkpoints" {
			t.Errorf("object storage must not mount a checkpoint volume")
		}
	}
}

// The TF cluster hash follows what TF_CONFIG's cluster is made of (ranks,
// parameter servers, the port) and nothing else, and is the same on every
// pod of the gang.
func TestTFClusterHash(t *testing.T) {
	job := testJob(mlv1.FrameworkTensorFlow)
	job.Spec.ParameterServers = 1
	base := tfClusterHash(job)
	for _, p := range []*corev1.Pod{desiredWorkerPod(job, 0, 0, &testCfg, false), desiredWorkerPod(job, 1, 0, &testCfg, false), desiredPSPod(job, 0, 0, &testCfg, false)} {
		if got := p.Labels[mlv1.LabelTFClusterHash]; got != base {
			t.Errorf("%s: hash %q, want %q", p.Name, got, base)
		}
	}
	same := job.DeepCopy()
	same.Spec.Hyperparameters = nil
	same.Spec.Image = "other"
	if tfClusterHash(same) != base {
		t.Error("a change outside the cluster changed the hash")
	}
	for name, change := range map[string]func(*mlv1.TrainingJob){
		"numWorkers":       func(j *mlv1.TrainingJob) { j.Spec.NumWorkers = 3 },
		"parameterServers": func(j *mlv1.TrainingJob) { j.Spec.ParameterServers = 2 },
		"no ps":            func(j *mlv1.TrainingJob) { j.Spec.ParameterServers = 0 },
		"masterPort":       func(j *mlv1.TrainingJob) { j.Spec.Networking.MasterPort = 23456 },
	} {
		j := job.DeepCopy()
		change(j)
		if tfClusterHash(j) == base {
			t.Errorf("%s changed the cluster but not the hash", name)
		}
	}
	if p := desiredWorkerPod(testJob(mlv1.FrameworkPyTorch), 0, 0, &testCfg, false); p.Labels[mlv1.LabelTFClusterHash] != "" {
		t.Errorf("a pytorch pod has a TF cluster hash: %v", p.Labels)
	}
}
