//go:build e2e_real

package e2ereal

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientretry "k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/controllers/trainingjob"
	"github.com/ml-operator/ml-operator/internal/localcluster"
)

var (
	benchSamples = flag.Int("bench-samples", 3, "BenchmarkRealNode: samples of each figure.")
	benchOut     = flag.String("bench-out", "", "BenchmarkRealNode: directory for <date>-realnode.json (empty: no file).")
)

// benchRanks is the TrainingJobs' gang size.
const benchRanks = 2

// realNodeFigures is what BenchmarkRealNode measured, raw, in seconds.
type realNodeFigures struct {
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	Commit   string    `json:"commit"`
	CPUs     int       `json:"cpus"`
	// WorkerImage is the image of the TrainingJobs' ranks; WarmupSeconds is
	// the first job's create -> all ranks Running, the image pull included.
	WorkerImage   string  `json:"workerImage"`
	WarmupSeconds float64 `json:"warmupCreateToAllRanksRunningSeconds"`
	// CreateToRunning: TrainingJob create -> every rank's pod Running, the
	// image present on the node.
	CreateToRunning []float64 `json:"createToAllRanksRunningSeconds"`
	// RestartTotal: rank 0's trainer killed (SIGKILL) -> every rank of
	// attempt 1 Running, the restart backoff included.
	RestartTotal []float64 `json:"killToNextAttemptRunningSeconds"`
	// RestartAfterBackoff: the backoff's end (status.lastRestartTime plus
	// the 10 s base; the field has second precision) -> attempt 1 Running.
	RestartAfterBackoff []float64 `json:"backoffEndToNextAttemptRunningSeconds"`
	// RestartFirstPod: attempt 1's first pod seen -> all of them Running
	// (what the kwok restart figure calls the part after the backoff).
	RestartFirstPod []float64 `json:"nextAttemptFirstPodToRunningSeconds"`
	// Drain: weights 50/50 -> 100/0 written -> the last request v2
	// answered; from the next request on, v1 answers every one.
	Drain []float64 `json:"weightDrainToLastAnswerSeconds"`
	// Restore: weights 100/0 -> 50/50 written -> the first request v2
	// answers.
	Restore []float64 `json:"weightRestoreToFirstAnswerSeconds"`
	// FailedRequests counts the client's failed requests in each weight
	// change's window (from the write to the change served).
	FailedRequests []int `json:"failedRequestsPerWeightChange"`
	// RequestIntervalMs is the client's time between requests.
	RequestIntervalMs int `json:"requestIntervalMs"`
	// LoadAverages are the 1-minute load average at each sample.
	LoadAverages []float64 `json:"loadAverages1m"`
	// Incomplete is set when a part failed before the end.
	Incomplete string `json:"incomplete,omitempty"`
}

// BenchmarkRealNode measures what only a real node shows, for
// docs/benchmarks.md beside the kwok figures: a two-rank TrainingJob's
// create -> all ranks Running with the image present, the gang restart after
// a rank is killed (with and without the backoff), and a ModelDeployment
// weight change -> the traffic a client of its Service is served, counted
// request by request. `make bench-real` runs it once (-benchtime 1x); it
// reports, it never fails on speed.
func BenchmarkRealNode(b *testing.B) {
	ctrllog.SetLogger(klog.NewKlogr())
	ctx := context.Background()
	var err error
	opClient, err = client.New(node.Config, client.Options{Scheme: localcluster.Scheme()})
	require.NoError(b, err)
	res := &realNodeFigures{Started: time.Now().UTC(), CPUs: runtime.NumCPU(), WorkerImage: ProbeImage}
	if out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output(); err == nil {
		res.Commit = strings.TrimSpace(string(out))
	}
	// Whatever was measured is printed and written, also when a later part
	// fails (then marked incomplete).
	defer func() {
		res.Finished = time.Now().UTC()
		if b.Failed() {
			res.Incomplete = "a part of the benchmark failed; see its log"
		}
		b.Logf("real node figures (median, min – max, n), load average %s:\n%s", spread(res.LoadAverages, 1, ""), res.table())
		if *benchOut == "" {
			return
		}
		data, err := json.MarshalIndent(res, "", "  ")
		if err == nil {
			path := filepath.Join(*benchOut, res.Started.Format("2006-01-02T1504Z")+"-realnode.json")
			err = os.WriteFile(path, append(data, '\n'), 0o644)
			b.Logf("raw samples: %s", path)
		}
		if err != nil {
			b.Errorf("writing the results: %v", err)
		}
	}()
	// The operator as TestOperator deploys it: with --prometheus-url.
	deployPrometheus(b)
	deployOperator(b)

	benchTrainingJobs(ctx, b, res)
	benchWeightChanges(ctx, b, res)

	b.ReportMetric(median(res.CreateToRunning), "s-create-to-running")
	b.ReportMetric(median(res.RestartAfterBackoff), "s-restart-after-backoff")
	b.ReportMetric(median(res.Drain), "s-weight-drain")
	b.ReportMetric(median(res.Restore), "s-weight-restore")
}

