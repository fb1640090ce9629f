package manager

import (
	"runtime/debug"
	"strconv"
)

// DefaultGCPercent is --gc-percent's default. The manager's live heap is
// mostly its informer caches, which grow with the pods and jobs it
// watches; Go's default target of 100 lets the heap reach twice that
// before a collection, and the runtime keeps the pages. At 50 the
// anonymous memory per worker pod measured a quarter lower, for no CPU
// the burst benchmark could tell (docs/benchmarks.md, docs/decisions.md).
const DefaultGCPercent = 50

// EffectiveGCPercent is the target the manager runs with: GOGC when the
// environment sets it (the Go runtime has already applied it), else the
// flag's.
func EffectiveGCPercent(flagValue int, lookup func(string) (string, bool)) (percent int, fromEnv bool) {
	if v, ok := lookup("GOGC"); ok && v != "" {
		if v == "off" {
			return -1, true
		}
		if n, err := strconv.Atoi(v); err == nil {
			return n, true
		}
		// What the runtime makes of a GOGC it cannot read.
		return 100, true
	}
	return flagValue, false
}

// applyGCPercent sets the target EffectiveGCPercent chooses and returns it.
func applyGCPercent(flagValue int, lookup func(string) (string, bool)) (percent int, fromEnv bool) {
	percent, fromEnv = EffectiveGCPercent(flagValue, lookup)
	if !fromEnv {
		debug.SetGCPercent(percent)
	}
	return percent, fromEnv
}
