//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ml-operator/ml-operator/test/testutil"
)

// makeRun is a `make run` started on a machine whose kubeconfig reaches no
// cluster, in a process group of its own, as a terminal would run it.
type makeRun struct {
	cmd        *exec.Cmd
	flags      string   // LOCALCLUSTER_FLAGS=..., for make run-down
	env        []string // the environment without a reachable cluster
	workdir    string
	kubeconfig string   // from the export line
	out        []string // stdout up to the end of the banner
	logs       *bytes.Buffer
	exited     chan error
}

// startMakeRun starts `make run` for a local cluster called name and waits
// for its banner: the export KUBECONFIG line and how to apply the samples.
// Whatever happens, the cluster is torn down when the test ends.
func startMakeRun(t *testing.T, name string) *makeRun {
	t.Helper()
	root := testutil.RepoRoot()
	bin := filepath.Join(root, "bin")
	m := &makeRun{workdir: t.TempDir(), logs: &bytes.Buffer{}, exited: make(chan error, 1)}
	m.flags = fmt.Sprintf("LOCALCLUSTER_FLAGS=--name %s --workdir %s --bin %s --manager %s",
		name, m.workdir, bin, filepath.Join(bin, "manager"))
	m.env = append(os.Environ(), "KUBECONFIG="+filepath.Join(m.workdir, "no-such-kubeconfig"))

	m.cmd = exec.Command("make", "--no-print-directory", "run", m.flags)
	m.cmd.Dir, m.cmd.Env = root, m.env
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	m.cmd.Stderr = m.logs
	stdout, err := m.cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, m.cmd.Start())
	printed := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			printed <- sc.Text()
		}
		close(printed)
		m.exited <- m.cmd.Wait()
	}()
	t.Cleanup(func() {
		// Whatever happened, leave no cluster behind.
		_ = syscall.Kill(-m.cmd.Process.Pid, syscall.SIGTERM)
		m.runDown()
		if t.Failed() {
			t.Logf("make run's stderr:\n%s", m.logs.String())
		}
	})

	deadline := time.After(5 * time.Minute)
	for m.kubeconfig == "" {
		select {
		case line, ok := <-printed:
			require.True(t, ok, "make run ended before printing the export line:\n%s", strings.Join(m.out, "\n"))
			m.out = append(m.out, line)
			if k, found := strings.CutPrefix(line, "export KUBECONFIG="); found {
				m.kubeconfig = k
			}
		case <-deadline:
			t.Fatalf("no export line within 5 minutes; stdout so far:\n%s", strings.Join(m.out, "\n"))
		}
	}
	// The rest of the banner: how to apply the samples.
	for len(m.out) < 200 && !strings.Contains(strings.Join(m.out, "\n"), "make run-down") {
		line, ok := <-printed
		require.True(t, ok)
		m.out = append(m.out, line)
	}
	return m
}

// runDown runs `make run-down` for m's cluster and returns its output.
func (m *makeRun) runDown() ([]byte, error) {
	down := exec.Command("make", "--no-print-directory", "run-down", m.flags)
	down.Dir, down.Env = testutil.RepoRoot(), m.env
	return down.CombinedOutput()
}

