//go:build chaos

// Package chaos runs ml-operator through failures on a local kwok cluster it
// starts and deletes itself (`make chaos`, docs/chaos.md): a few hundred
// TrainingJobs with random sizes and simulated outcomes while the manager
// process is SIGKILLed and restarted again and again, then a two-replica
// leader failover, then a kube-apiserver outage. Pod invariants are checked
// on every pod event, the jobs' terminal states and counters at the end,
// and no child may outlive its job.
package chaos

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/internal/localcluster"
	"github.com/ml-operator/ml-operator/test/testutil"
)

var (
	flagJobs        = flag.Int("jobs", 200, "TrainingJobs in the run.")
	flagKills       = flag.Int("kills", 20, "SIGKILLs of the manager in the first phase.")
	flagSeed        = flag.Uint64("seed", 0, "Random seed (0: from the clock); printed so a run can be repeated.")
	flagMaxRanks    = flag.Int("max-ranks", 8, "Ranks per job are drawn from 1..max-ranks.")
	flagKillMinGap  = flag.Duration("kill-min-gap", 3*time.Second, "Shortest time between a manager start and its kill.")
	flagKillMaxGap  = flag.Duration("kill-max-gap", 15*time.Second, "Longest time between a manager start and its kill.")
	flagOutage      = flag.Duration("apiserver-outage", 20*time.Second, "How long kube-apiserver stays stopped.")
	flagFailoverMax = flag.Duration("failover-limit", 20*time.Second, "Leader failover must take less than this.")
	flagSettle      = flag.Duration("settle-timeout", 8*time.Minute, "How long jobs may take to finish once a phase's chaos stops.")
	flagWorkdir     = flag.String("workdir", "", "Cluster state and logs (default <repo>/tmp/chaos); kept after the run.")
	flagNodes       = flag.Int("nodes", 6, "Simulated CPU nodes (110 pods each).")
)

const namespace = "chaos"

// run is the state of one chaos run.
type run struct {
	t       *testing.T
	c       *localcluster.Cluster
	cl      client.Client
	cs      kubernetes.Interface
	bin     string
	workdir string
	rng     *rand.Rand // chaos timing
	plan    *rand.Rand // the jobs, drawn only from here so a seed repeats them
	bad     *violations
	pods    *podWatcher
	jobs    *jobWatcher
	plans   []*plan
	figures []string
	// suspects are jobs in violation whose pod history is written out.
	suspects []string
}

