package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrape reads Prometheus text.
func parseMetrics(body []byte) (map[string]*dto.MetricFamily, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(bytes.NewReader(body))
}

// APIServerMetrics reads the apiserver's /metrics.
func (e *Env) APIServerMetrics(ctx context.Context) (map[string]*dto.MetricFamily, error) {
	body, err := e.Kube.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the apiserver's /metrics: %w", err)
	}
	return parseMetrics(body)
}

// ManagerMetrics reads the manager's /metrics.
func (e *Env) ManagerMetrics(ctx context.Context) (map[string]*dto.MetricFamily, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.MetricsURL, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("reading the manager's /metrics: %w", err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		return nil, err
	}
	return parseMetrics(buf.Bytes())
}

// Memory is one reading of the manager's memory.
type Memory struct {
	RSSBytes  int64 `json:"rssBytes"`
	HeapBytes int64 `json:"heapAllocBytes"`
	// RSSAnonBytes and RSSFileBytes split the RSS (RssAnon, RssFile in
	// /proc/<pid>/status): anonymous memory (the Go heap, stacks, runtime)
	// and the pages of the binary and other files that are mapped in.
	RSSAnonBytes int64 `json:"rssAnonBytes,omitempty"`
	RSSFileBytes int64 `json:"rssFileBytes,omitempty"`
	// HeapInuseBytes and GoSysBytes are go_memstats_heap_inuse_bytes and
	// go_memstats_sys_bytes (everything the Go runtime got from the OS).
	HeapInuseBytes int64 `json:"heapInuseBytes,omitempty"`
	GoSysBytes     int64 `json:"goSysBytes,omitempty"`
	// NextGCBytes is go_memstats_next_gc_bytes, the heap size at which the
	// next collection starts: the live heap the last collection left, times
	// 1 + GOGC/100. Unlike the allocated heap it does not saw up and down
	// between collections, so it shows whether the live heap grows.
	NextGCBytes int64 `json:"nextGCBytes,omitempty"`
}

// ManagerMemory reads VmRSS, RssAnon and RssFile from /proc and the Go
// runtime's memstats from the manager's /metrics.
func (e *Env) ManagerMemory(ctx context.Context) (Memory, error) {
	status, err := readStatus(e.ManagerPID)
	if err != nil {
		return Memory{}, err
	}
	if _, ok := status["VmRSS"]; !ok {
		return Memory{}, fmt.Errorf("no VmRSS in /proc/%d/status", e.ManagerPID)
	}
	mf, err := e.ManagerMetrics(ctx)
	if err != nil {
		return Memory{}, err
	}
	heap := mf["go_memstats_heap_alloc_bytes"]
	if heap == nil || len(heap.Metric) == 0 {
		return Memory{}, fmt.Errorf("the manager exports no go_memstats_heap_alloc_bytes")
	}
	return Memory{
		RSSBytes: status["VmRSS"], RSSAnonBytes: status["RssAnon"], RSSFileBytes: status["RssFile"],
		HeapBytes:      int64(heap.Metric[0].GetGauge().GetValue()),
		HeapInuseBytes: int64(gauge(mf, "go_memstats_heap_inuse_bytes")),
		GoSysBytes:     int64(gauge(mf, "go_memstats_sys_bytes")),
		NextGCBytes:    int64(gauge(mf, "go_memstats_next_gc_bytes")),
	}, nil
}

