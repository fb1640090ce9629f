package rules

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	mlv1alpha1 "github.com/ml-operator/ml-operator/api/v1alpha1"
)

// The fuzz targets below run their seed corpus in every `go test`; run
// `go test ./webhooks/rules -fuzz FuzzTrainingJobDefaulter` (one target at a
// time) or `make fuzz-webhooks` to explore further. They check that neither defaulting nor validation
// panics on any object that decodes, that defaulting is idempotent, and that
// every validation error names a field.

// seedObjects are the seed-example manifests as v1 JSON, plus a few
// hand-written edge cases.
func seedObjects(t testing.TB, kind string) [][]byte {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("..", "..", "test", "testdata", "seed-examples", "*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no seed examples: %v", err)
	}
	var out [][]byte
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var meta struct{ APIVersion, Kind string }
		if err := yaml.Unmarshal(data, &meta); err != nil || meta.Kind != kind {
			continue
		}
		if meta.APIVersion == mlv1alpha1.GroupVersion.String() {
			old := &mlv1alpha1.TrainingJob{}
			if err := yaml.Unmarshal(data, old); err != nil {
				t.Fatal(err)
			}
			hub := &mlv1.TrainingJob{}
			if err := old.ConvertTo(hub); err != nil {
				t.Fatal(err)
			}
			if data, err = json.Marshal(hub); err != nil {
				t.Fatal(err)
			}
		} else if data, err = yaml.YAMLToJSON(data); err != nil {
			t.Fatal(err)
		}
		out = append(out, data)
	}
	return out
}

var extraTrainingJobs = []string{
	`{}`,
	`{"metadata":{"name":"x"},"spec":{"gpusPerWorker":-3,"nprocPerNode":0,"numWorkers":-1}}`,
	`{"spec":{"resources":{"limits":{"nvidia.com/gpu":"2","amd.com/gpu":"1"}},"gpuResourceName":"nvidia.com/gpu"}}`,
	`{"spec":{"hyperparameters":{"a":null,"b":{"c":1},"":"x","d-e":[1]},"env":[{"name":"MLFLOW_RUN_NAME"}]}}`,
	`{"spec":{"checkpoint":{"storage":{"type":"gcs","uri":"s3://x"}}},"status":{"state":"Completed"}}`,
	`{"spec":{"suspend":true,"networking":{"backend":"mpi"}},"status":{"state":"Failed"}}`,
}

var extraModelDeployments = []string{
	`{}`,
	`{"metadata":{"name":"m"},"spec":{"versions":[{"name":"a"},{"name":"a","weight":100}]}}`,
	`{"spec":{"versions":[{"name":"a","weight":-5,"modelPath":"ftp://"}],"scaling":{"minReplicas":0,"maxReplicas":0}}}`,
	`{"spec":{"port":9000,"healthCheck":{"intervalSeconds":1,"timeoutSeconds":0},"storage":{}}}`,
}

func decode[T any](data []byte) (*T, bool) {
	out := new(T)
	return out, json.Unmarshal(data, out) == nil
}

// checkFieldPaths fails when an error names no field.
func checkFieldPaths(t *testing.T, errs field.ErrorList) {
	t.Helper()
	for _, e := range errs {
		if e.Field == "" {
			t.Fatalf("a validation error names no field: %v", errs.ToAggregate())
		}
	}
}

func FuzzTrainingJobDefaulter(f *testing.F) {
	for _, s := range seedObjects(f, "TrainingJob") {
		f.Add(s, s)
	}
	for _, s := range extraTrainingJobs {
		f.Add([]byte(s), []byte(extraTrainingJobs[1]))
	}
	f.Fuzz(func(t *testing.T, oldData, data []byte) {
		job, ok := decode[mlv1.TrainingJob](data)
		if !ok {
			t.Skip()
		}
		once := job.DeepCopy()
		DefaultTrainingJob(once, nil, testImages)
		twice := once.DeepCopy()
		DefaultTrainingJob(twice, nil, testImages)
		if !equality.Semantic.DeepEqual(once, twice) {
			t.Fatalf("defaulting a created job twice changed it (-once +twice):\n%s", cmp.Diff(once, twice))
		}

		old, ok := decode[mlv1.TrainingJob](oldData)
		if !ok {
			return
		}
		once = job.DeepCopy()
		DefaultTrainingJob(once, old, testImages)
		twice = once.DeepCopy()
		DefaultTrainingJob(twice, old, testImages)
		if !equality.Semantic.DeepEqual(once, twice) {
			t.Fatalf("defaulting an updated job twice changed it (-once +twice):\n%s", cmp.Diff(once, twice))
		}
	})
}

func FuzzTrainingJobValidator(f *testing.F) {
	for _, s := range seedObjects(f, "TrainingJob") {
		f.Add(s, s)
	}
	for _, s := range extraTrainingJobs {
		for _, o := range extraTrainingJobs {
			f.Add([]byte(o), []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, oldData, data []byte) {
		job, ok := decode[mlv1.TrainingJob](data)
		if !ok {
			t.Skip()
		}
		errs := ValidateTrainingJob(nil, job)
		checkFieldPaths(t, errs)
		if old, ok := decode[mlv1.TrainingJob](oldData); ok {
			checkFieldPaths(t, TrainingJobProblems(old, job, testImages))
			errs = ValidateTrainingJob(old, job)
			checkFieldPaths(t, errs)
		}
	})
}

func FuzzModelDeploymentDefaulter(f *testing.F) {
	for _, s := range seedObjects(f, "ModelDeployment") {
		f.Add(s, s)
	}
	for _, s := range extraModelDeployments {
		f.Add([]byte(s), []byte(extraModelDeployments[3]))
	}
	f.Fuzz(func(t *testing.T, oldData, data []byte) {
		md, ok := decode[mlv1.ModelDeployment](data)
		if !ok {
			t.Skip()
		}
		once := md.DeepCopy()
		DefaultModelDeployment(once, nil)
		twice := once.DeepCopy()
		DefaultModelDeployment(twice, nil)
		if !equality.Semantic.DeepEqual(once, twice) {
			t.Fatalf("defaulting a created ModelDeployment twice changed it (-once +twice):\n%s", cmp.Diff(once, twice))
		}
		old, ok := decode[mlv1.ModelDeployment](oldData)
		if !ok {
			return
		}
		once = md.DeepCopy()
		DefaultModelDeployment(once, old)
		twice = once.DeepCopy()
		DefaultModelDeployment(twice, old)
		if !equality.Semantic.DeepEqual(once, twice) {
			t.Fatalf("defaulting an updated ModelDeployment twice changed it (-once +twice):\n%s", cmp.Diff(once, twice))
		}
	})
}

func FuzzModelDeploymentValidator(f *testing.F) {
	for _, s := range seedObjects(f, "ModelDeployment") {
		f.Add(s, s)
	}
	for _, s := range extraModelDeployments {
		for _, o := range extraModelDeployments {
			f.Add([]byte(o), []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, oldData, data []byte) {
		md, ok := decode[mlv1.ModelDeployment](data)
		if !ok {
			t.Skip()
		}
		errs := ValidateModelDeployment(nil, md)
		checkFieldPaths(t, errs)
		if old, ok := decode[mlv1.ModelDeployment](oldData); ok {
			errs = ValidateModelDeployment(old, md)
			checkFieldPaths(t, errs)
		}
	})
}
