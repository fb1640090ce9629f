# Fuzzing (issue 10): every fuzz target, briefly.

##@ Fuzzing

# Each target runs for FUZZ_TIME; minimizing a new input is capped so a slow
# minimization cannot eat a target's budget.
FUZZ_TIME ?= 10s
FUZZ_MINIMIZE_TIME ?= 2s
# Conversion on arbitrary JSON (the webhooks' own targets cover validation
# and defaulting; fuzz-webhooks runs them).
RELIABILITY_FUZZ_TARGETS := FuzzSpokeRoundTrip FuzzHubRoundTrip

.PHONY: fuzz
fuzz: ## Fuzz validation, defaulting and conversion for FUZZ_TIME each (about 1 min at 10s; not in .ci/run).
	@$(MAKE) --no-print-directory fuzz-webhooks FUZZTIME=$(FUZZ_TIME)
	@for t in $(RELIABILITY_FUZZ_TARGETS); do \
		echo "fuzzing $$t for $(FUZZ_TIME)"; \
		go test ./test/reliability/fuzz -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZ_TIME) -fuzzminimizetime $(FUZZ_MINIMIZE_TIME) || exit 1; \
	done

# Not part of `fuzz` yet: it finds, within seconds, a nil-pointer panic in
# prometheus/common v0.67.5's text parser (input "#0\n{}"), which the
# progress scrape reaches with whatever rank 0 serves. Add it to `fuzz` once
# controllers/trainingjob/progress.go guards the parser.
.PHONY: fuzz-progress
fuzz-progress: ## Fuzz the Prometheus-text progress scrape for FUZZ_TIME (fails today: known parser panic).
	go test ./test/reliability/fuzz -run '^$$' -fuzz '^FuzzProgressScrape$$' -fuzztime $(FUZZ_TIME) -fuzzminimizetime $(FUZZ_MINIMIZE_TIME)
