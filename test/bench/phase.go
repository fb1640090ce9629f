package bench

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// Phase is what the control plane did while one scenario ran. It exists to
// explain the admission webhook's latency: the apiserver's view of each
// call (network, TLS and queueing included) next to the manager's own
// handling time, and how much CPU the manager and the apiserver used while
// the machine's load was what it was.
type Phase struct {
	Name    string  `json:"name"`
	Seconds float64 `json:"seconds"`
	// Admissions, APIServerP50Ms and APIServerP99Ms are from the apiserver's
	// apiserver_admission_webhook_admission_duration_seconds (buckets 5 ms,
	// 25 ms, 100 ms, 500 ms, 1 s, 2.5 s, 10 s, 25 s).
	// They count our webhooks' calls only.
	Admissions     int     `json:"admissions"`
	APIServerP50Ms float64 `json:"apiserverP50Ms"`
	APIServerP99Ms float64 `json:"apiserverP99Ms"`
	// NoopAdmissions, NoopP50Ms and NoopP99Ms are the same histogram's for
	// the no-op twins of our webhooks (noop.go): admission's floor, for the
	// same requests under the same load.
	NoopAdmissions int     `json:"noopAdmissions"`
	NoopP50Ms      float64 `json:"noopP50Ms"`
	NoopP99Ms      float64 `json:"noopP99Ms"`
	// ServerCalls, ServerP50Ms and ServerP99Ms are from the manager's
	// controller_runtime_webhook_latency_seconds: the time its webhook
	// handlers took, conversion included (buckets are decades: 1 ms,
	// 10 ms, 100 ms, 1 s).
	ServerCalls int `json:"serverCalls"`
	// ServerCallsByPath splits ServerCalls by webhook path (/convert is
	// the conversion webhook, which the apiserver's histogram leaves out).
	ServerCallsByPath map[string]int `json:"serverCallsByPath,omitempty"`
	ServerP50Ms       float64        `json:"serverP50Ms"`
	ServerP99Ms       float64        `json:"serverP99Ms"`
	// QueueWait* are how long TrainingJobs waited in the controller's work
	// queue (workqueue_queue_duration_seconds) and Reconcile* how long its
	// passes took (controller_runtime_reconcile_time_seconds).
	QueueWaitP50Ms float64 `json:"queueWaitP50Ms"`
	QueueWaitP99Ms float64 `json:"queueWaitP99Ms"`
	Reconciles     int     `json:"reconciles"`
	ReconcileP50Ms float64 `json:"reconcileP50Ms"`
	ReconcileP99Ms float64 `json:"reconcileP99Ms"`
	// ManagerCPUSeconds and APIServerCPUSeconds are process_cpu_seconds_total.
	ManagerCPUSeconds   float64 `json:"managerCPUSeconds"`
	APIServerCPUSeconds float64 `json:"apiserverCPUSeconds"`
	// LoadAverage is the machine's 1-minute load average at the end.
	LoadAverage float64 `json:"loadAverage1m"`
}

// phaseSnapshot is the counters a Phase is the difference of.
type phaseSnapshot struct {
	at                       time.Time
	admission, noop, server  histogram
	serverByPath             map[string]float64
	queueWait, reconcile     histogram
	managerCPU, apiserverCPU float64
}

func (e *Env) snapshot(ctx context.Context) (phaseSnapshot, error) {
	api, err := e.APIServerMetrics(ctx)
	if err != nil {
		return phaseSnapshot{}, err
	}
	mgr, err := e.ManagerMetrics(ctx)
	if err != nil {
		return phaseSnapshot{}, err
	}
	return phaseSnapshot{
		at:           time.Now(),
		admission:    sumHistogram(api, admissionHistogram, ours),
		noop:         sumHistogram(api, admissionHistogram, noops),
		server:       sumHistogram(mgr, "controller_runtime_webhook_latency_seconds", nil),
		serverByPath: countsBy(mgr, "controller_runtime_webhook_latency_seconds", "webhook"),
		queueWait:    sumHistogram(mgr, "workqueue_queue_duration_seconds", trainingJobQueue),
		reconcile:    sumHistogram(mgr, "controller_runtime_reconcile_time_seconds", trainingJobQueue),
		managerCPU:   gauge(mgr, "process_cpu_seconds_total"),
		apiserverCPU: gauge(api, "process_cpu_seconds_total"),
	}, nil
}