func (r *realNodeFigures) table() string {
	var s strings.Builder
	fmt.Fprintf(&s, "  2-rank TrainingJob, create -> all ranks Running (image present)   %s\n", spread(r.CreateToRunning, 2, " s"))
	fmt.Fprintf(&s, "    the first job, image pulled                                      %.2f s\n", r.WarmupSeconds)
	fmt.Fprintf(&s, "  rank 0 killed -> attempt 1 all Running (10 s backoff included)    %s\n", spread(r.RestartTotal, 2, " s"))
	fmt.Fprintf(&s, "    backoff end (lastRestartTime + 10 s) -> attempt 1 all Running    %s\n", spread(r.RestartAfterBackoff, 2, " s"))
	fmt.Fprintf(&s, "    attempt 1's first pod -> all Running                             %s\n", spread(r.RestartFirstPod, 2, " s"))
	fmt.Fprintf(&s, "  weight 50/50 -> 100/0 written -> v2 answers no more               %s\n", spread(r.Drain, 2, " s"))
	fmt.Fprintf(&s, "  weight 100/0 -> 50/50 written -> v2's first answer                %s\n", spread(r.Restore, 2, " s"))
	fmt.Fprintf(&s, "  failed requests per weight change (one every %d ms)                %v\n", r.RequestIntervalMs, r.FailedRequests)
	return s.String()
}

// benchTrainingJobs: a warm-up job pulls the image; then, per sample, a
// fresh two-rank job is timed from create to both ranks Running, its rank
// 0's process is killed, and the gang restart is timed.
func benchTrainingJobs(ctx context.Context, b *testing.B, res *realNodeFigures) {
	ns := namespace(b)
	for i := -1; i < *benchSamples; i++ {
		name := fmt.Sprintf("bench-%d", i+1)
		if i < 0 {
			name = "warmup"
		}
		job := &mlv1.TrainingJob{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: mlv1.TrainingJobSpec{
				Framework:     "pytorch",
				Image:         ProbeImage,
				Command:       []string{"/probe", "sleep", "1h"},
				NumWorkers:    benchRanks,
				GPUsPerWorker: ptr.To[int32](0),
				Checkpoint:    mlv1.CheckpointSpec{Enabled: ptr.To(false)},
			},
		}
		// Until cert-manager's CA reaches the webhook configuration, a
		// create fails on TLS: retry that, not a denial. The time starts
		// at the create that went through.
		var start time.Time
		var err error
		require.NoError(b, poll(2*time.Minute, func() bool {
			start = time.Now()
			err = opClient.Create(ctx, job)
			return err == nil || strings.Contains(err.Error(), "denied the request")
		}), "creating %s: %v", name, err)
		require.NoError(b, err)
		running, err := waitGang(ctx, ns, name, 0, 5*time.Minute)
		require.NoError(b, err, "%s\n%s", name, node.NamespaceDiagnostics(ctx, ns))
		if i < 0 {
			res.WarmupSeconds = running.Sub(start).Seconds()
			b.Logf("warm-up job: both ranks Running %.2f s after the create (image pulled)", res.WarmupSeconds)
		} else {
			res.CreateToRunning = append(res.CreateToRunning, running.Sub(start).Seconds())
			res.LoadAverages = append(res.LoadAverages, loadAverage1m())
			benchRestart(ctx, b, res, ns, name)
		}
		require.NoError(b, opClient.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationForeground)))
		require.NoError(b, poll(2*time.Minute, func() bool {
			pods := &corev1.PodList{}
			return node.Client.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{mlv1.LabelTrainingJob: name}) == nil && len(pods.Items) == 0
		}), "%s's pods gone", name)
	}
}