// HeapProfile saves the manager's heap profile (/debug/pprof/heap: the live
// heap as of the last collection; it forces none, so the readings after it
// are not disturbed) to path. It needs EnvOptions.Pprof.
func (e *Env) HeapProfile(ctx context.Context, path string) error {
	if e.PprofURL == "" {
		return fmt.Errorf("the manager serves no profiler (EnvOptions.Pprof)")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.PprofURL+"heap", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("reading the manager's heap profile: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("reading the manager's heap profile: %s", resp.Status)
	}
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

// readStatus reads the "<name>: <n> kB" lines of /proc/<pid>/status, in bytes.
func readStatus(pid int) (map[string]int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]int64{}
	s := bufio.NewScanner(f)
	for s.Scan() {
		k, v, ok := strings.Cut(s.Text(), ":")
		v = strings.TrimSpace(v)
		if !ok || !strings.HasSuffix(v, " kB") {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(v, " kB"), 10, 64)
		if err == nil {
			out[k] = kb * 1024
		}
	}
	return out, s.Err()
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// RequestKey names one kind of API request.
type RequestKey struct {
	Verb        string `json:"verb"`
	Group       string `json:"group,omitempty"`
	Resource    string `json:"resource"`
	Subresource string `json:"subresource,omitempty"`
}

func (k RequestKey) String() string {
	r := k.Resource
	if k.Subresource != "" {
		r += "/" + k.Subresource
	}
	if k.Group != "" {
		r += "." + k.Group
	}
	return k.Verb + " " + r
}

// requestCounts sums apiserver_request_total by verb, group, resource and
// subresource (over codes, scopes and versions).
func requestCounts(mf map[string]*dto.MetricFamily) map[RequestKey]float64 {
	out := map[RequestKey]float64{}
	fam := mf["apiserver_request_total"]
	if fam == nil {
		return out
	}
	for _, m := range fam.Metric {
		k := RequestKey{Verb: label(m, "verb"), Group: label(m, "group"), Resource: label(m, "resource"), Subresource: label(m, "subresource")}
		out[k] += m.GetCounter().GetValue()
	}
	return out
}

// histogram is a cumulative histogram summed over label sets.
type histogram struct {
	bounds []float64
	counts []float64 // cumulative, per bound
	total  float64
}

// sumHistogram adds up every series of a histogram family whose labels pass keep.
func sumHistogram(mf map[string]*dto.MetricFamily, name string, keep func(*dto.Metric) bool) histogram {
	var h histogram
	fam := mf[name]
	if fam == nil {
		return h
	}
	byBound := map[float64]float64{}
	for _, m := range fam.Metric {
		if keep != nil && !keep(m) {
			continue
		}
		hist := m.GetHistogram()
		h.total += float64(hist.GetSampleCount())
		for _, b := range hist.GetBucket() {
			byBound[b.GetUpperBound()] += float64(b.GetCumulativeCount())
		}
	}
	for b := range byBound {
		h.bounds = append(h.bounds, b)
	}
	sort.Float64s(h.bounds)
	for _, b := range h.bounds {
		h.counts = append(h.counts, byBound[b])
	}
	return h
}

// minus is h - before, bucket by bucket (the same series, read later).
func (h histogram) minus(before histogram) histogram {
	prev := map[float64]float64{}
	for i, b := range before.bounds {
		prev[b] = before.counts[i]
	}
	out := histogram{bounds: h.bounds, total: h.total - before.total}
	for i, b := range h.bounds {
		out.counts = append(out.counts, h.counts[i]-prev[b])
	}
	return out
}

// quantile interpolates linearly inside the bucket, as PromQL's
// histogram_quantile does. NaN when the histogram is empty.
func (h histogram) quantile(q float64) float64 {
	if h.total == 0 || len(h.bounds) == 0 {
		return math.NaN()
	}
	rank := q * h.total
	lower, below := 0.0, 0.0
	for i, b := range h.bounds {
		if h.counts[i] >= rank {
			if math.IsInf(b, 1) {
				return lower
			}
			inBucket := h.counts[i] - below
			if inBucket == 0 {
				return b
			}
			return lower + (b-lower)*(rank-below)/inBucket
		}
		lower, below = b, h.counts[i]
	}
	return lower
}

// clientRequests sums the manager's rest_client_requests_total by
// "<method> <code>": every request its client sent, whatever the resource.
func clientRequests(mf map[string]*dto.MetricFamily) map[string]float64 {
	out := map[string]float64{}
	if fam := mf["rest_client_requests_total"]; fam != nil {
		for _, m := range fam.Metric {
			out[label(m, "method")+" "+label(m, "code")] += m.GetCounter().GetValue()
		}
	}
	return out
}