func (r *run) logf(format string, args ...any) {
	fmt.Printf("%s chaos: %s\n", time.Now().UTC().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func (r *run) figure(format string, args ...any) {
	r.figures = append(r.figures, fmt.Sprintf(format, args...))
}

func TestChaos(t *testing.T) {
	seed := *flagSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	root := testutil.RepoRoot()
	workdir := *flagWorkdir
	if workdir == "" {
		workdir = filepath.Join(root, "tmp", "chaos")
	}
	workdir, _ = filepath.Abs(workdir)
	r := &run{t: t, workdir: workdir, bad: &violations{},
		rng:  rand.New(rand.NewPCG(seed, 1)),
		plan: rand.New(rand.NewPCG(seed, 2))}
	r.logf("seed %d (repeat with CHAOS_FLAGS=-seed=%d); %d jobs, %d manager kills; workdir %s",
		seed, seed, *flagJobs, *flagKills, workdir)
	r.figure("seed: %d", seed)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r.setup(ctx)

	phase1, phase2, phase3 := split(*flagJobs)
	r.killPhase(ctx, phase1)
	leaders := r.failoverPhase(ctx, phase2)
	r.outagePhase(ctx, leaders, phase3)
	for _, m := range leaders {
		r.recordExits(m, "after the outage")
		m.stop()
	}
	// No manager runs from here: deletion is the garbage collector's job.
	r.checkJobs(ctx)
	r.deleteAndCheckOrphans(ctx)
	r.report()
}

// split divides the jobs between the phases: most while the manager is
// killed, a few across the failover and the outage.
func split(n int) (int, int, int) {
	small := max(1, n/20)
	if n < 3 {
		return n, 0, 0
	}
	return n - 2*small, small, small
}

func (r *run) setup(ctx context.Context) {
	t := r.t
	root := testutil.RepoRoot()
	require(t, os.MkdirAll(r.workdir, 0o755))
	r.bin = filepath.Join(r.workdir, "manager")
	r.logf("building the manager: go build -o %s ./cmd", r.bin)
	build := exec.Command("go", "build", "-o", r.bin, "./cmd")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	var nodes []localcluster.NodeSpec
	for i := range *flagNodes {
		nodes = append(nodes, localcluster.CPUNode(fmt.Sprintf("cpu-node-%d", i)))
	}
	policy, err := writeAuditPolicy(r.workdir)
	require(t, err)
	opts := localcluster.Options{RepoRoot: root, BinDir: filepath.Join(root, "bin"), Workdir: r.workdir,
		Name: "chaos", Nodes: nodes, Log: os.Stdout, AuditPolicy: policy}
	start := time.Now()
	c, err := localcluster.Create(ctx, opts)
	if err != nil {
		_ = localcluster.Delete(context.Background(), opts)
		t.Fatalf("creating the cluster: %v", err)
	}
	reaper, err := c.StartReaper(os.Getpid(), false)
	if err != nil {
		_ = c.Delete(context.Background())
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			// kwokctl removes the logs with the cluster; keep them.
			_ = os.RemoveAll(filepath.Join(r.workdir, "logs"))
			_ = exec.Command("cp", "-r", c.LogsDir(), filepath.Join(r.workdir, "logs")).Run()
		}
		if err := c.Delete(context.Background()); err != nil {
			t.Logf("deleting the cluster: %v", err)
		}
		reaper.Stop()
		if t.Failed() {
			r.logf("failed: component logs (audit.log: pod deletions) in %s, manager logs in %s",
				filepath.Join(r.workdir, "logs"), r.workdir)
		}
	})
	r.c = c
	pctx, pcancel := context.WithCancel(ctx)
	t.Cleanup(pcancel)
	require(t, c.RunProvisioner(pctx, os.Stdout))
	c.RunTrainers(pctx, os.Stdout)

	cfg := rest.CopyConfig(c.Config)
	cfg.QPS, cfg.Burst = 200, 400
	r.cl, err = client.New(cfg, client.Options{Scheme: localcluster.Scheme()})
	require(t, err)
	r.cs, err = kubernetes.NewForConfig(cfg)
	require(t, err)
	for _, ns := range []string{namespace, leaseNamespace} {
		require(t, testutil.EnsureNamespace(ctx, r.cl, ns))
	}
	r.waitFor(ctx, time.Minute, "ServiceAccount chaos/default", func() (bool, string) {
		err := r.cl.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "default"}, &corev1.ServiceAccount{})
		return err == nil, fmt.Sprint(err)
	})

	r.pods = newPodWatcher(r.cs, namespace, r.bad)
	ready := make(chan struct{})
	wctx, wcancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); r.pods.run(wctx, ready) }()
	<-ready
	r.jobs = newJobWatcher(r.cl, namespace, r.bad)
	go func() { defer wg.Done(); r.jobs.run(wctx) }()
	t.Cleanup(func() { wcancel(); wg.Wait() })
	r.logf("cluster ready in %s (%d CPU nodes)", time.Since(start).Round(time.Second), len(nodes))
}

// createJobs creates n planned jobs of a phase, spread over spread.
func (r *run) createJobs(ctx context.Context, phase string, n int, spread time.Duration) []*plan {
	var created []*plan
	gap := time.Duration(0)
	if n > 1 {
		gap = spread / time.Duration(n)
	}
	for range n {
		p := newPlan(r.plan, len(r.plans), phase, *flagMaxRanks)
		r.plans = append(r.plans, p)
		created = append(created, p)
		r.create(ctx, p)
		sleep(ctx, gap)
	}
	return created
}

