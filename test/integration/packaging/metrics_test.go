package packaging

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/internal/manager"
	"github.com/ml-operator/ml-operator/test/testutil"
)

// externalMetrics are read by the alerts but exported by someone else; the
// test cannot scrape them from the manager.
var externalMetrics = map[string]string{
	"certmanager_certificate_expiration_timestamp_seconds": "cert-manager's controller",
	"apiserver_admission_webhook_rejection_count":          "the Kubernetes API server",
	"up": "Prometheus itself, for every scrape target",
}

// targetLabels are added by Prometheus to every scraped series, so queries may
// match on them although /metrics does not show them.
var targetLabels = map[string]bool{"job": true, "instance": true}

// TestDashboardAndAlertMetricsAreExported starts the real manager against
// envtest, drives TrainingJobs and a ModelDeployment until the series the
// monitoring reads exist, scrapes /metrics and checks every metric name and
// label in the Grafana dashboard and the PrometheusRule against it.
func TestDashboardAndAlertMetricsAreExported(t *testing.T) {
	queries := append(dashboardQueries(t), alertQueries(t)...)
	wanted := map[string]bool{}
	for _, q := range queries {
		for _, s := range metricSelectors(q.Expr) {
			if _, external := externalMetrics[s.Metric]; !external {
				wanted[familyName(s.Metric)] = true
			}
		}
	}

	// The webhooks run in this process (testutil serves them for the API
	// server), so their controller_runtime_webhook_* series are on the
	// manager's /metrics as they are in the manager's pod.
	env, err := testutil.StartEnv(testutil.EnvOptions{Webhooks: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	metricsURL := startManager(t, env)
	trainer := startFakeTrainer(t)

	ctx := context.Background()
	c := env.Client
	ns := testutil.Namespace(t, c)
	driveTrainingJobs(t, ctx, c, ns, trainer)
	// A namespace with only a ModelDeployment, which the dashboard's
	// namespace variable must offer too.
	mdNS := testutil.Namespace(t, c)
	driveModelDeployment(t, ctx, c, mdNS)

	// The series appear as the controllers record them; poll the endpoint.
	var families map[string]*dto.MetricFamily
	deadline := time.Now().Add(30 * time.Second)
	for {
		families, err = scrape(metricsURL)
		if err == nil && len(missing(wanted, families)) == 0 {
			break
		}
		if time.Now().After(deadline) {
			if err != nil {
				t.Fatalf("scraping %s: %v", metricsURL, err)
			}
			t.Fatalf("the manager's /metrics never exported %v, which the dashboard or alerts read", missing(wanted, families))
		}
		time.Sleep(250 * time.Millisecond)
	}

	checkJobNamespaceLabel(t, families)
	// The manager runs with --gc-percent's target (unless GOGC overrides
	// it), as its Go runtime metrics show (docs/benchmarks.md).
	wantGC, _ := manager.EffectiveGCPercent(manager.DefaultGCPercent, os.LookupEnv)
	if gogc := families["go_gc_gogc_percent"]; assert.NotNil(t, gogc, "go_gc_gogc_percent") && assert.Len(t, gogc.GetMetric(), 1) {
		assert.Equal(t, float64(wantGC), gogc.GetMetric()[0].GetGauge().GetValue(), "go_gc_gogc_percent")
	}
	// The dashboard's namespace variable, computed from this scrape as
	// Grafana's label_values would, offers both namespaces.
	varMetrics, varLabel := namespaceVariable(t, loadDashboard(t))
	offered := map[string]bool{}
	for _, m := range varMetrics {
		for _, metric := range families[m].GetMetric() {
			for _, l := range metric.GetLabel() {
				if l.GetName() == varLabel {
					offered[l.GetValue()] = true
				}
			}
		}
	}
	for _, want := range []string{ns, mdNS} {
		if !offered[want] {
			t.Errorf("the dashboard's namespace variable would offer %v, not %s", sortedKeys(offered), want)
		}
	}

	for _, q := range queries {
		for _, s := range metricSelectors(q.Expr) {
			if _, external := externalMetrics[s.Metric]; external {
				continue
			}
			fam := families[familyName(s.Metric)]
			if fam == nil {
				t.Errorf("%s: metric %s is not exported", q.Where, s.Metric)
				continue
			}
			if s.Metric != fam.GetName() && !isHistogramSeries(s.Metric, fam) {
				t.Errorf("%s: %s is not a series of %s %s", q.Where, s.Metric, fam.GetType(), fam.GetName())
			}
			have := labelNames(fam)
			if strings.HasSuffix(s.Metric, "_bucket") {
				have["le"] = true
			}
			for _, l := range s.Labels {
				if !have[l] && !targetLabels[l] {
					t.Errorf("%s: %s has no label %q (it has %v)", q.Where, s.Metric, l, sortedKeys(have))
				}
			}
		}
	}
}

// checkJobNamespaceLabel: every series of the manager's own metrics that
// names a namespace carries it in job_namespace too, with the same value;
// that is the label Prometheus' namespace enforcement leaves alone.
func checkJobNamespaceLabel(t *testing.T, families map[string]*dto.MetricFamily) {
	t.Helper()
	seen := 0
	for name, fam := range families {
		if !strings.HasPrefix(name, "trainingjob_") && !strings.HasPrefix(name, "modeldeployment_") {
			continue
		}
		for _, m := range fam.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			ns, hasNS := labels["namespace"]
			if !hasNS {
				continue
			}
			seen++
			if got, ok := labels[mlv1.MetricLabelJobNamespace]; !ok || got != ns {
				t.Errorf("%s%v: job_namespace %q, want the namespace %q", name, labels, got, ns)
			}
		}
	}
	if seen == 0 {
		t.Error("no trainingjob_* or modeldeployment_* series with a namespace label was scraped")
	}
}

// familyName maps a series name to its metric family: a histogram's
// _bucket, _sum and _count series belong to the histogram.
func familyName(series string) string {
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(series, suffix); ok && !strings.HasSuffix(series, "_total") {
			return base
		}
	}
	return series
}