// benchRestart kills rank 0's trainer process (the node's containers are
// processes on this machine) and times the gang restart.
func benchRestart(ctx context.Context, b *testing.B, res *realNodeFigures, ns, name string) {
	pod := &corev1.Pod{}
	require.NoError(b, node.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: mlv1.WorkerPodName(name, 0)}, pod))
	pid, err := podPID(pod, "/probe")
	require.NoError(b, err)
	killed := time.Now()
	require.NoError(b, syscall.Kill(pid, syscall.SIGKILL))
	var firstSeen time.Time
	running, err := waitGangSeen(ctx, ns, name, 1, 3*time.Minute, &firstSeen)
	require.NoError(b, err, "%s's attempt 1\n%s", name, node.NamespaceDiagnostics(ctx, ns))
	job := &mlv1.TrainingJob{}
	require.NoError(b, opClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, job))
	require.NotNil(b, job.Status.LastRestartTime, "status %+v", job.Status)
	require.Equal(b, int32(1), job.Status.Restarts, "a killed rank is a failure, one restart: status %+v", job.Status)
	backoffEnd := job.Status.LastRestartTime.Add(trainingjob.DefaultBackoffBase)
	res.RestartTotal = append(res.RestartTotal, running.Sub(killed).Seconds())
	res.RestartAfterBackoff = append(res.RestartAfterBackoff, running.Sub(backoffEnd).Seconds())
	res.RestartFirstPod = append(res.RestartFirstPod, running.Sub(firstSeen).Seconds())
	b.Logf("%s: rank 0 killed -> attempt 1 Running in %.2f s; after the backoff %.2f s; first pod -> all Running %.2f s",
		name, running.Sub(killed).Seconds(), running.Sub(backoffEnd).Seconds(), running.Sub(firstSeen).Seconds())
}

// waitGang polls (every 100 ms) until every rank of the job's attempt is
// Running and returns when that was seen.
func waitGang(ctx context.Context, ns, name string, attempt int, timeout time.Duration) (time.Time, error) {
	var first time.Time
	return waitGangSeen(ctx, ns, name, attempt, timeout, &first)
}

// waitGangSeen is waitGang that also records when the attempt's first pod
// was seen.
func waitGangSeen(ctx context.Context, ns, name string, attempt int, timeout time.Duration, firstSeen *time.Time) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	for {
		pods := &corev1.PodList{}
		if err := node.Client.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{
			mlv1.LabelTrainingJob: name, mlv1.LabelRestartAttempt: strconv.Itoa(attempt),
		}); err == nil {
			now := time.Now()
			if len(pods.Items) > 0 && firstSeen.IsZero() {
				*firstSeen = now
			}
			running := 0
			for _, p := range pods.Items {
				if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
					running++
				}
			}
			if running == benchRanks {
				return now, nil
			}
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("attempt %d of %s not Running within %s", attempt, name, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// podPID is the host pid of the process in pod whose command line contains
// cmd (processEnv's search).
func podPID(pod *corev1.Pod, cmd string) (int, error) {
	uid, dashed := strings.ReplaceAll(string(pod.UID), "-", "_"), string(pod.UID)
	dirs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		return 0, err
	}
	for _, d := range dirs {
		cg, err := os.ReadFile(filepath.Join(d, "cgroup"))
		if err != nil || !(bytes.Contains(cg, []byte("pod"+dashed)) || bytes.Contains(cg, []byte("pod"+uid))) {
			continue
		}
		line, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err != nil || !bytes.Contains(line, []byte(cmd)) {
			continue
		}
		return strconv.Atoi(filepath.Base(d))
	}
	return 0, fmt.Errorf("no process %q of pod %s (uid %s) on this machine", cmd, pod.Name, pod.UID)
}

// answer is one line of `probe split`: when the request was sent and which
// version answered it ("!<code>" when none did).
type answer struct {
	at      time.Time
	version string
}

func splitAnswers(ctx context.Context, ns, pod string) ([]answer, error) {
	log, err := node.PodLog(ctx, ns, pod)
	if err != nil {
		return nil, err
	}
	var out []answer
	for _, line := range strings.Split(log, "\n") {
		ms, v, ok := strings.Cut(strings.TrimSpace(line), " ")
		n, err := strconv.ParseInt(ms, 10, 64)
		if ok && err == nil {
			out = append(out, answer{time.UnixMilli(n), v})
		}
	}
	return out, nil
}

