package prometheus_test

import (
	"context"
	"slices"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/util/annotations"
)

// memStorage holds float samples in memory for Prometheus' own PromQL
// engine to query (storage.Queryable): the preset and DCGM tests load
// recorded scrapes into it and evaluate the real queries with the real
// engine. They used Prometheus' TSDB (util/teststorage) before, which
// links Prometheus' configuration package and through it the cloud SDKs of
// remote write (AWS, Azure, Google): 5.1 of the 66.6 MB of dependency source
// `make test`'s race build compiled, to store a few hundred samples. The
// engine itself links none of them.
type memStorage struct {
	series map[string]*memSeries // by the labels' string form
}

type memSeries struct {
	lset    labels.Labels
	samples []chunks.Sample // in time order
}

func newMemStorage() *memStorage { return &memStorage{series: map[string]*memSeries{}} }

// add stores v for lset at t (milliseconds); a series' samples are added
// in time order, as a scrape appends them.
func (m *memStorage) add(lset labels.Labels, t int64, v float64) {
	s, ok := m.series[lset.String()]
	if !ok {
		s = &memSeries{lset: lset}
		m.series[lset.String()] = s
	}
	s.samples = append(s.samples, floatSample{t: t, f: v})
}

// Querier returns the samples between mint and maxt (inclusive).
func (m *memStorage) Querier(mint, maxt int64) (storage.Querier, error) {
	return memQuerier{m: m, mint: mint, maxt: maxt}, nil
}

type memQuerier struct {
	m          *memStorage
	mint, maxt int64
}

// Select returns, sorted by labels, every series matching all of ms that
// has samples in the querier's range.
func (q memQuerier) Select(_ context.Context, _ bool, _ *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
	var out []storage.Series
	for _, s := range q.m.series {
		if !matchesAll(s.lset, ms) {
			continue
		}
		var in []chunks.Sample
		for _, x := range s.samples {
			if x.T() >= q.mint && x.T() <= q.maxt {
				in = append(in, x)
			}
		}
		if len(in) > 0 {
			out = append(out, storage.NewListSeries(s.lset, in))
		}
	}
	slices.SortFunc(out, func(a, b storage.Series) int { return labels.Compare(a.Labels(), b.Labels()) })
	return &seriesSlice{series: out, i: -1}
}

func matchesAll(lset labels.Labels, ms []*labels.Matcher) bool {
	for _, m := range ms {
		if !m.Matches(lset.Get(m.Name)) {
			return false
		}
	}
	return true
}

// LabelValues returns the sorted values of name among the series matching ms.
func (q memQuerier) LabelValues(_ context.Context, name string, _ *storage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	var vs []string
	for _, s := range q.m.series {
		if v := s.lset.Get(name); v != "" && matchesAll(s.lset, ms) {
			vs = append(vs, v)
		}
	}
	slices.Sort(vs)
	return slices.Compact(vs), nil, nil
}

// LabelNames returns the sorted label names of the series matching ms.
func (q memQuerier) LabelNames(_ context.Context, _ *storage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	var ns []string
	for _, s := range q.m.series {
		if matchesAll(s.lset, ms) {
			s.lset.Range(func(l labels.Label) { ns = append(ns, l.Name) })
		}
	}
	slices.Sort(ns)
	return slices.Compact(ns), nil, nil
}

func (memQuerier) Close() error { return nil }

type seriesSlice struct {
	series []storage.Series
	i      int
}

func (s *seriesSlice) Next() bool                        { s.i++; return s.i < len(s.series) }
func (s *seriesSlice) At() storage.Series                { return s.series[s.i] }
func (s *seriesSlice) Err() error                        { return nil }
func (s *seriesSlice) Warnings() annotations.Annotations { return nil }

// floatSample is one float sample (chunks.Sample).
type floatSample struct {
	t int64
	f float64
}

func (s floatSample) T() int64                      { return s.t }
func (s floatSample) ST() int64                     { return 0 }
func (s floatSample) F() float64                    { return s.f }
func (s floatSample) H() *histogram.Histogram       { return nil }
func (s floatSample) FH() *histogram.FloatHistogram { return nil }
func (s floatSample) Type() chunkenc.ValueType      { return chunkenc.ValFloat }
func (s floatSample) Copy() chunks.Sample           { return s }