// isHistogramSeries is true when series is name_bucket/_sum/_count of a histogram family.
func isHistogramSeries(series string, fam *dto.MetricFamily) bool {
	if fam.GetType() != dto.MetricType_HISTOGRAM && fam.GetType() != dto.MetricType_SUMMARY {
		return false
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if series == fam.GetName()+suffix {
			return suffix != "_bucket" || fam.GetType() == dto.MetricType_HISTOGRAM
		}
	}
	return false
}

func labelNames(fam *dto.MetricFamily) map[string]bool {
	out := map[string]bool{}
	for _, m := range fam.GetMetric() {
		for _, l := range m.GetLabel() {
			out[l.GetName()] = true
		}
	}
	return out
}

// missing lists the wanted metric families the scrape lacks. A family name
// that is not exported under its own name may still be a histogram's.
func missing(wanted map[string]bool, families map[string]*dto.MetricFamily) []string {
	var out []string
	for _, name := range sortedKeys(wanted) {
		if families[name] == nil {
			out = append(out, name)
		}
	}
	return out
}

func scrape(url string) (map[string]*dto.MetricFamily, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(resp.Body)
}

// startManager runs the real manager (internal/manager) with plain-HTTP metrics
// and no webhooks, and returns its /metrics URL.
func startManager(t *testing.T, env *testutil.Env) string {
	t.Helper()
	opts := manager.NewOptions()
	opts.MetricsAddr = testutil.FreeAddr(t)
	opts.MetricsSecure = false
	opts.ProbeAddr = "0"
	opts.LeaderElect = false
	opts.EnableWebhooks = false
	opts.MaxConcurrentReconciles = 2
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- manager.Run(ctx, env.Config, opts) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("manager exited: %v", err)
		}
	})
	url := "http://" + opts.MetricsAddr + "/metrics"
	testutil.Eventually(t, func() bool {
		_, err := scrape(url)
		return err == nil
	}, "the manager's metrics endpoint %s never answered", url)
	return url
}

// startFakeTrainer serves rank 0's progress contract on loopback and returns
// its port.
func startFakeTrainer(t *testing.T) int32 {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "training_epoch 3\ntraining_total_epochs 10\ntraining_loss 0.42\ntraining_accuracy 0.87\n")
	}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return int32(l.Addr().(*net.TCPAddr).Port)
}

// workerPod waits for a TrainingJob's rank-0 pod and returns its name.
func workerPod(t *testing.T, ctx context.Context, c client.Client, ns, job string) string {
	t.Helper()
	name := job + "-worker-0"
	testutil.Eventually(t, func() bool {
		return c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &corev1.Pod{}) == nil
	}, "pod %s was never created", name)
	return name
}

