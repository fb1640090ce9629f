// Command bench measures ml-operator on a local kwok cluster it starts and
// deletes itself: burst pod creation against a plain-client baseline,
// latency of spec changes, API requests per job, manager memory and gang
// restart time; then, on a second cluster whose manager reads a canned
// Prometheus, how fast a ModelDeployment's traffic moves (weight change ->
// split served, failing analysis -> back on stable). It prints a table and
// writes the raw samples as JSON
// (`make bench`; docs/benchmarks.md). Nothing it measures passes or fails.
// The work is test/bench's (Start, Run); this is its command line.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/ml-operator/ml-operator/test/bench"
)

func main() {
	// client-go's throttling notices are the baseline working as intended.
	ctrllog.SetLogger(logr.Discard())
	klog.SetLogger(logr.Discard())
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run() (err error) {
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	cfg := bench.Config{}
	var memory, restart, gangRanks, gang, skip, out, workdir, binDir, mgr, mgrArgs string
	flag.IntVar(&cfg.Jobs, "jobs", 500, "TrainingJobs in the burst (N).")
	flag.IntVar(&cfg.Ranks, "ranks", 8, "Ranks per job (W).")
	flag.IntVar(&cfg.Repeats, "repeats", 3, "Times each scenario runs.")
	flag.IntVar(&cfg.GPUsPerWorker, "gpus-per-worker", 0, "nvidia.com/gpu per worker (0: CPU workers on CPU nodes; >0: 8-GPU nodes, enough for the load).")
	flag.Float64Var(&cfg.QPS, "qps", 50, "The manager's --kube-api-qps, and the baseline client's.")
	flag.IntVar(&cfg.Burst, "burst", 100, "The manager's --kube-api-burst, and the baseline client's.")
	flag.IntVar(&cfg.LatencySamples, "latency-samples", 20, "Samples per latency measurement.")
	flag.IntVar(&cfg.CostJobs, "cost-jobs", 10, "Jobs the API cost per job is averaged over.")
	flag.StringVar(&memory, "memory-pods", "0,1000,4000", "Worker-pod counts at which the manager's memory is read.")
	flag.IntVar(&cfg.SteadyPods, "steady-pods", 4000, "Worker pods the memory scenario holds for the steady run (with --steady).")
	flag.DurationVar(&cfg.SteadyDuration, "steady", 0, "How long the steady run holds --steady-pods worker pods, reading the manager's memory every --steady-interval (0: no steady run).")
	flag.DurationVar(&cfg.SteadyInterval, "steady-interval", time.Minute, "Time between the steady run's memory readings.")
	flag.StringVar(&cfg.ProfileDir, "profiles", "", "Directory for the manager's heap profiles at each memory level and at the steady run's end (the manager then serves its profiler on a loopback port; empty: none).")
	flag.StringVar(&restart, "restart-ranks", "8,64,512,1024", "Gang sizes at which restart time is measured.")
	flag.StringVar(&gangRanks, "gang-ranks", "", "Gang sizes at which the bind time is measured, native gangs against plain pods (needs --gang native; empty: not measured).")
	flag.StringVar(&gang, "gang", "", `"native": the cluster runs with Kubernetes' native gang scheduling (feature gates and scheduling.k8s.io/v1alpha2).`)
	flag.StringVar(&skip, "skip", "", "Scenarios not to run, comma-separated: burst, latency, cost, memory, restart, gang, peer, rollout.")
	flag.StringVar(&out, "out", filepath.Join(wd, "bench", "results"), "Directory for <date>.json (empty: no file).")
	flag.StringVar(&workdir, "workdir", "", "Cluster state directory (a temporary one when empty).")
	flag.StringVar(&binDir, "bin", filepath.Join(wd, "bin"), "Directory with kwokctl, kwok and the control-plane binaries.")
	flag.StringVar(&mgr, "manager", filepath.Join(wd, "bin", "manager"), "The manager binary (go build -o bin/manager ./cmd).")
	flag.StringVar(&mgrArgs, "manager-args", "", "Extra manager flags, space-separated.")
	flag.StringVar(&cfg.Peer.Binary, "peer", "", "Kubeflow's training-operator.v1 binary: the same burst runs against it, once, after ours (empty: not run).")
	flag.StringVar(&cfg.Peer.Version, "peer-version", "", "The training-operator module version --peer was built from.")
	flag.StringVar(&cfg.Peer.CRD, "peer-crd", "", "Its PyTorchJob CRD (manifests/base/crds/kubeflow.org_pytorchjobs.yaml of that module).")
	flag.Parse()
	// kwokctl looks binaries up on PATH, and a relative PATH entry makes it
	// try to download them instead.
	for _, p := range []*string{&binDir, &mgr, &cfg.Peer.Binary, &cfg.Peer.CRD, &cfg.ProfileDir} {
		if *p == "" {
			continue
		}
		if *p, err = filepath.Abs(*p); err != nil {
			return err
		}
	}
	if cfg.Peer.Binary != "" && cfg.Peer.CRD == "" {
		return fmt.Errorf("--peer needs --peer-crd")
	}
	if cfg.ProfileDir != "" {
		if err := os.MkdirAll(cfg.ProfileDir, 0o755); err != nil {
			return err
		}
	}
	if cfg.MemoryPods, err = ints(memory); err != nil {
		return fmt.Errorf("--memory-pods: %w", err)
	}
	if cfg.RestartRanks, err = ints(restart); err != nil {
		return fmt.Errorf("--restart-ranks: %w", err)
	}
	if cfg.GangRanks, err = ints(gangRanks); err != nil {
		return fmt.Errorf("--gang-ranks: %w", err)
	}
	if gang != "" && gang != "native" {
		return fmt.Errorf(`--gang: %q is not "native"`, gang)
	}
	if len(cfg.GangRanks) > 0 && gang != "native" {
		return fmt.Errorf("--gang-ranks needs --gang native")
	}
	cfg.Skip = map[string]bool{}
	for _, s := range strings.Split(skip, ",") {
		if s != "" {
			cfg.Skip[strings.TrimSpace(s)] = true
		}
	}
	if workdir == "" {
		if workdir, err = os.MkdirTemp("", "ml-operator-bench-"); err != nil {
			return err
		}
		// Kept when the run fails, for the manager's and components' logs.
		defer func() {
			if err == nil {
				os.RemoveAll(workdir)
			}
		}()
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	env, err := bench.Start(ctx, bench.EnvOptions{
		RepoRoot: wd, BinDir: binDir, Manager: mgr, Workdir: workdir, Name: "bench",
		Pods: cfg.Pods(), GPUsPerWorker: cfg.GPUsPerWorker, QPS: cfg.QPS, Burst: cfg.Burst,
		ManagerArgs: strings.Fields(mgrArgs), NativeGangs: gang == "native", Pprof: cfg.ProfileDir != "", Log: os.Stderr,
	})
	if err != nil {
		return err
	}
	defer env.Stop()
	fmt.Fprintf(os.Stderr, "Cluster ready: %d simulated nodes; manager pid %d, metrics %s\n", len(env.Nodes), env.ManagerPID, env.MetricsURL)

	// A long memory run writes what it has measured as it goes, marked
	// incomplete, so stopping it keeps the readings.
	checkpointed := false
	if out != "" {
		cfg.Checkpoint = func(res *bench.Result) {
			res.Incomplete = "checkpoint of a run still going"
			res.Finished = time.Now().UTC()
			if path, err := res.Save(out); err != nil {
				fmt.Fprintf(os.Stderr, "checkpoint: %v\n", err)
			} else if !checkpointed {
				fmt.Fprintf(os.Stderr, "Checkpoints of the raw samples: %s\n", path)
			}
			checkpointed = true
		}
	}
	res, err := bench.Run(ctx, env, cfg, os.Stderr)
	if err != nil {
		if res != nil {
			res.PrintTable(os.Stdout)
		}
		if checkpointed && res != nil {
			res.Incomplete = "stopped: " + err.Error()
			res.Finished = time.Now().UTC()
			if path, serr := res.Save(out); serr == nil {
				fmt.Printf("\nRaw samples so far (incomplete): %s\n", path)
			}
		}
		return fmt.Errorf("%w (manager log: %s)", err, filepath.Join(workdir, "manager.log"))
	}
	env.Stop()
	if !cfg.Skip["rollout"] {
		if res.Rollout, err = rollout(ctx, cfg, bench.EnvOptions{
			RepoRoot: wd, BinDir: binDir, Manager: mgr, Workdir: filepath.Join(workdir, "rollout"), Name: "bench-rollout",
			Pods: 64, QPS: cfg.QPS, Burst: cfg.Burst, ManagerArgs: strings.Fields(mgrArgs), Log: os.Stderr,
		}); err != nil {
			res.PrintTable(os.Stdout)
			return fmt.Errorf("%w (manager log: %s)", err, filepath.Join(workdir, "rollout", "manager.log"))
		}
	}
	res.PrintTable(os.Stdout)
	if out != "" {
		res.Incomplete = ""
		path, err := res.Save(out)
		if err != nil {
			return err
		}
		fmt.Printf("\nRaw samples: %s\n", path)
	}
	return nil
}

// rollout measures bench.RolloutLatency (cfg.LatencySamples of each) on a
// cluster of its own, whose manager reads a canned Prometheus on loopback
// (--prometheus-url): the scenarios before it run without one, as a
// cluster without Prometheus does.
func rollout(ctx context.Context, cfg bench.Config, o bench.EnvOptions) (*bench.RolloutLatency, error) {
	prom := bench.StartCannedPrometheus()
	defer prom.Close()
	o.ManagerArgs = append(o.ManagerArgs, "--prometheus-url="+prom.URL)
	if err := os.MkdirAll(o.Workdir, 0o755); err != nil {
		return nil, err
	}
	env, err := bench.Start(ctx, o)
	if err != nil {
		return nil, err
	}
	defer env.Stop()
	fmt.Fprintf(os.Stderr, "Rollout cluster ready: %d simulated nodes; manager pid %d reads Prometheus at %s\n", len(env.Nodes), env.ManagerPID, prom.URL)
	return bench.RunRollout(ctx, env, prom, cfg.LatencySamples, os.Stderr)
}

func ints(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%q is not a count", f)
		}
		out = append(out, n)
	}
	return out, nil
}