// create creates a job, retrying while the API server is unavailable.
func (r *run) create(ctx context.Context, p *plan) {
	var err error
	for range 60 {
		if err = r.cl.Create(ctx, p.job(namespace)); err == nil || apierrors.IsAlreadyExists(err) {
			return
		}
		sleep(ctx, time.Second)
	}
	r.bad.add("%s: not created: %v", p.name, err)
}

// killPhase: one manager (no leader election, so a restarted process works
// at once) SIGKILLed at random moments while jobs are created and run.
func (r *run) killPhase(ctx context.Context, n int) {
	m, err := newReplica("manager", r.bin, r.c.Kubeconfig, r.workdir, false)
	require(r.t, err)
	require(r.t, m.start())
	require(r.t, m.waitReady(ctx, 2*time.Minute))

	mean := (*flagKillMinGap + *flagKillMaxGap) / 2
	spread := time.Duration(*flagKills) * mean * 8 / 10
	r.logf("phase 1: %d jobs over %s while the manager is SIGKILLed %d times", n, spread.Round(time.Second), *flagKills)
	createdCh := make(chan []*plan, 1)
	go func() { createdCh <- r.createJobs(ctx, "kills", n, spread) }()

	kills := 0
	var downtimes []time.Duration
	for kills < *flagKills {
		gap := *flagKillMinGap + time.Duration(r.rng.Int64N(int64(*flagKillMaxGap-*flagKillMinGap)+1))
		sleep(ctx, gap)
		active := r.jobs.active()
		killedAt := time.Now()
		pid := m.kill()
		kills++
		// Start again after a random 0-2 s: sometimes at once, sometimes
		// after kwok moved pods on.
		sleep(ctx, time.Duration(r.rng.Int64N(int64(2*time.Second))))
		require(r.t, m.start())
		if err := m.waitReady(ctx, 2*time.Minute); err != nil {
			r.bad.add("manager not ready after kill %d: %v", kills, err)
		}
		downtimes = append(downtimes, time.Since(killedAt))
		r.logf("kill %d/%d: pid %d after %s, %d jobs unfinished; ready again in %s",
			kills, *flagKills, pid, gap.Round(100*time.Millisecond), active, time.Since(killedAt).Round(100*time.Millisecond))
	}
	created := <-createdCh
	r.settle(ctx, created, "phase 1")
	r.recordExits(m, "phase 1")
	m.stop()
	sort.Slice(downtimes, func(i, j int) bool { return downtimes[i] < downtimes[j] })
	r.figure("manager SIGKILLs survived: %d (kill to ready again: median %s, max %s)",
		kills, downtimes[len(downtimes)/2].Round(100*time.Millisecond), downtimes[len(downtimes)-1].Round(100*time.Millisecond))
}

// recordExits turns exits the suite did not cause into violations.
func (r *run) recordExits(m *replica, when string) {
	for _, e := range m.unexpectedExits() {
		r.bad.add("%s: %s", when, e)
	}
	m.mu.Lock()
	m.unexpected = nil
	m.mu.Unlock()
}

