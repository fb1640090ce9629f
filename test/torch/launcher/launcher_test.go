package launcher

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/controllers/trainingjob"
	"github.com/ml-operator/ml-operator/test/testutil"
)

func requireTorch(t *testing.T) {
	t.Helper()
	testutil.NeedTool(t, Torchrun, "python3-torch", testutil.TorchInstall)
}

// Two real torchrun processes, configured only by the operator's env for a
// 2-rank gloo job, form the process group and all-reduce.
func TestTorchrunFormsGroupFromOperatorEnv(t *testing.T) {
	requireTorch(t)
	port := int32(testutil.FreePort(t))
	job := testutil.TrainingJob("ddp", "ml-team").Workers(2).GPUs(0).NProcPerNode(1).Obj()
	job.Spec.Networking.MasterPort = port
	cfg := trainingjob.Config{}

	script, err := filepath.Abs("allreduce.py")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	type proc struct {
		cmd *exec.Cmd
		out *bytes.Buffer
	}
	var procs []proc
	for rank := int32(0); rank < 2; rank++ {
		pod := trainingjob.DesiredWorkerPod(job, rank, 0, cfg)
		env, err := PodEnv(job, pod, t.TempDir())
		require.NoError(t, err)
		envMap := map[string]string{}
		for _, kv := range env {
			k, v, _ := strings.Cut(kv, "=")
			envMap[k] = v
		}
		require.Equal(t, "2", envMap["WORLD_SIZE"])
		require.Equal(t, "2", envMap["PET_NNODES"])
		require.Equal(t, strconv.Itoa(int(rank)), envMap["PET_NODE_RANK"])

		cmd := exec.CommandContext(ctx, Torchrun, script)
		cmd.Env = append(env, "EXPECTED_WORLD_SIZE="+envMap["WORLD_SIZE"], "BACKEND="+string(job.Spec.EffectiveBackend()))
		out := &bytes.Buffer{}
		cmd.Stdout, cmd.Stderr = out, out
		require.NoError(t, cmd.Start())
		procs = append(procs, proc{cmd, out})
	}
	for rank, p := range procs {
		err := p.cmd.Wait()
		require.NoError(t, err, "rank %d torchrun failed:\n%s", rank, p.out.String())
		assert.Contains(t, p.out.String(), fmt.Sprintf("rank %d/2 node_rank %d all_reduce=3.0 ok", rank, rank), p.out.String())
	}
}

// TF_CONFIG has the shape tf.distribute's TFConfigClusterResolver documents:
// {"cluster": {"worker": ["host:port", ...], "ps": [...]}, "task": {"type":
// "worker", "index": i}}, where cluster[task.type][task.index] is the task's
// own address. With parameter servers rank 0 is the one "chief" task (the
// coordinator ParameterServerStrategy needs) and the other ranks are the
// workers. See https://www.tensorflow.org/guide/distributed_training#setting_up_the_tf_config_environment_variable
func TestTFConfigMatchesTensorFlowClusterSpec(t *testing.T) {
	for _, ps := range []int32{0, 2} {
		job := testutil.TrainingJob("tf", "ml-team").Framework(mlv1.FrameworkTensorFlow).Workers(3).GPUs(0).
			ParameterServers(ps).Obj()
		for rank := int32(0); rank < 3; rank++ {
			pod := trainingjob.DesiredWorkerPod(job, rank, 0, trainingjob.Config{})
			var raw string
			for _, e := range pod.Spec.Containers[0].Env {
				if e.Name == "TF_CONFIG" {
					raw = e.Value
				}
			}
			require.NotEmpty(t, raw, "TF_CONFIG missing")

			// Decode strictly into TensorFlow's documented structure.
			var cfg struct {
				Cluster map[string][]string `json:"cluster"`
				Task    struct {
					Type  string `json:"type"`
					Index int    `json:"index"`
				} `json:"task"`
			}
			dec := json.NewDecoder(strings.NewReader(raw))
			dec.DisallowUnknownFields()
			require.NoError(t, dec.Decode(&cfg), raw)

			for jobName := range cfg.Cluster {
				assert.Contains(t, []string{"chief", "worker", "ps", "evaluator"}, jobName, "unknown TF job name")
			}
			wantType, wantIndex, workers := "worker", int(rank), 3
			if ps > 0 {
				require.Len(t, cfg.Cluster["chief"], 1)
				wantType, wantIndex, workers = "worker", int(rank)-1, 2
				if rank == 0 {
					wantType, wantIndex = "chief", 0
				}
			} else {
				require.NotContains(t, cfg.Cluster, "chief")
			}
			require.Len(t, cfg.Cluster["worker"], workers)
			require.Len(t, cfg.Cluster["ps"], int(ps))
			seen := map[string]bool{}
			for name, addrs := range cfg.Cluster {
				for i, addr := range addrs {
					host, port, err := net.SplitHostPort(addr)
					require.NoError(t, err, "%s[%d] = %q is not host:port", name, i, addr)
					_, err = strconv.ParseUint(port, 10, 16)
					require.NoError(t, err)
					assert.False(t, seen[addr], "address %s listed twice", addr)
					seen[addr] = true
					assert.True(t, strings.HasSuffix(host, ".tf-workers.ml-team.svc"), "%s is not a stable DNS name", host)
				}
			}
			assert.Equal(t, wantType, cfg.Task.Type)
			assert.Equal(t, wantIndex, cfg.Task.Index)
			own := cfg.Cluster[cfg.Task.Type][cfg.Task.Index]
			assert.True(t, strings.HasPrefix(own, pod.Spec.Hostname+"."+pod.Spec.Subdomain+"."), "task address %s is not this pod (%s)", own, pod.Name)
		}
	}
}
