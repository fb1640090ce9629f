//go:build e2e

package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ml-operator/ml-operator/test/bench"
	"github.com/ml-operator/ml-operator/test/testutil"
)

// TestBenchmarkHarnessSmoke runs `make bench` in miniature (20 jobs x 4
// ranks, once) on a cluster of its own, so the benchmark harness keeps
// working. It checks that every scenario produced its measurements, never
// how fast they were: speed is reported by `make bench`, not tested.
func TestBenchmarkHarnessSmoke(t *testing.T) {
	root := testutil.RepoRoot()
	dir := t.TempDir()
	mgr := filepath.Join(dir, "manager")
	build := exec.Command("go", "build", "-o", mgr, "./cmd")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the manager: %v\n%s", err, out)
	}
	cfg := bench.Config{
		Jobs: 20, Ranks: 4, Repeats: 1, QPS: 50, Burst: 100,
		LatencySamples: 3, CostJobs: 2, MemoryPods: []int{0, 40}, RestartRanks: []int{4},
		SteadyPods: 40, SteadyDuration: 10 * time.Second, SteadyInterval: 5 * time.Second,
		ProfileDir: filepath.Join(dir, "profiles"),
	}
	if err := os.MkdirAll(cfg.ProfileDir, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	env, err := bench.Start(ctx, bench.EnvOptions{
		RepoRoot: root, BinDir: filepath.Join(root, "bin"), Manager: mgr,
		Workdir: filepath.Join(dir, "cluster"), Name: "bench-smoke",
		Pods: cfg.Pods(), QPS: cfg.QPS, Burst: cfg.Burst, Pprof: true, Log: os.Stderr,
	})
	if err != nil {
		t.Fatalf("starting the benchmark cluster: %v", err)
	}
	defer env.Stop()

	res, err := bench.Run(ctx, env, cfg, os.Stderr)
	if err != nil {
		t.Fatalf("benchmark: %v", err)
	}
	var table strings.Builder
	res.PrintTable(&table)

	if len(res.Burst) != 1 || len(res.Baseline) != 1 {
		t.Fatalf("burst and baseline runs: got %d and %d, want 1 each", len(res.Burst), len(res.Baseline))
	}
	if b := res.Burst[0]; b.PodsSeconds <= 0 || b.RunningSeconds < b.PodsSeconds {
		t.Errorf("burst times inconsistent: pods at %.2fs, all Running at %.2fs", b.PodsSeconds, b.RunningSeconds)
	}
	l := res.Latency
	if l == nil {
		t.Fatal("no latency measured")
	}
	for name, xs := range map[string][]float64{
		"create": l.CreateToPods, "suspend": l.Suspend, "resume": l.Resume,
		"numWorkers": l.NumWorkers, "weights": l.Weights,
	} {
		if len(xs) != cfg.LatencySamples {
			t.Errorf("%s latency: %d samples, want %d", name, len(xs), cfg.LatencySamples)
		}
	}
	if len(res.Webhooks) > 0 && res.Webhook.Admissions == 0 {
		t.Errorf("webhooks %v installed but the apiserver recorded no admission", res.Webhooks)
	}
	if len(res.Webhooks) > 0 && (len(res.NoopWebhooks) == 0 || res.NoopWebhook.Admissions == 0) {
		t.Errorf("no-op twins %v of the webhooks %v recorded %d admissions, want some", res.NoopWebhooks, res.Webhooks, res.NoopWebhook.Admissions)
	}
	// The table shows admission's floor beside ours, whole run and per phase.
	for _, want := range []string{"no-op twins (the floor)", "ours / no-op at p99", "apiserver p50 / p99: ours; no-op;"} {
		if len(res.Webhooks) > 0 && !strings.Contains(table.String(), want) {
			t.Errorf("the table has no %q line:\n%s", want, table.String())
		}
	}
	if res.Cost == nil {
		t.Fatal("no API cost measured")
	}
	var podCreates float64
	for _, row := range res.Cost.Rows {
		if row.Verb == "POST" && row.Resource == "pods" && row.Subresource == "" {
			podCreates = row.PerJob
		}
	}
	// Every rank's pod is created once per lifecycle: the counter must see them.
	if podCreates < float64(cfg.Ranks) {
		t.Errorf("API cost: %.1f pod creates per job, want at least %d", podCreates, cfg.Ranks)
	}
	if len(res.Memory) != 2 || res.Memory[1].Pods < 40 || res.Memory[1].Readings[0].RSSBytes <= 0 || res.Memory[1].Readings[0].HeapBytes <= 0 {
		t.Errorf("memory readings incomplete: %+v", res.Memory)
	}
	// The steady run reads at 0, 5 and 10 s, holding the 40 pods.
	if s := res.Steady; s == nil || len(s.Samples) != 3 {
		t.Errorf("steady run: want 3 readings, got %+v", s)
	} else {
		for _, x := range s.Samples {
			if x.Pods < 40 || x.RSSAnonBytes <= 0 || x.HeapBytes <= 0 || x.NextGCBytes <= 0 {
				t.Errorf("steady reading incomplete: %+v", x)
			}
		}
		if !strings.Contains(table.String(), "steady run at 40 worker pods") {
			t.Errorf("the table has no steady run line:\n%s", table.String())
		}
	}
	// A heap profile at each level and at the steady run's end, from the
	// manager's --pprof-bind-address.
	for _, name := range []string{"heap-0.pb.gz", "heap-40.pb.gz", "heap-40-steady-end.pb.gz"} {
		if fi, err := os.Stat(filepath.Join(cfg.ProfileDir, name)); err != nil || fi.Size() == 0 {
			t.Errorf("heap profile %s: %v", name, err)
		}
	}
	if len(res.Restart) != 1 || len(res.Restart[0].Seconds) != 1 {
		t.Errorf("restart runs incomplete: %+v", res.Restart)
	}
}