// failoverPhase: two replicas with leader election; the leader is
// SIGKILLed while jobs run and the time until the other holds the Lease is
// measured. It returns both replicas running (the killed one restarted).
func (r *run) failoverPhase(ctx context.Context, n int) []*replica {
	var reps []*replica
	for _, name := range []string{"replica-a", "replica-b"} {
		m, err := newReplica(name, r.bin, r.c.Kubeconfig, r.workdir, true)
		require(r.t, err)
		require(r.t, m.start())
		reps = append(reps, m)
	}
	// A replica is ready (probes) before it leads; wait for a leader.
	var leader, other *replica
	r.waitFor(ctx, time.Minute, "a leader among the two replicas", func() (bool, string) {
		for i, m := range reps {
			if m.isLeader(ctx) {
				leader, other = m, reps[1-i]
				return true, ""
			}
		}
		return false, "no replica reports leader_election_master_status 1"
	})
	lease := &coordinationv1.Lease{}
	require(r.t, r.cl.Get(ctx, client.ObjectKey{Namespace: leaseNamespace, Name: leaseName}, lease))
	oldHolder := deref(lease.Spec.HolderIdentity)
	r.logf("phase 2: %s leads (lease holder %s); %d jobs, then SIGKILL the leader", leader.name, oldHolder, n)

	created := r.createJobs(ctx, "failover", n, 2*time.Second)
	// Kill while the jobs are in flight: once some of their pods run.
	r.waitFor(ctx, time.Minute, "phase 2 pods running", func() (bool, string) {
		return r.jobs.countState(created, mlv1.StateRunning) > 0, "no phase 2 job Running yet"
	})
	killedAt := time.Now()
	leader.kill()
	var newHolder string
	var acquired time.Time
	var observed time.Duration
	r.waitFor(ctx, 2*time.Minute, "a new lease holder", func() (bool, string) {
		l := &coordinationv1.Lease{}
		if err := r.cl.Get(ctx, client.ObjectKey{Namespace: leaseNamespace, Name: leaseName}, l); err != nil {
			return false, err.Error()
		}
		h := deref(l.Spec.HolderIdentity)
		if h == "" || h == oldHolder || l.Spec.AcquireTime == nil {
			return false, "holder " + h
		}
		newHolder, acquired, observed = h, l.Spec.AcquireTime.Time, time.Since(killedAt)
		return true, ""
	})
	failover := acquired.Sub(killedAt)
	r.waitFor(ctx, 30*time.Second, other.name+" reports itself leader", func() (bool, string) {
		return other.isLeader(ctx), "leader_election_master_status not 1"
	})
	r.logf("leader %s killed; %s acquired the lease %s later (seen by the suite after %s)",
		leader.name, newHolder, failover.Round(10*time.Millisecond), observed.Round(10*time.Millisecond))
	if failover >= *flagFailoverMax {
		r.bad.add("leader failover took %s (limit %s)", failover.Round(10*time.Millisecond), *flagFailoverMax)
	}
	r.figure("leader failover: %s from SIGKILL of the leader to the new leader's Lease acquireTime (limit %s; seen by polling after %s)",
		failover.Round(10*time.Millisecond), *flagFailoverMax, observed.Round(10*time.Millisecond))

	r.settle(ctx, created, "phase 2")
	// Back to two replicas for the outage; the restarted one follows.
	require(r.t, leader.start())
	require(r.t, leader.waitReady(ctx, 2*time.Minute))
	for _, m := range reps {
		r.recordExits(m, "phase 2")
	}
	return reps
}