// driveTrainingJobs runs three jobs: one that reports progress and completes,
// one whose worker fails once (a gang restart) and one that fails for good.
func driveTrainingJobs(t *testing.T, ctx context.Context, c client.Client, ns string, trainerPort int32) {
	t.Helper()
	progress := testutil.TrainingJob("progress", ns).Workers(1).GPUs(0).Hyperparameter("epochs", 10).Obj()
	progress.Spec.Metrics.Port = trainerPort
	restart := testutil.TrainingJob("restart", ns).Workers(1).GPUs(0).BackoffLimit(3).Obj()
	fail := testutil.TrainingJob("fail", ns).Workers(1).GPUs(0).BackoffLimit(0).Obj()
	for _, job := range []*mlv1.TrainingJob{progress, restart, fail} {
		if err := c.Create(ctx, job); err != nil {
			t.Fatalf("creating TrainingJob %s: %v", job.Name, err)
		}
	}
	running := func(job string) string {
		pod := workerPod(t, ctx, c, ns, job)
		if err := testutil.SetPodPhase(ctx, c, ns, pod, corev1.PodRunning, testutil.WithPodIP("127.0.0.1")); err != nil {
			t.Fatal(err)
		}
		return pod
	}
	exited := func(pod string, phase corev1.PodPhase, code int32) {
		if err := testutil.SetPodPhase(ctx, c, ns, pod, phase, testutil.WithPodIP("127.0.0.1"),
			testutil.WithExitCode("trainer", code, "Error")); err != nil {
			t.Fatal(err)
		}
	}
	waitState := func(job string, states ...mlv1.TrainingJobState) {
		testutil.Eventually(t, func() bool {
			tj := &mlv1.TrainingJob{}
			if c.Get(ctx, client.ObjectKey{Namespace: ns, Name: job}, tj) != nil {
				return false
			}
			for _, s := range states {
				if tj.Status.State == s {
					return true
				}
			}
			return false
		}, "TrainingJob %s never reached %v", job, states)
	}

	pod := running("progress")
	// Longer than testutil's 10 s: a scrape that lost a race with a status
	// write is retried after the 15 s scrape interval.
	deadline := time.Now().Add(40 * time.Second)
	for {
		tj := &mlv1.TrainingJob{}
		if c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "progress"}, tj) == nil && tj.Status.CurrentEpoch == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the operator never read rank 0's progress: %v", lazyStatus{c, ns, "progress"})
		}
		time.Sleep(250 * time.Millisecond)
	}
	exited(pod, corev1.PodSucceeded, 0)
	waitState("progress", mlv1.StateCompleted)

	exited(running("restart"), corev1.PodFailed, 1)
	waitState("restart", mlv1.StateRestarting, mlv1.StateInitializing)

	exited(running("fail"), corev1.PodFailed, 1)
	waitState("fail", mlv1.StateFailed)
}

// driveModelDeployment creates a ModelDeployment whose second version never
// becomes ready within its progress deadline, so it is rolled back to the first.
func driveModelDeployment(t *testing.T, ctx context.Context, c client.Client, ns string) {
	t.Helper()
	md := testutil.ModelDeployment("rb", ns).Router(mlv1.RouterService).ProgressDeadline(1).
		Version("v1", 90, "s3://models/v1").Version("v2", 10, "s3://models/v2").Obj()
	if err := c.Create(ctx, md); err != nil {
		t.Fatalf("creating ModelDeployment: %v", err)
	}
	testutil.Eventually(t, func() bool {
		return c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "rb-v1"}, &appsv1.Deployment{}) == nil
	}, "Deployment rb-v1 was never created")
	setDeploymentReady(t, ctx, c, ns, "rb-v1")
	testutil.Eventually(t, func() bool {
		got := &mlv1.ModelDeployment{}
		return c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "rb"}, got) == nil && len(got.Status.FailedVersions) > 0
	}, "ModelDeployment rb never rolled back v2")
}

// setDeploymentReady writes a Deployment's status as the deployment
// controller would with all its replicas Ready (envtest runs no controllers).
func setDeploymentReady(t *testing.T, ctx context.Context, c client.Client, ns, name string) {
	t.Helper()
	testutil.Eventually(t, func() bool {
		d := &appsv1.Deployment{}
		if c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, d) != nil {
			return false
		}
		replicas := int32(1)
		if d.Spec.Replicas != nil {
			replicas = *d.Spec.Replicas
		}
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: replicas,
			UpdatedReplicas: replicas, ReadyReplicas: replicas, AvailableReplicas: replicas}
		return c.Status().Update(ctx, d) == nil
	}, "could not mark Deployment %s ready", name)
}

// lazyStatus prints a TrainingJob's status when a failure message is formatted.
type lazyStatus struct {
	c        client.Client
	ns, name string
}

func (l lazyStatus) String() string {
	tj := &mlv1.TrainingJob{}
	if err := l.c.Get(context.Background(), client.ObjectKey{Namespace: l.ns, Name: l.name}, tj); err != nil {
		return err.Error()
	}
	return fmt.Sprintf("%+v", tj.Status)
}
