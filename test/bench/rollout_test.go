package bench

import (
	"testing"
	"time"

	"github.com/ml-operator/ml-operator/internal/integrations/prometheus"
)

// The canned Prometheus answers the generic preset's queries as the
// operator renders them: a failing error rate for a version named bad (and
// the moment it first did), a healthy one for the others.
func TestCannedPrometheusAnswersThePresetQueries(t *testing.T) {
	q, err := prometheus.PresetQueries("generic")
	if err != nil {
		t.Fatal(err)
	}
	c := &CannedPrometheus{failedAt: map[string]time.Time{}}
	good := q.Render("rollout", prometheus.PodRegex("roll-abort-3", "good"), "1m")
	bad := q.Render("rollout", prometheus.PodRegex("roll-abort-3", "bad"), "1m")
	for _, x := range []struct {
		query string
		want  float64
	}{
		{good.RequestRate, 10}, {good.ErrorRate, 0}, {good.LatencyMs, 5},
		{bad.RequestRate, 10}, {bad.LatencyMs, 5},
	} {
		if v, ok := c.answer(x.query); !ok || v != x.want {
			t.Errorf("%s: %v, %v; want %v", x.query, v, ok, x.want)
		}
	}
	if _, ok := c.FailedAt("roll-abort-3"); ok {
		t.Fatal("failed before the error rate of bad was asked")
	}
	if v, ok := c.answer(bad.ErrorRate); !ok || v != 0.2 {
		t.Errorf("%s: %v, %v; want 0.2", bad.ErrorRate, v, ok)
	}
	first, ok := c.FailedAt("roll-abort-3")
	if !ok {
		t.Fatal("the failing answer was not recorded")
	}
	c.answer(bad.ErrorRate)
	if again, _ := c.FailedAt("roll-abort-3"); !again.Equal(first) {
		t.Errorf("the first failing answer moved: %v, then %v", first, again)
	}
	if _, ok := c.answer(`DCGM_FI_DEV_GPU_UTIL{namespace="x"}`); ok {
		t.Error("a query of no version's pods was answered")
	}
}

func TestIsSplit(t *testing.T) {
	for _, x := range []struct {
		got, want map[string]int
		is        bool
	}{
		{map[string]int{"a": 3, "b": 1}, map[string]int{"a": 3, "b": 1}, true},
		{map[string]int{"a": 3, "b": 1}, map[string]int{"a": 1, "b": 3}, false},
		{map[string]int{"good": 2, "bad": 1}, map[string]int{"good": 2}, false},
		{map[string]int{"good": 2}, map[string]int{"good": 2}, true},
		{map[string]int{}, map[string]int{"good": 2}, false},
	} {
		if isSplit(x.got, x.want) != x.is {
			t.Errorf("isSplit(%v, %v) = %v", x.got, x.want, !x.is)
		}
	}
}