// outagePhase: kube-apiserver stopped while jobs run, started again after
// the outage; the replicas are restarted when they exit, as a kubelet would.
func (r *run) outagePhase(ctx context.Context, reps []*replica, n int) {
	r.logf("phase 3: %d jobs, then kube-apiserver stopped for %s", n, *flagOutage)
	created := r.createJobs(ctx, "outage", n, 2*time.Second)
	r.waitFor(ctx, time.Minute, "phase 3 pods running", func() (bool, string) {
		return r.jobs.countState(created, mlv1.StateRunning) > 0, "no phase 3 job Running yet"
	})
	sigterm := time.Now()
	stopped, err := r.c.StopComponent(ctx, "kube-apiserver")
	require(r.t, err)
	down := time.Now()
	r.logf("kube-apiserver (pid %d) stopped: SIGTERM, exited %s later", stopped.PID, down.Sub(sigterm).Round(100*time.Millisecond))
	sleep(ctx, *flagOutage)
	pid, err := stopped.Start()
	require(r.t, err)
	outage, unavailable := time.Since(down), time.Since(sigterm)
	r.waitFor(ctx, 2*time.Minute, "kube-apiserver /readyz", func() (bool, string) {
		body, err := r.cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil && string(body) == "ok", fmt.Sprint(err)
	})
	ready := time.Since(down)
	r.logf("kube-apiserver started again (pid %d) after %s, ready %s after it stopped",
		pid, outage.Round(100*time.Millisecond), ready.Round(100*time.Millisecond))
	r.settle(ctx, created, "phase 3")
	var exits []string
	lost := 0
	for _, m := range reps {
		for _, e := range m.unexpectedExits() {
			exits = append(exits, e)
			if strings.Contains(e, "leader election lost") {
				lost++
			}
		}
		m.mu.Lock()
		m.unexpected = nil
		m.mu.Unlock()
	}
	for _, e := range exits {
		r.logf("during the outage: %s", e)
	}
	r.figure("kube-apiserver outage survived: down %s after it exited (%s from SIGTERM to started again), ready %s after it exited; manager exits, each restarted like a kubelet would: %d (leader election lost: %d, failed to start while the API server was down: %d)",
		outage.Round(100*time.Millisecond), unavailable.Round(100*time.Millisecond), ready.Round(100*time.Millisecond),
		len(exits), lost, len(exits)-lost)
}

// settle waits until every job of a phase is Completed or Failed.
func (r *run) settle(ctx context.Context, plans []*plan, what string) {
	start := time.Now()
	deadline := start.Add(*flagSettle)
	for {
		var left []string
		for _, p := range plans {
			if st := r.jobs.state(p.name); !st.IsFinished() {
				left = append(left, fmt.Sprintf("%s(%s)", p.name, st))
			}
		}
		if len(left) == 0 {
			r.logf("%s: all %d jobs finished %s after its chaos stopped", what, len(plans), time.Since(start).Round(time.Second))
			return
		}
		if time.Now().After(deadline) {
			r.bad.add("%s: %d jobs not finished %s after the chaos stopped: %s", what, len(left), *flagSettle, strings.Join(left, " "))
			return
		}
		sleep(ctx, 2*time.Second)
	}
}