// benchWeightChanges: a ModelDeployment of the project's model server, two
// versions at 50/50, one replica each (router service: the split is the
// replica split behind the stable Service). A client pod sends a request
// every 50 ms through the Service, each on a new connection. Per sample,
// v2's weight goes to 0 and back to 50, and each change is timed from the
// write to the traffic that shows it.
func benchWeightChanges(ctx context.Context, b *testing.B, res *realNodeFigures) {
	pushModelServers(b)
	ns := namespace(b)
	store := modelStore(b, ns, map[string]string{"model.json": `{"weights":[2],"bias":1}`})
	md := &mlv1.ModelDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: "split", Namespace: ns},
		Spec: mlv1.ModelDeploymentSpec{
			ModelName: "split",
			Framework: mlv1.ModelFrameworkSKLearn,
			Image:     modelServerV1,
			Versions: []mlv1.ModelVersion{
				{Name: "v1", Weight: ptr.To[int32](50), ModelPath: store + "/model.json"},
				{Name: "v2", Weight: ptr.To[int32](50), ModelPath: store + "/model.json", Image: modelServerV2},
			},
			Scaling:     mlv1.ScalingSpec{MinReplicas: 2, MaxReplicas: ptr.To[int32](2)},
			HealthCheck: mlv1.HealthCheckSpec{IntervalSeconds: 3, TimeoutSeconds: 2, FailureThreshold: 2},
			Rollout:     mlv1.RolloutSpec{ProgressDeadlineSeconds: 300},
		},
	}
	require.NoError(b, opClient.Create(ctx, md))
	got := waitRunning(b, md, 5*time.Minute, map[string]int32{"v1": 1, "v2": 1})
	url := got.Status.URL + "/v1/models/split:predict"
	const every = 50 * time.Millisecond
	res.RequestIntervalMs = int(every.Milliseconds())
	clientPod := restricted(probePod(ns, "split-client", nil, "split", url, every.String()))
	runningPod(b, clientPod)
	// Both versions answer before the first change.
	require.NoError(b, poll(time.Minute, func() bool {
		ans, err := splitAnswers(ctx, ns, clientPod.Name)
		seen := map[string]bool{}
		for _, a := range ans {
			seen[a.version] = true
		}
		return err == nil && seen["v1"] && seen["v2"]
	}), "v1 and v2 never both answered the client")

	setWeights := func(v1, v2 int32) time.Time {
		var at time.Time
		require.NoError(b, clientretry.RetryOnConflict(onConflict, func() error {
			cur := &mlv1.ModelDeployment{}
			if err := opClient.Get(ctx, client.ObjectKeyFromObject(md), cur); err != nil {
				return err
			}
			cur.Spec.Versions[0].Weight, cur.Spec.Versions[1].Weight = ptr.To(v1), ptr.To(v2)
			at = time.Now()
			return opClient.Update(ctx, cur)
		}))
		return at
	}
	failedBetween := func(ans []answer, from, to time.Time) int {
		n := 0
		for _, a := range ans {
			if strings.HasPrefix(a.version, "!") && !a.at.Before(from) && !a.at.After(to) {
				n++
			}
		}
		return n
	}
	// quiet is how long v1 must answer alone before v2 counts as drained.
	const quiet = 10 * time.Second
	for i := range *benchSamples {
		// Drain: v2 to 0. Served when v2 answers no request for quiet.
		t0 := setWeights(100, 0)
		var drained time.Time
		var ans []answer
		require.NoError(b, poll(3*time.Minute, func() bool {
			var err error
			if ans, err = splitAnswers(ctx, ns, clientPod.Name); err != nil || len(ans) == 0 {
				return false
			}
			last := t0
			for _, a := range ans {
				if a.at.After(t0) && a.version == "v2" {
					last = a.at
				}
			}
			drained = time.Time{}
			for _, a := range ans {
				if a.at.After(last) && a.version == "v1" {
					drained = a.at
					break
				}
			}
			return !drained.IsZero() && ans[len(ans)-1].at.Sub(drained) >= quiet
		}), "drain %d: v2 kept answering\n%s", i, node.NamespaceDiagnostics(ctx, ns))
		res.Drain = append(res.Drain, drained.Sub(t0).Seconds())
		res.FailedRequests = append(res.FailedRequests, failedBetween(ans, t0, drained))
		b.Logf("drain %d: 50/50 -> 100/0, v1 alone from %.2f s after the write", i, drained.Sub(t0).Seconds())

		// Restore: v2 back to 50. Served at v2's first answer.
		t0 = setWeights(50, 50)
		var back time.Time
		require.NoError(b, poll(5*time.Minute, func() bool {
			var err error
			if ans, err = splitAnswers(ctx, ns, clientPod.Name); err != nil {
				return false
			}
			for _, a := range ans {
				if a.at.After(t0) && a.version == "v2" {
					back = a.at
					return true
				}
			}
			return false
		}), "restore %d: v2 never answered\n%s", i, node.NamespaceDiagnostics(ctx, ns))
		res.Restore = append(res.Restore, back.Sub(t0).Seconds())
		res.FailedRequests = append(res.FailedRequests, failedBetween(ans, t0, back))
		res.LoadAverages = append(res.LoadAverages, loadAverage1m())
		b.Logf("restore %d: 100/0 -> 50/50, v2's first answer %.2f s after the write", i, back.Sub(t0).Seconds())
		// The next drain starts from v2 Ready and in the split.
		waitRunning(b, md, 5*time.Minute, map[string]int32{"v2": 1})
	}
}

func loadAverage1m() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	sort.Float64s(s)
	if len(s)%2 == 0 {
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return s[len(s)/2]
}

// spread is "<median> <unit> (<min> – <max>, n=<count>)".
func spread(xs []float64, digits int, unit string) string {
	if len(xs) == 0 {
		return "-"
	}
	f := fmt.Sprintf("%%.%df", digits)
	return fmt.Sprintf(f+"%s ("+f+" – "+f+", n=%d)", median(xs), unit, slices.Min(xs), slices.Max(xs), len(xs))
}