// assertTornDown waits for make run to end after a teardown and checks that
// nothing of the cluster is left: its directory, its processes.
func (m *makeRun) assertTornDown(t *testing.T, name string, exitedCleanly bool) {
	t.Helper()
	select {
	case err := <-m.exited:
		if exitedCleanly {
			assert.NoError(t, err, "make run ends cleanly")
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("make run still running 2 minutes after the teardown")
	}
	assert.Contains(t, m.logs.String(), "Tearing down the local cluster")
	_, err := os.Stat(filepath.Join(m.workdir, "clusters", name))
	assert.True(t, os.IsNotExist(err), "the cluster's directory is gone: %v", err)
	assert.Empty(t, processesMentioning(t, m.workdir), "no process of the local cluster or its manager is left")
}

// `make run` on a machine whose kubeconfig reaches no cluster brings up a
// local cluster of its own with the simulated GPU and CPU nodes, installs the
// CRDs and the webhooks, runs the manager and prints an export KUBECONFIG
// line once all of it is ready; `make run-down` tears it all down and ends
// `make run`. It runs alone (not in parallel): a second cluster on 2 cores.
func TestMakeRunAndRunDown(t *testing.T) {
	root := testutil.RepoRoot()
	bin := filepath.Join(root, "bin")
	m := startMakeRun(t, "makerun")
	out, kubeconfig := m.out, m.kubeconfig
	assert.Contains(t, strings.Join(out, "\n"), `Local cluster "makerun" is up: 4 GPU nodes (32 nvidia.com/gpu in all), 2 CPU nodes.`)
	assert.Contains(t, strings.Join(out, "\n"), "webhooks: on, conversion webhook: on")
	assert.Equal(t, filepath.Join(m.workdir, "kubeconfig"), kubeconfig)
	assert.Contains(t, strings.Join(out, "\n"), "kubectl apply -k config/samples")

	// Ready means ready: the nodes are there and the webhooks answer.
	kubectl := func(args ...string) (string, error) {
		cmd := exec.Command(filepath.Join(bin, "kubectl"), append([]string{"--kubeconfig", kubeconfig}, args...)...)
		b, err := cmd.CombinedOutput()
		return string(b), err
	}
	nodes, err := kubectl("get", "nodes", "-o", "name")
	require.NoError(t, err, nodes)
	assert.Len(t, strings.Fields(nodes), 6, nodes)
	bad := exec.Command(filepath.Join(bin, "kubectl"), "--kubeconfig", kubeconfig, "create", "--dry-run=server", "-f", "-")
	bad.Stdin = strings.NewReader("apiVersion: ml.example.com/v1\nkind: TrainingJob\nmetadata:\n  name: big\n  namespace: default\nspec:\n  gpusPerWorker: 9\n")
	msg, err := bad.CombinedOutput()
	require.Error(t, err)
	// The webhook's words; the schema's would be "... should be less than
	// or equal to 8".
	assert.Contains(t, string(msg), `The TrainingJob "big" is invalid: spec.gpusPerWorker: Invalid value: 9: must be between 0 and 8`)

	// A second make run on the same directory neither deletes this cluster
	// nor attaches a second manager to it: it says who runs it and stops.
	second := exec.Command("make", "--no-print-directory", "run", m.flags)
	second.Dir, second.Env = root, m.env
	secondOut, err := second.CombinedOutput()
	require.Error(t, err, "a second make run on the same workdir fails:\n%s", secondOut)
	assert.Contains(t, string(secondOut), "a local cluster is already running from "+m.workdir+" (pid ")
	assert.Contains(t, string(secondOut), "its kubeconfig is "+kubeconfig)
	assert.Contains(t, string(secondOut), "make run-down")
	assert.NotContains(t, string(secondOut), "Starting kube-apiserver", "it started nothing")
	nodes, err = kubectl("get", "nodes", "-o", "name")
	require.NoError(t, err, "the running cluster is untouched: %s", nodes)
	assert.Len(t, strings.Fields(nodes), 6, nodes)

	// With a kubeconfig that reaches a cluster (this one), make run keeps the
	// operator-sdk meaning: the manager runs on this machine against it.
	runManagerAgainst(t, root, kubeconfig)

	downOut, err := m.runDown()
	require.NoError(t, err, string(downOut))
	assert.Contains(t, string(downOut), `Local cluster "makerun" deleted`)
	m.assertTornDown(t, "makerun", true)
}

// Ctrl-C in the terminal running `make run` (SIGINT to its process group)
// tears the local cluster and the manager down as make run-down does.
func TestMakeRunCtrlCTearsDown(t *testing.T) {
	m := startMakeRun(t, "ctrlc")
	require.NoError(t, syscall.Kill(-m.cmd.Process.Pid, syscall.SIGINT))
	// make reports the interrupt with a non-zero status of its own; what
	// matters is that nothing is left behind.
	m.assertTornDown(t, "ctrlc", false)
}

// runManagerAgainst runs `make run` with KUBECONFIG set to kubeconfig and
// waits until its manager has started its controllers on that cluster, then
// stops it.
func runManagerAgainst(t *testing.T, root, kubeconfig string) {
	t.Helper()
	cmd := exec.Command("make", "--no-print-directory", "run",
		"MANAGER_ARGS=--metrics-bind-address=0 --health-probe-bind-address=0")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = cmd.Stdout
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	lines := make(chan string, 1000)
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		exited <- cmd.Wait()
	}()
	stop := func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	defer stop()

	var seen []string
	against, started := false, false
	deadline := time.After(3 * time.Minute)
	for !started {
		select {
		case line, ok := <-lines:
			require.True(t, ok, "make run ended:\n%s", strings.Join(seen, "\n"))
			seen = append(seen, line)
			against = against || strings.HasPrefix(line, "Running the manager against ")
			started = strings.Contains(line, `"msg":"Starting workers"`) && strings.Contains(line, `"controller":"trainingjob"`)
		case <-deadline:
			t.Fatalf("the manager did not start its controllers within 3 minutes:\n%s", strings.Join(seen, "\n"))
		}
	}
	assert.True(t, against, "make run says which cluster it runs against:\n%s", strings.Join(seen, "\n"))
	assert.NotContains(t, strings.Join(seen, "\n"), "Local cluster", "no local cluster of its own")
	stop()
	select {
	case <-exited:
	case <-time.After(time.Minute):
		t.Fatal("the manager did not stop within a minute of SIGTERM")
	}
}

// processesMentioning lists the processes whose command line contains s.
func processesMentioning(t *testing.T, s string) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	var found []string
	for _, e := range entries {
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(cmdline) == 0 {
			continue
		}
		if line := strings.ReplaceAll(string(cmdline), "\x00", " "); strings.Contains(line, s) {
			found = append(found, e.Name()+": "+line)
		}
	}
	return found
}