// checkJobs compares every job's end with what its outcome implies.
func (r *run) checkJobs(ctx context.Context) {
	list := &mlv1.TrainingJobList{}
	require(r.t, r.cl.List(ctx, list, client.InNamespace(namespace)))
	byName := map[string]*mlv1.TrainingJob{}
	for i := range list.Items {
		byName[list.Items[i].Name] = &list.Items[i]
	}
	// kwok plays the kubelet by deleting pods by name; a late delete meant
	// for a gang the operator already replaced hits the new pod of that name.
	// The operator must count that as a disruption (a pod deleted by someone
	// else), so it is added to what the outcome implies.
	dels, err := podDeletions(r.c.LogsDir())
	if err != nil {
		r.bad.add("reading the audit log: %v", err)
	}
	foreignByJob, foreign := foreignDeletions(dels)
	affected := 0
	var extraDisruptions int32
	ok := 0
	perOutcome := map[outcome]int{}
	for _, p := range r.plans {
		perOutcome[p.outcome]++
		j := byName[p.name]
		if j == nil {
			r.bad.add("%s: the job is gone before the end", p.name)
			continue
		}
		got := expectation{state: j.Status.State, restarts: j.Status.Restarts, disruptions: j.Status.Disruptions}
		if c := meta.FindStatusCondition(j.Status.Conditions, string(mlv1.StateFailed)); c != nil && c.Status == metav1.ConditionTrue {
			got.reason = c.Reason
		}
		// Each attempt whose pods someone else deleted may add one
		// disruption: exactly one if the operator had seen the pod, none if
		// it was gone before the operator saw it (then the operator creates
		// it again in the same attempt, which is not a restart).
		want := p.want
		maybe := int32(len(foreignByJob[p.name]))
		if maybe > 0 {
			affected++
		}
		if got.disruptions > want.disruptions && got.disruptions <= want.disruptions+maybe {
			extraDisruptions += got.disruptions - want.disruptions
			want.disruptions = got.disruptions
		}
		if got != want {
			r.bad.add("%s ended as %+v, want %+v, or up to %d more disruptions (%s; attempts with pods deleted by someone else: %d); conditions: %s",
				p.name, got, want, maybe, p, maybe, conditions(j))
			r.suspects = append(r.suspects, namespace+"/"+p.name)
			continue
		}
		// The pods seen must not come from more attempts than the status counts.
		for a := range r.pods.attemptsSeen(namespace + "/" + p.name) {
			if n, err := strconv.Atoi(a); err != nil || int32(n) > j.Status.Attempt() {
				r.bad.add("%s: pods of attempt %q seen, status counts %d restarts, %d disruptions and %d placement timeouts", p.name, a, got.restarts, got.disruptions, j.Status.PlacementTimeouts)
			}
		}
		ok++
	}
	var mix []string
	for _, o := range outcomes {
		mix = append(mix, fmt.Sprintf("%s %d", o.o, perOutcome[o.o]))
	}
	events, relists, pods := r.pods.stats()
	r.figure("jobs checked: %d, ended as their outcome implies (state, Failed reason, restarts, disruptions): %d (%s)",
		len(r.plans), ok, strings.Join(mix, ", "))
	r.figure("pods deleted by someone other than the operator (kwok's late delete-by-name hitting a re-created pod; a disruption if the operator had seen the pod): %d, in %d jobs",
		foreign, affected)
	r.figure("disruptions counted beyond the simulated outcomes, each explained by such a deletion: %d", extraDisruptions)
	r.figure("pod invariants checked on %d pod events (%d worker pods; watch re-listed %d times)", events, pods, relists)
	if deletes, err := podDeletes(r.c.LogsDir()); err == nil {
		by := deletesByAgent(deletes)
		var parts []string
		for who, n := range by {
			parts = append(parts, fmt.Sprintf("%s %d", who, n))
		}
		sort.Strings(parts)
		r.figure("pod deletions by client (API server audit log): %s", strings.Join(parts, ", "))
	}
	if rec := r.pods.recreated(); len(rec) > 0 {
		r.figure("job/rank/attempt slots that had a pod created again after it was gone: %d (%s)", len(rec), strings.Join(first(rec, 5), "; "))
	} else {
		r.figure("job/rank/attempt slots that had a pod created again after it was gone: 0")
	}
}

// deleteAndCheckOrphans deletes every job and waits for the garbage
// collector: no pod, Service or ConfigMap of a job may remain; checkpoint
// PVCs remain exactly for retainOnDelete jobs, owned by nobody.
func (r *run) deleteAndCheckOrphans(ctx context.Context) {
	require(r.t, r.cl.DeleteAllOf(ctx, &mlv1.TrainingJob{}, client.InNamespace(namespace)))
	r.waitFor(ctx, 2*time.Minute, "every TrainingJob gone", func() (bool, string) {
		list := &mlv1.TrainingJobList{}
		if err := r.cl.List(ctx, list, client.InNamespace(namespace)); err != nil {
			return false, err.Error()
		}
		return len(list.Items) == 0, fmt.Sprintf("%d left", len(list.Items))
	})
	wantPVC := map[string]bool{}
	for _, p := range r.plans {
		if p.checkpoint == retainedPVC {
			wantPVC[mlv1.CheckpointPVCName(p.name)] = true
		}
	}
	var last []string
	deadline := time.Now().Add(3 * time.Minute)
	for {
		last = r.orphans(ctx, wantPVC)
		if len(last) == 0 || time.Now().After(deadline) {
			break
		}
		sleep(ctx, 2*time.Second)
	}
	for _, o := range last {
		r.bad.add("after deleting every job: %s", o)
	}
	r.figure("orphans after deleting all %d jobs: %d (retained checkpoint PVCs, kept as retainOnDelete asks: %d)",
		len(r.plans), len(last), len(wantPVC))
	// The retained PVCs are user data the suite made; remove them now.
	_ = r.cl.DeleteAllOf(ctx, &corev1.PersistentVolumeClaim{}, client.InNamespace(namespace))
}

