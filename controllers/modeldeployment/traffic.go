package modeldeployment

// versionWeight is one version's share of traffic, in percent.
type versionWeight struct {
	name   string
	weight int32
}

// weightOf returns the weight of name in ws, or 0.
func weightOf(ws []versionWeight, name string) int32 {
	for _, w := range ws {
		if w.name == name {
			return w.weight
		}
	}
	return 0
}

// rolledBackWeights moves the share of every failed version to target (the
// last healthy version). With no usable target the failed shares are dropped
// and readiness gating spreads the rest. The order of requested is kept.
func rolledBackWeights(requested []versionWeight, failed map[string]bool, target string) []versionWeight {
	out := make([]versionWeight, len(requested))
	var moved int32
	for i, w := range requested {
		out[i] = w
		if failed[w.name] {
			moved += w.weight
			out[i].weight = 0
		}
	}
	if target == "" || failed[target] {
		return out
	}
	for i := range out {
		if out[i].name == target {
			out[i].weight += moved
		}
	}
	return out
}

// effectiveWeights is the traffic each version really gets. Failed versions
// lose their share to rollbackTarget; then a version that is not Ready gets
// nothing and its share goes to the Ready ones, in proportion to their own
// weights (evenly when every Ready version asked for 0). The result always
// sums to 100, or to 0 when no usable version is Ready.
func effectiveWeights(requested []versionWeight, ready, failed map[string]bool, rollbackTarget string) []versionWeight {
	shares := rolledBackWeights(requested, failed, rollbackTarget)
	eligible := func(name string) bool { return ready[name] && !failed[name] }

	var sum, count int64
	for _, w := range shares {
		if eligible(w.name) {
			sum += int64(w.weight)
			count++
		}
	}
	out := make([]versionWeight, len(shares))
	raw := make([]int64, len(shares))
	for i, w := range shares {
		out[i] = versionWeight{name: w.name}
		if !eligible(w.name) {
			continue
		}
		if sum == 0 {
			raw[i] = 1 // every Ready version asked for 0: share evenly
		} else {
			raw[i] = int64(w.weight)
		}
	}
	if count == 0 {
		return out
	}
	if sum == 0 {
		sum = count
	}
	return apportion(out, raw, sum)
}

// apportion scales raw (summing to total) to integers summing to 100 with the
// largest-remainder method; ties go to the earlier version, so the result is
// deterministic.
func apportion(out []versionWeight, raw []int64, total int64) []versionWeight {
	remainders := make([]int64, len(raw))
	var assigned int64
	for i, r := range raw {
		out[i].weight = int32(r * 100 / total)
		remainders[i] = r * 100 % total
		assigned += int64(out[i].weight)
	}
	for left := 100 - assigned; left > 0; left-- {
		best := -1
		for i, r := range remainders {
			if raw[i] == 0 {
				continue
			}
			if best < 0 || r > remainders[best] {
				best = i
			}
		}
		out[best].weight++
		remainders[best] = -1
	}
	return out
}

// serviceModeBounds are a version's HPA bounds under router "service": the
// spec's bounds scaled by the version's weight (rounded up, at least one
// replica), so the stable Service's endpoints approximate the weights. A
// version with weight 0 gets no HPA and zero replicas (ok=false).
func serviceModeBounds(weight, minReplicas, maxReplicas int32) (lo, hi int32, ok bool) {
	if weight <= 0 {
		return 0, 0, false
	}
	ceilPct := func(n int32) int32 { return int32((int64(n)*int64(weight) + 99) / 100) }
	lo = max(1, ceilPct(minReplicas))
	hi = max(lo, ceilPct(maxReplicas))
	return lo, hi, true
}
