package trainingjob

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

// seedJob reads a seed manifest (test/testdata/seed-examples, the users'
// files byte for byte) as a v1 TrainingJob.
func seedJob(t *testing.T, file string) *mlv1.TrainingJob {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "test", "testdata", "seed-examples", file))
	require.NoError(t, err)
	job := &mlv1.TrainingJob{}
	require.NoError(t, yaml.UnmarshalStrict(raw, job))
	return job
}

func launchConfig() *Config {
	cmds := map[string]mlv1.LaunchTemplate{}
	for fw, tmpl := range mlv1.DefaultLaunchTemplates() {
		cmds[string(fw)] = tmpl
	}
	return &Config{DefaultImages: testCfg.DefaultImages, DefaultCommands: cmds}
}

// Seed 000 (test-job) names only its model, dataset and hyperparameters:
// its workers run the framework's default launch command, seed 000's
// operator's torchrun of /app/train.py with every setting as a flag.
func TestSeedTestJobRunsTheDefaultLaunchCommand(t *testing.T) {
	job := seedJob(t, "trainingjob-v1-test-job.yaml")
	pod := desiredWorkerPod(job, 1, 0, launchConfig(), false)
	c := pod.Spec.Containers[0]
	want := []string{"torchrun", "/app/train.py", "--model=resnet50", "--dataset=imagenet",
		"--batchSize=32", "--epochs=10", "--learningRate=0.001", "--checkpoint-dir=/checkpoints"}
	require.Empty(t, cmp.Diff(want, c.Command), "-want +got")
	require.Nil(t, c.Args)
}

func TestWorkerCommand(t *testing.T) {
	custom, err := mlv1.ParseLaunchTemplate("python3 /opt/run.py --m={model} --data={dataset} --out={checkpointDir}/x {hyperparameters} --fixed")
	require.NoError(t, err)
	for name, tc := range map[string]struct {
		edit func(*mlv1.TrainingJobSpec)
		cmds map[string]mlv1.LaunchTemplate
		want []string
	}{
		"a command is kept": {
			edit: func(s *mlv1.TrainingJobSpec) { s.Command = []string{"python", "mine.py"} },
			want: []string{"python", "mine.py"},
		},
		"args alone run under the image's entrypoint": {
			edit: func(s *mlv1.TrainingJobSpec) { s.Args = []string{"--lr=1"} },
		},
		"tensorflow runs python": {
			edit: func(s *mlv1.TrainingJobSpec) { s.Framework = mlv1.FrameworkTensorFlow },
			want: []string{"python", "/app/train.py", "--model=m", "--dataset=d", "--epochs=3", "--checkpoint-dir=/ckpt"},
		},
		"words of empty values are left out": {
			edit: func(s *mlv1.TrainingJobSpec) {
				s.Model, s.Dataset, s.Hyperparameters = "", "", nil
				s.Checkpoint.Enabled = ptr.To(false)
			},
			want: []string{"torchrun", "/app/train.py"},
		},
		"dollars are doubled so the kubelet keeps them": {
			edit: func(s *mlv1.TrainingJobSpec) {
				s.Model = "m$(HOME)"
				s.Hyperparameters["tag"] = mlv1.NewHyperparameter("a$b")
			},
			want: []string{"torchrun", "/app/train.py", "--model=m$$(HOME)", "--dataset=d", "--epochs=3", "--tag=a$$b", "--checkpoint-dir=/ckpt"},
		},
		"the admin's template": {
			cmds: map[string]mlv1.LaunchTemplate{"pytorch": custom},
			want: []string{"python3", "/opt/run.py", "--m=m", "--data=d", "--out=/ckpt/x", "--epochs=3", "--fixed"},
		},
		"an empty template runs the image's entrypoint": {
			cmds: map[string]mlv1.LaunchTemplate{"pytorch": {}},
		},
		"a framework without a template runs the image's entrypoint": {
			cmds: map[string]mlv1.LaunchTemplate{"jax": custom},
		},
	} {
		t.Run(name, func(t *testing.T) {
			spec := &mlv1.TrainingJobSpec{
				Model: "m", Dataset: "d",
				Hyperparameters: map[string]mlv1.HyperparameterValue{"epochs": mlv1.NewHyperparameter(3)},
				Checkpoint:      mlv1.CheckpointSpec{Path: "/ckpt"},
			}
			if tc.edit != nil {
				tc.edit(spec)
			}
			cfg := launchConfig()
			if tc.cmds != nil {
				cfg.DefaultCommands = tc.cmds
			}
			require.Empty(t, cmp.Diff(tc.want, workerCommand(spec, cfg)), "-want +got")
		})
	}
}