func (r *run) orphans(ctx context.Context, wantPVC map[string]bool) []string {
	var out []string
	pods := &corev1.PodList{}
	svcs := &corev1.ServiceList{}
	cms := &corev1.ConfigMapList{}
	pvcs := &corev1.PersistentVolumeClaimList{}
	for _, l := range []client.ObjectList{pods, svcs, cms, pvcs} {
		if err := r.cl.List(ctx, l, client.InNamespace(namespace)); err != nil {
			return []string{"listing: " + err.Error()}
		}
	}
	for _, p := range pods.Items {
		out = append(out, "pod "+p.Name)
	}
	for _, s := range svcs.Items {
		out = append(out, "service "+s.Name)
	}
	for _, c := range cms.Items {
		if c.Name != "kube-root-ca.crt" {
			out = append(out, "configmap "+c.Name)
		}
	}
	have := map[string]bool{}
	for _, p := range pvcs.Items {
		have[p.Name] = true
		switch {
		case !wantPVC[p.Name]:
			out = append(out, "pvc "+p.Name+" (retainOnDelete false)")
		case len(p.OwnerReferences) > 0:
			out = append(out, "retained pvc "+p.Name+" still has owner references")
		}
	}
	for name := range wantPVC {
		if !have[name] {
			out = append(out, "retained pvc "+name+" was deleted")
		}
	}
	sort.Strings(out)
	return out
}

func (r *run) report() {
	bad := r.bad.all()
	r.figure("violations: %d", len(bad))
	fmt.Println("\n==================== chaos figures ====================")
	for _, f := range r.figures {
		fmt.Println("  " + f)
	}
	for _, v := range bad {
		fmt.Println("  VIOLATION " + v)
	}
	fmt.Println("=======================================================")
	if len(r.suspects) > 0 {
		path := filepath.Join(r.workdir, "violations-pod-history.txt")
		var b strings.Builder
		deletes, err := podDeletes(r.c.LogsDir())
		if err != nil {
			fmt.Fprintf(&b, "(audit log: %v)\n", err)
		}
		for _, job := range r.suspects {
			fmt.Fprintf(&b, "== %s\n%s\n", job, strings.Join(r.pods.history(job), "\n"))
			var pods []string
			for pod := range deletes {
				if strings.HasPrefix(pod, job+"-") {
					pods = append(pods, pod)
				}
			}
			sort.Strings(pods)
			for _, pod := range pods {
				fmt.Fprintf(&b, "  deletions of %s:\n    %s\n", pod, strings.Join(deletes[pod], "\n    "))
			}
		}
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err == nil {
			fmt.Println("  pod event history of the jobs in violation: " + path)
		}
	}
	if len(bad) > 0 {
		r.t.Errorf("%d invariant violations (listed above)", len(bad))
	}
}

// waitFor polls cond every 250 ms; past timeout it is a violation and the
// run stops (the phases after it depend on it).
func (r *run) waitFor(ctx context.Context, timeout time.Duration, what string, cond func() (bool, string)) {
	r.t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for {
		var ok bool
		ok, last = cond()
		if ok {
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			r.bad.add("%s: not within %s; last seen: %s", what, timeout, last)
			r.report()
			r.t.FailNow()
		}
		sleep(ctx, 250*time.Millisecond)
	}
}

func require(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func first(s []string, n int) []string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// conditions is a job's conditions in one line, for violation reports.
func conditions(j *mlv1.TrainingJob) string {
	var out []string
	for _, c := range j.Status.Conditions {
		out = append(out, fmt.Sprintf("%s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message))
	}
	return strings.Join(out, " | ")
}
