package bench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// Result is everything one run measured: raw samples plus the machine.
type Result struct {
	Config   Config    `json:"config"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	Machine  Machine   `json:"machine"`
	Nodes    int       `json:"nodes"`
	Webhooks []string  `json:"webhooks"`
	// NoopWebhooks are the no-op twins of Webhooks (test/bench/noop.go).
	NoopWebhooks []string `json:"noopWebhooks,omitempty"`

	Baseline []BaselineRun `json:"baseline,omitempty"`
	Burst    []BurstRun    `json:"burst,omitempty"`
	Latency  *Latency      `json:"latency,omitempty"`
	// Webhook is our admission webhooks' calls, NoopWebhook their no-op
	// twins' (the floor), WebhookByName each webhook's.
	Webhook       WebhookLatency            `json:"webhookAdmission"`
	NoopWebhook   WebhookLatency            `json:"noopWebhookAdmission"`
	WebhookByName map[string]WebhookLatency `json:"webhookAdmissionByName,omitempty"`
	Cost          *Cost                     `json:"apiCost,omitempty"`
	Memory        []MemoryLevel             `json:"memory,omitempty"`
	Restart       []RestartRun              `json:"restart,omitempty"`
	GangBind      []GangBindRun             `json:"gangBind,omitempty"`
	// Peer is Kubeflow's training-operator under the same burst.
	Peer *PeerRun `json:"peer,omitempty"`
	// Steady is the manager's memory over time at a constant number of
	// worker pods (the memory scenario's steady run).
	Steady *SteadyRun `json:"steady,omitempty"`
	// Rollout is how fast a ModelDeployment's traffic moves (a cluster of
	// its own, whose manager reads a canned Prometheus; rollout.go).
	Rollout *RolloutLatency `json:"rollout,omitempty"`
	// Phases break the control plane's work down by scenario.
	Phases []Phase `json:"phases,omitempty"`
	// Incomplete says why the run had not finished when this was written:
	// a checkpoint of a run still going, or the error that stopped it.
	// Empty for a finished run.
	Incomplete string `json:"incomplete,omitempty"`
}

// Machine describes where the run happened.
type Machine struct {
	CPUs      int    `json:"cpus"`
	CPUModel  string `json:"cpuModel"`
	MemoryKB  int64  `json:"memoryKB"`
	Kernel    string `json:"kernel"`
	GoVersion string `json:"goVersion"`
	Commit    string `json:"commit"`
}

// BaselineRun is one plain-client creation of the burst's pod count.
type BaselineRun struct {
	Seconds       float64 `json:"seconds"`
	PodsPerSecond float64 `json:"podsPerSecond"`
}

// BurstRun is one burst of Jobs x Ranks.
type BurstRun struct {
	// JobsCreatedSeconds is how long the benchmark took to create the jobs.
	JobsCreatedSeconds float64 `json:"jobsCreatedSeconds"`
	// PodsSeconds: from the first create to every pod seen.
	PodsSeconds float64 `json:"podsSeconds"`
	// RunningSeconds: from the first create to every job Running.
	RunningSeconds float64 `json:"runningSeconds"`
	PodsPerSecond  float64 `json:"podsPerSecond"`
	// ManagerRequests is what the manager's client sent from the first create
	// to every job Running, by "<method> <HTTP code>"
	// (rest_client_requests_total).
	ManagerRequests map[string]float64 `json:"managerRequests"`
}

// Latency samples, in milliseconds.
type Latency struct {
	CreateToPods []float64 `json:"createToPodsMs"`
	Suspend      []float64 `json:"suspendToPodsGoneMs"`
	Resume       []float64 `json:"resumeToPodsMs"`
	NumWorkers   []float64 `json:"numWorkersToNewGangMs"`
	Weights      []float64 `json:"weightToHTTPRouteMs"`
	// PatchCalls is how long each suspend, resume and numWorkers patch took
	// to return (the API server and the admission webhooks): the part of
	// those latencies that is not the operator's.
	PatchCalls []float64 `json:"patchCallMs,omitempty"`
}

// WebhookLatency is from apiserver_admission_webhook_admission_duration_seconds
// over the whole run (every call of the webhooks it is about, any operation).
type WebhookLatency struct {
	Admissions int     `json:"admissions"`
	P50Ms      float64 `json:"p50Ms"`
	P99Ms      float64 `json:"p99Ms"`
	// Buckets are the calls that took at most each bucket's upper bound
	// (cumulative, as the histogram counts them): with buckets this coarse
	// (5 ms, 25 ms, 100 ms, 500 ms, ...), the shares are what can be
	// compared exactly; the quantiles are interpolations.
	Buckets []Bucket `json:"buckets,omitempty"`
}

// Bucket is a histogram's cumulative count at an upper bound.
type Bucket struct {
	LeMs  float64 `json:"leMs"`
	Calls int     `json:"calls"`
}

// webhookLatency is the admission histogram's series that keep passes,
// after minus before.
func webhookLatency(after, before map[string]*dto.MetricFamily, keep func(*dto.Metric) bool) WebhookLatency {
	h := sumHistogram(after, admissionHistogram, keep).minus(sumHistogram(before, admissionHistogram, keep))
	w := WebhookLatency{Admissions: int(h.total), P50Ms: h.quantile(0.5) * 1000, P99Ms: h.quantile(0.99) * 1000}
	for i, b := range h.bounds {
		if !math.IsInf(b, 1) {
			w.Buckets = append(w.Buckets, Bucket{LeMs: b * 1000, Calls: int(h.counts[i])})
		}
	}
	return w
}

// over is the share of calls above leMs (NaN without calls or that bucket).
func (w WebhookLatency) over(leMs float64) float64 {
	for _, b := range w.Buckets {
		if b.LeMs == leMs && w.Admissions > 0 {
			return 1 - float64(b.Calls)/float64(w.Admissions)
		}
	}
	return math.NaN()
}

// Cost is the API requests per job lifecycle.
type Cost struct {
	Jobs                 int       `json:"jobs"`
	Ranks                int       `json:"ranks"`
	WindowSeconds        float64   `json:"windowSeconds"`
	OperatorWritesPerPod float64   `json:"operatorWritesPerPod"`
	Rows                 []CostRow `json:"rows"`
	// EventsPerJob counts the events in the namespace by "<reporting
	// controller> <reason>" (a series counts its repeats).
	EventsPerJob map[string]float64 `json:"eventsPerJob"`
}

// CostRow is one verb on one resource.
type CostRow struct {
	RequestKey
	PerJob float64 `json:"perJob"`
	Source string  `json:"source"`
}

// MemoryLevel is the manager's memory at a number of worker pods.
type MemoryLevel struct {
	Pods     int      `json:"pods"`
	Readings []Memory `json:"readings"`
	// LoadAverage is the machine's 1-minute load average after the readings.
	LoadAverage float64 `json:"loadAverage1m,omitempty"`
}

// SteadyRun is the manager's memory read at intervals while the number of
// worker pods stays the same.
type SteadyRun struct {
	Pods            int            `json:"pods"`
	DurationSeconds float64        `json:"durationSeconds"`
	IntervalSeconds float64        `json:"intervalSeconds"`
	Samples         []SteadySample `json:"samples"`
	// The least-squares slopes over the samples, in bytes per minute, of
	// the Go heap allocated, the next collection's goal (the live heap's
	// proxy) and the anonymous RSS. A flat heap has slopes near 0 against
	// the sawtooth between collections.
	HeapAllocSlope float64 `json:"heapAllocBytesPerMinute"`
	NextGCSlope    float64 `json:"nextGCBytesPerMinute"`
	RSSAnonSlope   float64 `json:"rssAnonBytesPerMinute"`
}

// SteadySample is one reading of the steady run.
type SteadySample struct {
	// Seconds since the steady run's first reading.
	Seconds float64 `json:"seconds"`
	Memory
	LoadAverage float64 `json:"loadAverage1m"`
	// Pods and RunningJobs are what the benchmark's watch saw in the
	// namespace at the reading.
	Pods        int `json:"pods"`
	RunningJobs int `json:"runningJobs"`
}

// fit sets the slopes from the samples.
func (s *SteadyRun) fit() {
	var mins, heap, next, anon []float64
	for _, x := range s.Samples {
		mins = append(mins, x.Seconds/60)
		heap = append(heap, float64(x.HeapBytes))
		next = append(next, float64(x.NextGCBytes))
		anon = append(anon, float64(x.RSSAnonBytes))
	}
	s.HeapAllocSlope, s.NextGCSlope, s.RSSAnonSlope = slope(mins, heap), slope(mins, next), slope(mins, anon)
}

// slope is the least-squares slope of ys over xs (0 with fewer than two
// distinct xs).
func slope(xs, ys []float64) float64 {
	n := float64(len(xs))
	if len(xs) < 2 || len(xs) != len(ys) {
		return 0
	}
	var sx, sy float64
	for i := range xs {
		sx, sy = sx+xs[i], sy+ys[i]
	}
	mx, my := sx/n, sy/n
	var sxy, sxx float64
	for i := range xs {
		sxy += (xs[i] - mx) * (ys[i] - my)
		sxx += (xs[i] - mx) * (xs[i] - mx)
	}
	if sxx == 0 {
		return 0
	}
	return sxy / sxx
}

// RestartRun is the gang restart time at one size, in seconds.
type RestartRun struct {
	// Ranks is the gang's WORLD_SIZE: Pods x NProcPerNode (gangShape).
	Ranks        int       `json:"ranks"`
	Pods         int       `json:"pods,omitempty"`
	NProcPerNode int       `json:"nprocPerNode,omitempty"`
	Seconds      []float64 `json:"seconds"`
	// FirstPodToRunning is from the next attempt's first pod to all of them
	// Running: the part after the backoff.
	FirstPodToRunning []float64 `json:"firstPodToRunningSeconds"`
	// ExcludingBackoff is Seconds without the restart backoff's wait
	// (RestartSteps.BackoffWait).
	ExcludingBackoff []float64 `json:"excludingBackoffSeconds,omitempty"`
	// Steps splits each restart.
	Steps []RestartSteps `json:"steps,omitempty"`
	// ManagerWrites are the manager's requests other than GET from the
	// gang Running before the failure to the next gang Running, by
	// "<method> <code>" (rest_client_requests_total), and WritesBeyondPods
	// their sum less the pods replaced.
	ManagerWrites    []map[string]float64 `json:"managerWrites,omitempty"`
	WritesBeyondPods []float64            `json:"writesBeyondPods,omitempty"`
}

// RestartSteps are the parts of one gang restart, in seconds, as the
// benchmark's watches saw them: the failure seen -> the job Restarting
// (the decision's status write) -> the old gang's last pod gone -> the new
// gang's first pod (BackoffWait of it is the backoff) -> its last pod
// created -> bound -> Running.
type RestartSteps struct {
	FailedToDecided      float64 `json:"failedToDecided"`
	DecidedToOldGone     float64 `json:"decidedToOldGone"`
	OldGoneToFirstNew    float64 `json:"oldGoneToFirstNew"`
	BackoffWait          float64 `json:"backoffWait"`
	FirstNewToAllSeen    float64 `json:"firstNewToAllCreated"`
	AllSeenToAllBound    float64 `json:"allCreatedToAllBound"`
	AllBoundToAllRunning float64 `json:"allBoundToAllRunning"`
}

// String is the steps in one line.
func (s RestartSteps) String() string {
	return fmt.Sprintf("decided %.2fs, old gang gone %.2fs, first new pod %.2fs (backoff %.2fs), all created %.2fs, all bound %.2fs, all Running %.2fs",
		s.FailedToDecided, s.DecidedToOldGone, s.OldGoneToFirstNew, s.BackoffWait, s.FirstNewToAllSeen, s.AllSeenToAllBound, s.AllBoundToAllRunning)
}

func describeMachine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version()}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		s := bufio.NewScanner(f)
		for s.Scan() {
			if k, v, ok := strings.Cut(s.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	if f, err := os.Open("/proc/meminfo"); err == nil {
		s := bufio.NewScanner(f)
		for s.Scan() {
			if rest, ok := strings.CutPrefix(s.Text(), "MemTotal:"); ok {
				fmt.Sscan(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), &m.MemoryKB)
				break
			}
		}
		f.Close()
	}
	if out, err := exec.Command("uname", "-r").Output(); err == nil {
		m.Kernel = strings.TrimSpace(string(out))
	}
	if out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output(); err == nil {
		m.Commit = strings.TrimSpace(string(out))
	}
	return m
}

// Save writes the result into dir as <start time>.json (bench/results is
// the runs of record) and returns the file's path.
func (r *Result) Save(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(dir, r.Started.Format("2006-01-02T1504Z")+".json")
	return path, r.WriteJSON(path)
}

// WriteJSON writes the result, indented.
func (r *Result) WriteJSON(path string) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

// MarshalJSON keeps NaN (an empty measurement) out of the JSON as null.
func (w WebhookLatency) MarshalJSON() ([]byte, error) {
	type plain struct {
		Admissions int      `json:"admissions"`
		P50Ms      *float64 `json:"p50Ms"`
		P99Ms      *float64 `json:"p99Ms"`
		Buckets    []Bucket `json:"buckets,omitempty"`
	}
	num := func(f float64) *float64 {
		if math.IsNaN(f) {
			return nil
		}
		return &f
	}
	return json.Marshal(plain{w.Admissions, num(w.P50Ms), num(w.P99Ms), w.Buckets})
}

func spread(s Summary, unit string, digits int) string {
	if s.N == 0 {
		return "-"
	}
	f := fmt.Sprintf("%%.%df", digits)
	return fmt.Sprintf(f+" %s ("+f+" – "+f+", n=%d)", s.Median, unit, s.Min, s.Max, s.N)
}

func msOrDash(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return fmt.Sprintf("%.1f ms", v)
}

func pcts(xs []float64) string {
	s := Summarize(xs)
	if s.N == 0 {
		return "-"
	}
	return fmt.Sprintf("p50 %.0f ms, p99 %.0f ms (max %.0f, n=%d)", s.Median, s.P99, s.Max, s.N)
}

// PrintTable writes the human-readable summary: medians with min – max.
func (r *Result) PrintTable(w io.Writer) {
	c := r.Config
	fmt.Fprintf(w, "\nml-operator benchmark, %s, %d CPUs (%s), %d simulated nodes, manager QPS %g / burst %d\n",
		r.Started.Format(time.RFC3339), r.Machine.CPUs, r.Machine.CPUModel, r.Nodes, c.QPS, c.Burst)
	fmt.Fprintln(w, "median (min – max, n) over the repeats; kwok simulates kubelets: no image pulls, no container start")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "scenario\tmeasure\tvalue")
	if len(r.Burst) > 0 {
		pods := c.Jobs * c.Ranks
		var ps, rs, rate, base, baseRate []float64
		for _, b := range r.Burst {
			ps, rs, rate = append(ps, b.PodsSeconds), append(rs, b.RunningSeconds), append(rate, b.PodsPerSecond)
		}
		for _, b := range r.Baseline {
			base, baseRate = append(base, b.Seconds), append(baseRate, b.PodsPerSecond)
		}
		name := fmt.Sprintf("burst %d x %d (%d pods)", c.Jobs, c.Ranks, pods)
		fmt.Fprintf(tw, "%s\tall pods created\t%s\n", name, spread(Summarize(ps), "s", 2))
		fmt.Fprintf(tw, "\tall jobs Running\t%s\n", spread(Summarize(rs), "s", 2))
		fmt.Fprintf(tw, "\tpods/s\t%s\n", spread(Summarize(rate), "", 1))
		keys := make([]string, 0, len(r.Burst[0].ManagerRequests))
		for k := range r.Burst[0].ManagerRequests {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			var xs []float64
			for _, b := range r.Burst {
				xs = append(xs, b.ManagerRequests[k])
			}
			fmt.Fprintf(tw, "\tmanager requests %s (create -> all Running)\t%s\n", k, spread(Summarize(xs), "", 0))
		}
		fmt.Fprintf(tw, "baseline (plain client, same QPS/burst)\tall pods created\t%s\n", spread(Summarize(base), "s", 2))
		fmt.Fprintf(tw, "\tpods/s\t%s\n", spread(Summarize(baseRate), "", 1))
		if br := Summarize(baseRate).Median; br > 0 {
			fmt.Fprintf(tw, "\toperator rate / baseline rate\t%.0f %%\n", 100*Summarize(rate).Median/br)
		}
	}
	if l := r.Latency; l != nil {
		fmt.Fprintf(tw, "latency (cluster loaded)\tcreate -> all ranks' pods\t%s\n", pcts(l.CreateToPods))
		fmt.Fprintf(tw, "\tsuspend -> pods gone\t%s\n", pcts(l.Suspend))
		fmt.Fprintf(tw, "\tresume -> pods back\t%s\n", pcts(l.Resume))
		fmt.Fprintf(tw, "\tnumWorkers+1 -> new gang's pods\t%s\n", pcts(l.NumWorkers))
		fmt.Fprintf(tw, "\tMD weight -> HTTPRoute\t%s\n", pcts(l.Weights))
		if len(l.PatchCalls) > 0 {
			fmt.Fprintf(tw, "\tthe suspend/resume/numWorkers patch call itself\t%s\n", pcts(l.PatchCalls))
		}
	}
	if r.Webhook.Admissions > 0 {
		fmt.Fprintf(tw, "webhook admission (apiserver histogram, whole run)\tours: p50 / p99; calls over 100 ms\t%.1f ms / %.1f ms (%d calls); %.1f %%\n",
			r.Webhook.P50Ms, r.Webhook.P99Ms, r.Webhook.Admissions, 100*r.Webhook.over(100))
		if n := r.NoopWebhook; n.Admissions > 0 {
			fmt.Fprintf(tw, "\tno-op twins (the floor): p50 / p99; calls over 100 ms\t%.1f ms / %.1f ms (%d calls); %.1f %%\n",
				n.P50Ms, n.P99Ms, n.Admissions, 100*n.over(100))
			fmt.Fprintf(tw, "\tours / no-op at p99\t%.2f\n", r.Webhook.P99Ms/n.P99Ms)
		}
	}
	if k := r.Cost; k != nil {
		fmt.Fprintf(tw, "API cost (%d jobs x %d ranks, create -> Completed)\toperator writes per pod\t%.2f\n", k.Jobs, k.Ranks, k.OperatorWritesPerPod)
		for _, row := range k.Rows {
			if row.Source == "heartbeat" || row.PerJob < 0.05 {
				continue
			}
			fmt.Fprintf(tw, "\t%s per job\t%.1f (%s)\n", row.String(), row.PerJob, row.Source)
		}
		srcs := make([]string, 0, len(k.EventsPerJob))
		for s := range k.EventsPerJob {
			srcs = append(srcs, s)
		}
		sort.Strings(srcs)
		for _, s := range srcs {
			fmt.Fprintf(tw, "\tevents per job: %s\t%.1f\n", s, k.EventsPerJob[s])
		}
	}
	var idleAnon float64
	for _, m := range r.Memory {
		var rss, heap, anon []float64
		for _, x := range m.Readings {
			rss, heap = append(rss, float64(x.RSSBytes)/1e6), append(heap, float64(x.HeapBytes)/1e6)
			anon = append(anon, float64(x.RSSAnonBytes))
		}
		fmt.Fprintf(tw, "manager memory at %d worker pods (load %.1f)\tRSS / Go heap\t%s / %s\n", m.Pods, m.LoadAverage,
			spread(Summarize(rss), "MB", 1), spread(Summarize(heap), "MB", 1))
		if x := m.Readings[len(m.Readings)-1]; x.RSSAnonBytes > 0 {
			fmt.Fprintf(tw, "\tlast reading: RSS anon / file; Go heap in use / Go sys\t%.1f / %.1f MB; %.1f / %.1f MB\n",
				float64(x.RSSAnonBytes)/1e6, float64(x.RSSFileBytes)/1e6, float64(x.HeapInuseBytes)/1e6, float64(x.GoSysBytes)/1e6)
		}
		if a := Summarize(anon).Median; m.Pods == 0 {
			idleAnon = a
		} else if idleAnon > 0 && a > 0 {
			fmt.Fprintf(tw, "\tanonymous RSS per worker pod (median, against 0 pods)\t%.1f KB\n", (a-idleAnon)/float64(m.Pods)/1e3)
		}
	}
	if s := r.Steady; s != nil && len(s.Samples) > 0 {
		first, last := s.Samples[0], s.Samples[len(s.Samples)-1]
		var loads []float64
		for _, x := range s.Samples {
			loads = append(loads, x.LoadAverage)
		}
		l := Summarize(loads)
		fmt.Fprintf(tw, "steady run at %d worker pods (%.0f min, %d readings every %.0f s, load %.1f – %.1f)\tGo heap allocated: first -> last; slope\t%.1f -> %.1f MB; %+.1f KB/min\n",
			s.Pods, last.Seconds/60, len(s.Samples), s.IntervalSeconds, l.Min, l.Max,
			float64(first.HeapBytes)/1e6, float64(last.HeapBytes)/1e6, s.HeapAllocSlope/1e3)
		fmt.Fprintf(tw, "\tnext GC goal (2 x the live heap): first -> last; slope\t%.1f -> %.1f MB; %+.1f KB/min\n",
			float64(first.NextGCBytes)/1e6, float64(last.NextGCBytes)/1e6, s.NextGCSlope/1e3)
		fmt.Fprintf(tw, "\tRSS anon: first -> last; slope\t%.1f -> %.1f MB; %+.1f KB/min\n",
			float64(first.RSSAnonBytes)/1e6, float64(last.RSSAnonBytes)/1e6, s.RSSAnonSlope/1e3)
	}
	if p := r.Peer; p != nil {
		fmt.Fprintf(tw, "peer: Kubeflow training-operator %s, %d PyTorchJobs x %d (same QPS/burst)\tall pods created\t%.2f s\n", p.Version, c.Jobs, c.Ranks, p.PodsSeconds)
		fmt.Fprintf(tw, "\tall pods Running\t%.2f s\n", p.RunningSeconds)
		fmt.Fprintf(tw, "\tpods/s\t%.1f\n", p.PodsPerSecond)
		fmt.Fprintf(tw, "\tServices created\t%d\n", p.Services)
		fmt.Fprintf(tw, "\tpeer RSS (anon + file), all pods Running\t%.1f MB (%.1f + %.1f)\n",
			float64(p.Memory.RSSBytes)/1e6, float64(p.Memory.RSSAnonBytes)/1e6, float64(p.Memory.RSSFileBytes)/1e6)
		if len(r.Burst) > 0 && p.PodsPerSecond > 0 {
			var rate []float64
			for _, b := range r.Burst {
				rate = append(rate, b.PodsPerSecond)
			}
			fmt.Fprintf(tw, "\tml-operator pod rate / peer pod rate\t%.2f\n", Summarize(rate).Median/p.PodsPerSecond)
		}
	}
	for _, p := range r.Phases {
		if p.Admissions == 0 && p.ServerCalls == 0 {
			continue
		}
		fmt.Fprintf(tw, "webhooks during %s (%.0f s, load %.1f)\tapiserver p50 / p99: ours; no-op; handler p50 / p99\t%s / %s (%d calls); %s / %s (%d calls); %s / %s (%d calls); CPU s manager %.1f, apiserver %.1f\n",
			p.Name, p.Seconds, p.LoadAverage, msOrDash(p.APIServerP50Ms), msOrDash(p.APIServerP99Ms), p.Admissions,
			msOrDash(p.NoopP50Ms), msOrDash(p.NoopP99Ms), p.NoopAdmissions,
			msOrDash(p.ServerP50Ms), msOrDash(p.ServerP99Ms), p.ServerCalls, p.ManagerCPUSeconds, p.APIServerCPUSeconds)
		fmt.Fprintf(tw, "\t  TrainingJob work queue: wait p50 / p99; reconcile p50 / p99\t%s / %s; %s / %s (%d passes)\n",
			msOrDash(p.QueueWaitP50Ms), msOrDash(p.QueueWaitP99Ms), msOrDash(p.ReconcileP50Ms), msOrDash(p.ReconcileP99Ms), p.Reconciles)
		paths := make([]string, 0, len(p.ServerCallsByPath))
		for path := range p.ServerCallsByPath {
			paths = append(paths, path)
		}
		sort.Strings(paths)
		for _, path := range paths {
			fmt.Fprintf(tw, "\t  handler calls %s\t%d\n", path, p.ServerCallsByPath[path])
		}
	}
	for _, x := range r.GangBind {
		fmt.Fprintf(tw, "gang of %d ranks, native\tfirst pod -> all bound\t%s\n", x.Ranks, spread(Summarize(x.NativeSeconds), "s", 2))
		fmt.Fprintf(tw, "\tfirst bind -> last bind\t%s\n", spread(Summarize(x.NativeSpread), "s", 2))
		fmt.Fprintf(tw, "%d plain pods\tfirst pod -> all bound\t%s\n", x.Ranks, spread(Summarize(x.PlainSeconds), "s", 2))
		fmt.Fprintf(tw, "\tfirst bind -> last bind\t%s\n", spread(Summarize(x.PlainSpread), "s", 2))
	}
	if x := r.Rollout; x != nil {
		fmt.Fprintf(tw, "ModelDeployment traffic, service router (own cluster, load %.1f)\tweight 75/25 <-> 25/75 -> Ready pods behind the Service in the new split\t%s\n", x.LoadAverage, pcts(x.SplitServed))
		fmt.Fprintf(tw, "\tfailing analysis -> no Ready canary pod left\t%s\n", pcts(x.AbortToStable))
	}
	for _, x := range r.Restart {
		fmt.Fprintf(tw, "restart at %d ranks (%d pods x %d)\trank failed -> next attempt Running\t%s (includes the %s backoff)\n",
			x.Ranks, x.Pods, x.NProcPerNode, spread(Summarize(x.Seconds), "s", 2), firstRestartBackoff)
		if len(x.ExcludingBackoff) > 0 {
			fmt.Fprintf(tw, "\tthe same, backoff excluded\t%s\n", spread(Summarize(x.ExcludingBackoff), "s", 2))
		}
		fmt.Fprintf(tw, "\tnext attempt's first pod -> all Running\t%s\n", spread(Summarize(x.FirstPodToRunning), "s", 2))
		for i, st := range x.Steps {
			fmt.Fprintf(tw, "\trepeat %d, step by step\t%s\n", i, st)
		}
		if len(x.WritesBeyondPods) > 0 {
			fmt.Fprintf(tw, "\tmanager writes beyond the %d pods replaced\t%s\n", x.Pods, spread(Summarize(x.WritesBeyondPods), "", 0))
		}
		for i, w := range x.ManagerWrites {
			fmt.Fprintf(tw, "\trepeat %d, manager writes\t%v\n", i, w)
		}
	}
	tw.Flush()
}
