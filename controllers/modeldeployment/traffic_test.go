package modeldeployment

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func weights(kv ...any) []versionWeight {
	var out []versionWeight
	for i := 0; i < len(kv); i += 2 {
		out = append(out, versionWeight{name: kv[i].(string), weight: int32(kv[i+1].(int))})
	}
	return out
}

func set(names ...string) map[string]bool {
	m := map[string]bool{}
	for _, n := range names {
		m[n] = true
	}
	return m
}

func TestEffectiveWeights(t *testing.T) {
	cases := []struct {
		name      string
		requested []versionWeight
		ready     map[string]bool
		failed    map[string]bool
		target    string
		want      []versionWeight
	}{
		{"all ready keeps the request", weights("v1", 80, "v2", 20), set("v1", "v2"), nil, "", weights("v1", 80, "v2", 20)},
		{"canary not ready: its share goes to the stable", weights("v1", 80, "v2", 20), set("v1"), nil, "", weights("v1", 100, "v2", 0)},
		{"nothing ready: nothing routed", weights("v1", 80, "v2", 20), set(), nil, "", weights("v1", 0, "v2", 0)},
		{"unready share spread in proportion", weights("a", 50, "b", 30, "c", 20), set("b", "c"), nil, "", weights("a", 0, "b", 60, "c", 40)},
		{"thirds round to 100, earlier first", weights("a", 33, "b", 33, "c", 34), set("a", "b"), nil, "", weights("a", 50, "b", 50, "c", 0)},
		{"uneven thirds sum to 100", weights("a", 10, "b", 10, "c", 10, "d", 70), set("a", "b", "c"), nil, "", weights("a", 34, "b", 33, "c", 33, "d", 0)},
		{"sevenths sum to 100", weights("a", 1, "b", 1, "c", 1, "d", 1, "e", 1, "f", 1, "g", 1, "h", 93), set("a", "b", "c", "d", "e", "f", "g"), nil, "",
			weights("a", 15, "b", 15, "c", 14, "d", 14, "e", 14, "f", 14, "g", 14, "h", 0)},
		{"ready versions asked for 0: even split", weights("v1", 100, "v2", 0, "v3", 0), set("v2", "v3"), nil, "", weights("v1", 0, "v2", 50, "v3", 50)},
		{"failed share goes to the rollback target", weights("v1", 50, "v2", 30, "v3", 20), set("v1", "v2", "v3"), set("v3"), "v1", weights("v1", 70, "v2", 30, "v3", 0)},
		{"failed but ready still gets nothing", weights("v1", 20, "v2", 80), set("v1", "v2"), set("v2"), "v1", weights("v1", 100, "v2", 0)},
		{"no target: failed share spread", weights("v1", 50, "v2", 30, "v3", 20), set("v1", "v2", "v3"), set("v3"), "", weights("v1", 63, "v2", 37, "v3", 0)},
		{"target not ready: gating still applies", weights("v1", 50, "v2", 50), set("v2"), set("v2"), "v1", weights("v1", 0, "v2", 0)},
		{"single version", weights("v1", 100), set("v1"), nil, "", weights("v1", 100)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := effectiveWeights(tc.requested, tc.ready, tc.failed, tc.target)
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(versionWeight{})); diff != "" {
				t.Errorf("effectiveWeights (-want +got):\n%s", diff)
			}
		})
	}
}

// Whatever the request and readiness, the effective weights sum to exactly 100
// when anything is Ready, and no unready or failed version gets traffic.
func TestEffectiveWeightsAlwaysSumTo100(t *testing.T) {
	names := []string{"a", "b", "c", "d", "e"}
	for seed := 0; seed < 5000; seed++ {
		var req []versionWeight
		left := int32(100)
		for i, n := range names {
			w := int32((seed*7919 + i*104729) % 101)
			if i == len(names)-1 || w > left {
				w = left
			}
			left -= w
			req = append(req, versionWeight{n, w})
		}
		ready, failed := map[string]bool{}, map[string]bool{}
		for i, n := range names {
			ready[n] = (seed>>i)&1 == 1
			failed[n] = (seed>>(i+5))&3 == 3
		}
		got := effectiveWeights(req, ready, failed, names[seed%len(names)])
		var sum int32
		anyEligible := false
		for _, w := range got {
			sum += w.weight
			if ready[w.name] && !failed[w.name] {
				anyEligible = true
			} else if w.weight != 0 {
				t.Fatalf("seed %d: %s is not usable but got %d", seed, w.name, w.weight)
			}
		}
		want := int32(0)
		if anyEligible {
			want = 100
		}
		if sum != want {
			t.Fatalf("seed %d: req %v ready %v failed %v: weights %v sum to %d, want %d", seed, req, ready, failed, got, sum, want)
		}
	}
}

func TestServiceModeBounds(t *testing.T) {
	cases := []struct {
		weight, min, max int32
		lo, hi           int32
		ok               bool
	}{
		{100, 2, 10, 2, 10, true},
		{80, 2, 10, 2, 8, true},
		{20, 2, 10, 1, 2, true},
		{1, 1, 1, 1, 1, true},
		{50, 3, 3, 2, 2, true},
		{0, 2, 10, 0, 0, false},
	}
	for _, tc := range cases {
		lo, hi, ok := serviceModeBounds(tc.weight, tc.min, tc.max)
		if lo != tc.lo || hi != tc.hi || ok != tc.ok {
			t.Errorf("serviceModeBounds(%d, %d, %d) = %d, %d, %v; want %d, %d, %v", tc.weight, tc.min, tc.max, lo, hi, ok, tc.lo, tc.hi, tc.ok)
		}
	}
}
