package trainingjob_test

import (
	"encoding/json"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/controllers/trainingjob"
	"github.com/ml-operator/ml-operator/test/testutil"
)

// What jax.distributed.initialize() reads, recorded from JAX v0.11.0
// (github.com/jax-ml/jax, tag jax-v0.11.0, commit
// a1521744c6dc074443fe549f19f48d7197abf759). JAX is not packaged in Debian
// (no python3-jax), so these tests check the operator's env against this
// record and run the documented call's arguments through a real Python.
//
//   - jax/_src/distributed.py 76-77: coordinator_address = the argument or
//     os.environ.get('JAX_COORDINATOR_ADDRESS').
//   - jax/_src/distributed.py 81: JAX_LOCAL_DEVICE_IDS restricts the
//     visible devices.
//   - jax/_src/distributed.py 84-93: unless cluster_detection_method is
//     'deactivate', any of coordinator_address, num_processes, process_id,
//     local_device_ids still None is asked of the cluster detectors.
//   - jax/_src/distributed.py 98-111: num_processes and process_id must then
//     be ints with 0 <= process_id < num_processes. No JAX_NUM_PROCESSES or
//     JAX_PROCESS_ID is read anywhere in jax/.
//   - jax/_src/distributed.py 116-119: the coordinator (process 0) binds
//     JAX_COORDINATOR_BIND_ADDRESS, by default '[::]:' + the address's port.
//   - jax/_src/distributed.py 178-179: JAX_PARTITION_INDEX, JAX_SLICE_INDEX.
//   - jax/_src/clusters/cluster.py 65-86: the first detector present wins;
//     JAX_COORDINATOR_PORT is read only when no address is known.
//   - the detectors' triggers: ompi_cluster.py 33 OMPI_MCA_orte_hnp_uri;
//     slurm_cluster.py 33-34 SLURM_JOB_ID, SLURM_STEP_NODELIST, SLURM_NTASKS,
//     SLURM_PROCID, SLURM_LOCALID; cloud_tpu_cluster.py 182-251 a Cloud TPU
//     VM, TPU_WORKER_HOSTNAMES, TPU_PROCESS_ADDRESSES; k8s_cluster.py 72-89
//     KUBERNETES_SERVICE_HOST with the `kubernetes` client installed, then
//     145 the pod's `job-name` label, 183 a controlling owner of kind Job,
//     274 the Job's parallelism and 280 JOB_COMPLETION_INDEX.
var (
	// jaxReadsLeftToTheUser are variables JAX reads that the operator must
	// not set: each would change which devices a process drives, where
	// the coordinator binds, or which partition a process is in.
	jaxReadsLeftToTheUser = []string{"JAX_LOCAL_DEVICE_IDS", "JAX_COORDINATOR_BIND_ADDRESS",
		"JAX_COORDINATOR_PORT", "JAX_PARTITION_INDEX", "JAX_SLICE_INDEX"}
	// jaxDetectorTriggers are the variables that make one of JAX's cluster
	// detectors claim the process (and other libraries, such as
	// Lightning's, take it for a Slurm or MPI job).
	jaxDetectorTriggers = []string{"OMPI_MCA_orte_hnp_uri", "SLURM_JOB_ID", "SLURM_STEP_NODELIST",
		"SLURM_NTASKS", "SLURM_PROCID", "SLURM_LOCALID", "TPU_WORKER_HOSTNAMES", "TPU_PROCESS_ADDRESSES",
		"JOB_COMPLETION_INDEX"}
)

// evalJAXCall evaluates the keyword arguments of mlv1.JAXInitializeCall in a
// real Python with env as its environment, and resolves coordinator_address
// as distributed.py 76-77 does.
const evalJAXCall = `
import ast, json, os, sys
call = ast.parse(sys.argv[1], mode="eval").body
assert isinstance(call, ast.Call) and ast.unparse(call.func) == "jax.distributed.initialize", ast.unparse(call.func)
assert not call.args, "positional arguments"
kw = {k.arg: eval(compile(ast.Expression(k.value), "<call>", "eval"), {"os": os, "int": int}) for k in call.keywords}
kw["coordinator_address"] = kw.get("coordinator_address") or os.environ.get("JAX_COORDINATOR_ADDRESS")
print(json.dumps(kw))
`

// The documented jax.distributed.initialize call, evaluated with each rank's
// env, gives JAX a coordinator on rank 0's stable name, the process count
// and a distinct id per pod, and no cluster detection; the operator sets
// nothing else JAX reads, and nothing that makes a JAX detector (or a
// Slurm- or MPI-aware library) claim the pod.
func TestJAXInitializeCallGetsEveryArgumentFromTheOperatorsEnv(t *testing.T) {
	const python = "/usr/bin/python3"
	testutil.NeedTool(t, python, "python3", "apt-get install python3")
	const workers = 3
	job := testutil.TrainingJob("jx", "ml-team").Framework(mlv1.FrameworkJAX).Workers(workers).GPUs(4).Obj()
	job.Spec.Networking.MasterPort = 31337
	wantCoordinator := mlv1.MasterAddr("jx", "ml-team") + ":31337"

	ids := map[float64]bool{}
	for rank := int32(0); rank < workers; rank++ {
		pod := trainingjob.DesiredWorkerPod(job, rank, 0, trainingjob.Config{})
		env := []string{"PATH=/usr/bin:/bin"}
		names := map[string]bool{}
		for _, e := range pod.Spec.Containers[0].Env {
			names[e.Name] = true
			if e.ValueFrom == nil {
				env = append(env, e.Name+"="+e.Value)
			}
		}
		for _, n := range append(jaxReadsLeftToTheUser, jaxDetectorTriggers...) {
			assert.False(t, names[n], "rank %d: the operator sets %s, which JAX reads", rank, n)
		}
		for _, o := range pod.OwnerReferences {
			assert.NotEqual(t, "Job", o.Kind, "k8s_cluster.py 183 would take the pod for a batch Job's")
		}

		cmd := exec.Command(python, "-c", evalJAXCall, mlv1.JAXInitializeCall)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "rank %d: %s", rank, out)
		var kw map[string]any
		require.NoError(t, json.Unmarshal(out, &kw), "%s", out)

		assert.Equal(t, wantCoordinator, kw["coordinator_address"], "rank %d", rank)
		assert.Equal(t, "deactivate", kw["cluster_detection_method"], "rank %d: distributed.py 84 skips detection only for 'deactivate'", rank)
		assert.Equal(t, float64(workers), kw["num_processes"], "rank %d: one JAX process per pod", rank)
		assert.Equal(t, float64(rank), kw["process_id"], "rank %d", rank)
		pid, ok := kw["process_id"].(float64)
		require.True(t, ok, "process_id %v is not a number", kw["process_id"])
		assert.True(t, pid >= 0 && pid < workers, "distributed.py 109: 0 <= process_id < num_processes")
		ids[pid] = true
		assert.Len(t, kw, 4, "the call passes only num_processes, process_id, cluster_detection_method: %v", kw)

	}
	assert.Len(t, ids, workers, "every pod has its own process_id")
}