// phase is what happened between two snapshots.
func phase(name string, before, after phaseSnapshot) Phase {
	adm := after.admission.minus(before.admission)
	noop := after.noop.minus(before.noop)
	srv := after.server.minus(before.server)
	byPath := map[string]int{}
	for path, n := range after.serverByPath {
		if d := int(n - before.serverByPath[path]); d > 0 {
			byPath[path] = d
		}
	}
	wait := after.queueWait.minus(before.queueWait)
	rec := after.reconcile.minus(before.reconcile)
	return Phase{
		QueueWaitP50Ms:      wait.quantile(0.5) * 1000,
		QueueWaitP99Ms:      wait.quantile(0.99) * 1000,
		Reconciles:          int(rec.total),
		ReconcileP50Ms:      rec.quantile(0.5) * 1000,
		ReconcileP99Ms:      rec.quantile(0.99) * 1000,
		Name:                name,
		ServerCallsByPath:   byPath,
		Seconds:             after.at.Sub(before.at).Seconds(),
		Admissions:          int(adm.total),
		APIServerP50Ms:      adm.quantile(0.5) * 1000,
		APIServerP99Ms:      adm.quantile(0.99) * 1000,
		NoopAdmissions:      int(noop.total),
		NoopP50Ms:           noop.quantile(0.5) * 1000,
		NoopP99Ms:           noop.quantile(0.99) * 1000,
		ServerCalls:         int(srv.total),
		ServerP50Ms:         srv.quantile(0.5) * 1000,
		ServerP99Ms:         srv.quantile(0.99) * 1000,
		ManagerCPUSeconds:   after.managerCPU - before.managerCPU,
		APIServerCPUSeconds: after.apiserverCPU - before.apiserverCPU,
		LoadAverage:         loadAverage(),
	}
}

// MarshalJSON writes an empty quantile (NaN) as null.
func (p Phase) MarshalJSON() ([]byte, error) {
	type plain Phase
	out := map[string]any{}
	raw, err := json.Marshal(plain{Name: p.Name, Seconds: p.Seconds, Admissions: p.Admissions, NoopAdmissions: p.NoopAdmissions, ServerCalls: p.ServerCalls, ServerCallsByPath: p.ServerCallsByPath, Reconciles: p.Reconciles,
		ManagerCPUSeconds: p.ManagerCPUSeconds, APIServerCPUSeconds: p.APIServerCPUSeconds, LoadAverage: p.LoadAverage})
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, err
	}
	for k, v := range map[string]float64{"apiserverP50Ms": p.APIServerP50Ms, "apiserverP99Ms": p.APIServerP99Ms, "noopP50Ms": p.NoopP50Ms, "noopP99Ms": p.NoopP99Ms,
		"serverP50Ms": p.ServerP50Ms, "serverP99Ms": p.ServerP99Ms, "queueWaitP50Ms": p.QueueWaitP50Ms, "queueWaitP99Ms": p.QueueWaitP99Ms,
		"reconcileP50Ms": p.ReconcileP50Ms, "reconcileP99Ms": p.ReconcileP99Ms} {
		if math.IsNaN(v) {
			out[k] = nil
		} else {
			out[k] = v
		}
	}
	return json.Marshal(out)
}

// gauge is the sum of a counter or gauge family's values (0 when absent).
func gauge(mf map[string]*dto.MetricFamily, name string) float64 {
	fam := mf[name]
	if fam == nil {
		return 0
	}
	var sum float64
	for _, m := range fam.Metric {
		switch {
		case m.Counter != nil:
			sum += m.GetCounter().GetValue()
		case m.Gauge != nil:
			sum += m.GetGauge().GetValue()
		case m.Untyped != nil:
			sum += m.GetUntyped().GetValue()
		}
	}
	return sum
}

// loadAverage is the 1-minute load average from /proc/loadavg (0 if unreadable).
func loadAverage() float64 {
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

// countsBy is a histogram family's sample count per value of one label.
func countsBy(mf map[string]*dto.MetricFamily, name, labelName string) map[string]float64 {
	out := map[string]float64{}
	if fam := mf[name]; fam != nil {
		for _, m := range fam.Metric {
			out[label(m, labelName)] += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return out
}

// admissionHistogram is the API server's time per admission webhook call,
// labelled by webhook name (buckets 5 ms, 25 ms, 100 ms, 500 ms, 1 s, 2.5 s,
// 10 s, 25 s).
const admissionHistogram = "apiserver_admission_webhook_admission_duration_seconds"

// ours and noops keep the series of our webhooks and of their no-op twins.
func ours(m *dto.Metric) bool  { return !isNoop(label(m, "name")) }
func noops(m *dto.Metric) bool { return isNoop(label(m, "name")) }

// trainingJobQueue keeps the series of the TrainingJob controller (label
// "name" on workqueue metrics, "controller" on reconcile metrics).
func trainingJobQueue(m *dto.Metric) bool {
	return label(m, "name") == "trainingjob" || label(m, "controller") == "trainingjob"
}
