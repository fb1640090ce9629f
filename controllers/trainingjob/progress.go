package trainingjob

import (
	"context"
	"fmt"
	"math"
	"net"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/internal/integrations/progress"
)

// scrapeProgress reads rank 0's progress when it is due.
func (r *Reconciler) scrapeProgress(ctx context.Context, p *pass, current []*corev1.Pod) {
	job := p.job
	var rank0 *corev1.Pod
	for _, pod := range current {
		if rankOf(pod) == 0 {
			rank0 = pod
		}
	}
	if rank0 == nil || rank0.Status.PodIP == "" || rank0.Status.Phase != corev1.PodRunning {
		return
	}
	key := client.ObjectKeyFromObject(job)
	r.scrapes.retarget(key, rank0.UID)
	if ok, next := r.scrapes.due(key, p.now); !ok {
		p.requeue(next)
		// A scrape whose status write was lost is applied again.
		if res := r.scrapes.unwritten(key); res != nil && res.attempt == job.Status.Attempt() {
			r.applyScrape(ctx, p, key, *res)
		}
		return
	}
	url := fmt.Sprintf("http://%s%s", net.JoinHostPort(rank0.Status.PodIP, strconv.Itoa(int(job.Spec.EffectiveMetricsPort()))), job.Spec.EffectiveMetricsPath())
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	report, err := r.cfg.Scraper.Scrape(sctx, url)
	res := scrapeResult{report: report, err: err, url: url, at: p.now, attempt: job.Status.Attempt()}
	if r.cfg.DCGM != nil {
		// Optional: no exporter, or Prometheus down, leaves rank 0's gauge.
		if v, ok, derr := r.cfg.DCGM.JobGPUUtilization(sctx, job.Namespace, job.Name); derr == nil && ok {
			res.dcgm = &v
		} else if derr != nil {
			log.FromContext(ctx).V(1).Info("reading GPU utilization from DCGM", "error", derr.Error())
		}
	}
	p.requeue(r.scrapes.record(key, p.now, err == nil, r.cfg.ScrapeInterval, r.cfg.ScrapeBackoffMax))
	if err == nil {
		if w, ok := r.scrapes.watchProgress(key, res.attempt, report, p.now); ok && Stalled(w, res.attempt, job.Spec.EffectiveStallTimeout()) {
			// The pass that decides on it comes at once.
			p.requeue(p.now)
		}
	}
	r.scrapes.pend(key, res)
	r.applyScrape(ctx, p, key, res)
}

// applyScrape puts a scrape's outcome into the job's status.
func (r *Reconciler) applyScrape(ctx context.Context, p *pass, key types.NamespacedName, res scrapeResult) {
	job := p.job
	setCondition(&job.Status, progressCondition(job, res.err, res.url), metav1.NewTime(res.at))
	report := res.report
	if v := res.dcgm; v != nil && !math.IsNaN(*v) && !math.IsInf(*v, 0) {
		// DCGM measures every GPU of the job; rank 0's gauge only its own.
		progress.SetGPUUtilization(&job.Status, v, mlv1.GPUUtilizationSourceDCGM)
		report.GPUUtilization = nil
	}
	if res.err != nil {
		return
	}
	markProgressing(job, r.scrapes.stallWatch(key), res.at)
	var base progress.RateBaseline
	if e := res.report.Epoch; e != nil && !math.IsNaN(*e) {
		base = r.scrapes.baseline(key, res.attempt, progress.ClampEpoch(*e, job.Status.TotalEpochs), res.at)
	}
	if progress.ApplyWithBaseline(job, report, res.at, base) {
		r.logMLflowMetrics(ctx, p)
	}
}
