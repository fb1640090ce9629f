//go:build e2e_real

// Package makerun proves `make run NODE=real` as a user runs it: the make
// dispatch (run.mk -> run-real -> bin/realnode run), the node and the
// operator it brings up, its banner, and its teardown on Ctrl-C. It is a
// package of its own, run by `make e2e-real` after test/e2ereal's suite has
// torn its node down: two real nodes on one machine would share the node
// address, the routes and the iptables chains (the harness's lock refuses a
// second one, which this test also checks).
package makerun

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ml-operator/ml-operator/internal/realnode"
)

// lockedBuffer collects a process's stderr while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// `make run NODE=real` brings up the real node with the operator deployed
// from config/default, prints the export KUBECONFIG line once the node is
// Ready and the manager Available, refuses a second real node on the
// machine, and on Ctrl-C (SIGINT to its process group, as a terminal sends
// it) tears everything down: no process, mount, route, address, bridge,
// iptables chain, namespace or cgroup of the node is left, nor its workdir.
func TestMakeRunNodeRealUntilCtrlC(t *testing.T) {
	root, err := filepath.Abs("../../..")
	require.NoError(t, err)
	bin := filepath.Join(root, "bin")
	workdir, err := os.MkdirTemp("", "ml-operator-makerun-real-")
	require.NoError(t, err)
	// Below a directory of the test's own, not yet there: the harness
	// creates the workdir, and its teardown must remove it (checked below).
	workdir = filepath.Join(workdir, "node")

	cmd := exec.Command("make", "--no-print-directory", "run", "NODE=real", "REALNODE_WORKDIR="+workdir)
	cmd.Dir = root
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	printed := make(chan string, 100)
	exited := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			printed <- sc.Text()
		}
		close(printed)
		// stdout ends when every process holding it has exited, bin/realnode
		// included (make's own exit alone does not end it).
		exited <- cmd.Wait()
	}()
	interrupted := false
	t.Cleanup(func() {
		if !interrupted {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGINT)
			select {
			case <-exited:
			case <-time.After(3 * time.Minute):
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			}
		}
		// Whatever happened, leave nothing on the machine.
		if err := realnode.Down(context.Background(), workdir); err != nil {
			t.Errorf("make run-real-down's sweep after the test: %v", err)
		}
		if t.Failed() {
			t.Logf("make run NODE=real's stderr:\n%s", stderr.String())
			if kept, err := os.MkdirTemp("", "ml-operator-makerun-real-logs-"); err == nil {
				if exec.Command("cp", "-a", filepath.Join(workdir, "logs"), kept).Run() == nil {
					t.Logf("the node's component logs are kept in %s", kept)
				}
			}
		}
		_ = os.RemoveAll(filepath.Dir(workdir))
	})

	var out []string
	kubeconfig := ""
	deadline := time.After(15 * time.Minute)
	for kubeconfig == "" {
		select {
		case line, ok := <-printed:
			require.True(t, ok, "make run NODE=real ended before printing the export line:\n%s", strings.Join(out, "\n"))
			out = append(out, line)
			if k, found := strings.CutPrefix(line, "export KUBECONFIG="); found {
				kubeconfig = k
			}
		case <-deadline:
			t.Fatalf("no export line within 15 minutes; stdout so far:\n%s", strings.Join(out, "\n"))
		}
	}
	for !strings.Contains(strings.Join(out, "\n"), "Stop with Ctrl-C.") {
		line, ok := <-printed
		require.True(t, ok, "make run NODE=real ended after its export line:\n%s", strings.Join(out, "\n"))
		out = append(out, line)
	}
	banner := strings.Join(out, "\n")
	t.Logf("make run NODE=real printed:\n%s", banner)
	assert.Contains(t, banner, `Real node "realnode" is Ready (`)
	assert.Contains(t, banner, "The operator runs in ml-operator-system (image ghcr.io/ml-operator/ml-operator:v0.2.0, from make deploy)")
	assert.Contains(t, banner, "Component logs: "+filepath.Join(workdir, "logs"))
	assert.Equal(t, filepath.Join(workdir, "pki", "admin.kubeconfig"), kubeconfig)
	assert.Contains(t, stderr.String(), "Operator deployed and Available", "the harness's progress goes to stderr")

	// The node's records of the machine from before it started: its
	// teardown removes them with the workdir, and the leftovers check
	// below compares against them.
	records := t.TempDir()
	for _, f := range []string{"host-before.json", "netns-before.json"} {
		b, err := os.ReadFile(filepath.Join(workdir, f))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(records, f), b, 0o600))
	}

	kubectl := func(args ...string) (string, error) {
		c := exec.Command(filepath.Join(bin, "kubectl"), append([]string{"--kubeconfig", kubeconfig, "--request-timeout=30s"}, args...)...)
		b, err := c.CombinedOutput()
		return strings.TrimSpace(string(b)), err
	}
	// What the banner promises is true through that kubeconfig: the node is
	// Ready, the operator's manager (config/default's Deployment, its own
	// image) is Available, and its webhook answers through its Service with
	// the certificate cert-manager issued.
	ready, err := kubectl("get", "node", realnode.NodeName, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
	require.NoError(t, err, ready)
	assert.Equal(t, "True", ready, "node %s Ready", realnode.NodeName)
	avail, err := kubectl("-n", realnode.OperatorNamespace, "get", "deployment", realnode.ManagerDeployment,
		"-o", `jsonpath={.status.conditions[?(@.type=="Available")].status} {.spec.template.spec.containers[?(@.name=="manager")].image}`)
	require.NoError(t, err, avail)
	assert.Equal(t, "True "+realnode.ManagerImage, avail, "the manager Deployment is Available on the shipped image")
	bad := exec.Command(filepath.Join(bin, "kubectl"), "--kubeconfig", kubeconfig, "create", "--dry-run=server", "-f", "-")
	bad.Stdin = strings.NewReader("apiVersion: ml.example.com/v1\nkind: TrainingJob\nmetadata:\n  name: big\n  namespace: default\nspec:\n  gpusPerWorker: 9\n")
	msg, err := bad.CombinedOutput()
	require.Error(t, err, "a TrainingJob asking 9 GPUs a worker is refused")
	// The webhook's words; the CRD schema's would be "should be less than
	// or equal to 8".
	assert.Contains(t, string(msg), `The TrainingJob "big" is invalid: spec.gpusPerWorker: Invalid value: 9: must be between 0 and 8`)

	// A second make run NODE=real refuses: one real node per machine. It
	// touches nothing of the running one.
	second := exec.Command("make", "--no-print-directory", "run", "NODE=real", "REALNODE_WORKDIR="+workdir+"-second")
	second.Dir = root
	secondOut, err := second.CombinedOutput()
	require.Error(t, err, "a second make run NODE=real fails:\n%s", secondOut)
	assert.Contains(t, string(secondOut), "another real node is running on this machine ("+realnode.LockFile+" is locked)")
	assert.NotContains(t, string(secondOut), "Starting containerd", "it started nothing")
	_ = os.RemoveAll(workdir + "-second")
	ready, err = kubectl("get", "node", realnode.NodeName, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
	require.NoError(t, err, "the running node is untouched: %s", ready)
	assert.Equal(t, "True", ready)

	// Ctrl-C.
	interrupted = true
	require.NoError(t, syscall.Kill(-cmd.Process.Pid, syscall.SIGINT))
	select {
	case <-exited:
		// make reports the interrupt with a status of its own; what matters
		// is what is left behind.
	case <-time.After(3 * time.Minute):
		t.Fatalf("make run NODE=real still running 3 minutes after Ctrl-C; stderr:\n%s", stderr.String())
	}
	assert.Contains(t, stderr.String(), "Tearing the real node down")
	_, err = os.Stat(workdir)
	require.True(t, os.IsNotExist(err), "the workdir %s is removed: %v", workdir, err)
	// The leftovers check reads the records from the workdir: put them
	// back in an otherwise empty one (a process or mount is found by the
	// workdir's path, which is the same).
	require.NoError(t, os.MkdirAll(workdir, 0o755))
	for _, f := range []string{"host-before.json", "netns-before.json"} {
		b, err := os.ReadFile(filepath.Join(records, f))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(workdir, f), b, 0o600))
	}
	assert.Empty(t, realnode.Leftovers(context.Background(), workdir), "the node left nothing on the machine")
}
