package modeldeployment

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
	"github.com/ml-operator/ml-operator/internal/integrations/prometheus"
)

func TestRollbackTarget(t *testing.T) {
	history := []mlv1.HistoryEntry{
		{Generation: 4, Outcome: mlv1.OutcomeProgressing, Versions: []mlv1.VersionRecord{{Name: "v2", Weight: 80}, {Name: "v3", Weight: 20}}},
		{Generation: 3, Outcome: mlv1.OutcomeSucceeded, Versions: []mlv1.VersionRecord{{Name: "v1", Weight: 30}, {Name: "v2", Weight: 70}}},
		{Generation: 1, Outcome: mlv1.OutcomeSucceeded, Versions: []mlv1.VersionRecord{{Name: "v1", Weight: 100}}},
	}
	req := weights("v1", 0, "v2", 80, "v3", 20)
	cases := []struct {
		name           string
		ready, failing map[string]bool
		want           string
	}{
		{"heaviest version of the newest success", set("v1", "v2", "v3"), set("v3"), "v2"},
		{"next in that entry when the heaviest fails", set("v1", "v2", "v3"), set("v2", "v3"), "v1"},
		{"not Ready versions are skipped", set("v1", "v3"), set("v3"), "v1"},
		{"nothing usable", set("v3"), set("v3"), ""},
	}
	for _, tc := range cases {
		if got := rollbackTarget(history, req, tc.ready, tc.failing); got != tc.want {
			t.Errorf("%s: rollbackTarget = %q, want %q", tc.name, got, tc.want)
		}
	}
	// Without any success in history: the heaviest Ready, healthy version.
	if got := rollbackTarget(nil, weights("a", 10, "b", 60, "c", 30), set("a", "c"), set("b")); got != "c" {
		t.Errorf("no history: %q, want c", got)
	}
}

func TestMetricFailure(t *testing.T) {
	cases := []struct {
		m      prometheus.VersionMetrics
		maxLat *int32
		want   string
	}{
		{prometheus.VersionMetrics{RequestsPerSecond: 0, ErrorRate: 1, HasErrorRate: true}, nil, ""},
		{prometheus.VersionMetrics{RequestsPerSecond: 5, ErrorRate: 0.05, HasErrorRate: true}, nil, ""},
		{prometheus.VersionMetrics{RequestsPerSecond: 5, ErrorRate: 0.051, HasErrorRate: true}, nil, mlv1.ReasonErrorRate},
		// A server that counts no errors (KServe's runtimes) never fails on them.
		{prometheus.VersionMetrics{RequestsPerSecond: 5, ErrorRate: 0.9}, nil, ""},
		{prometheus.VersionMetrics{RequestsPerSecond: 5, AverageLatencyMs: 600, HasLatency: true}, ptr.To[int32](500), mlv1.ReasonLatency},
		{prometheus.VersionMetrics{RequestsPerSecond: 5, AverageLatencyMs: 600, HasLatency: true}, nil, ""},
		{prometheus.VersionMetrics{RequestsPerSecond: 5}, ptr.To[int32](500), ""},
	}
	for i, tc := range cases {
		if got, _ := metricFailure(tc.m, 0.05, tc.maxLat); got != tc.want {
			t.Errorf("case %d: %q, want %q", i, got, tc.want)
		}
	}
}

func TestRecordHistory(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 3, 0, 0, 0, time.UTC)
	var h []mlv1.HistoryEntry
	for gen := int64(1); gen <= 12; gen++ {
		set := []mlv1.VersionRecord{{Name: "v1", Weight: 100, Image: fmt.Sprintf("img:%d", gen)}}
		h = recordHistory(h, gen, set, t0.Add(time.Duration(gen)*time.Minute))
		if gen%2 == 0 {
			h[0].Outcome = mlv1.OutcomeSucceeded
		}
	}
	if len(h) != maxHistory {
		t.Fatalf("history has %d entries, want %d", len(h), maxHistory)
	}
	if h[0].Generation != 12 || h[9].Generation != 3 {
		t.Errorf("newest first, oldest dropped: got %d..%d", h[0].Generation, h[9].Generation)
	}
	if h[1].Outcome != mlv1.OutcomeSuperseded {
		t.Errorf("an entry replaced while Progressing is Superseded, got %s", h[1].Outcome)
	}
	if h[2].Outcome != mlv1.OutcomeSucceeded {
		t.Errorf("a Succeeded entry stays Succeeded, got %s", h[2].Outcome)
	}

	// The same set again (say, only scaling changed) adds nothing and does not alias.
	again := recordHistory(h, 13, h[0].Versions, t0)
	if diff := cmp.Diff(h, again); diff != "" {
		t.Errorf("unchanged set (-want +got):\n%s", diff)
	}
	again[0].Outcome = "changed"
	if h[0].Outcome == "changed" {
		t.Error("recordHistory must copy, not alias, the previous status")
	}
}

func TestHistoryOutcome(t *testing.T) {
	cases := []struct {
		current                  string
		rolledBack, allRolledOut bool
		want                     string
	}{
		{mlv1.OutcomeProgressing, false, false, mlv1.OutcomeProgressing},
		{mlv1.OutcomeProgressing, false, true, mlv1.OutcomeSucceeded},
		{mlv1.OutcomeProgressing, true, true, mlv1.OutcomeRolledBack},
		{mlv1.OutcomeSucceeded, true, true, mlv1.OutcomeRolledBack},
		{mlv1.OutcomeSucceeded, false, false, mlv1.OutcomeSucceeded},
	}
	for _, tc := range cases {
		if got := historyOutcome(tc.current, tc.rolledBack, tc.allRolledOut); got != tc.want {
			t.Errorf("historyOutcome(%s, %v, %v) = %s, want %s", tc.current, tc.rolledBack, tc.allRolledOut, got, tc.want)
		}
	}
}
