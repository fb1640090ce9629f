# Fuzzing (issue 10): every fuzz target, briefly.

##@ Fuzzing

# Each target runs for FUZZ_TIME; minimizing a new input is capped so a slow
# minimization cannot eat a target's budget.
FUZZ_TIME ?= 10s
FUZZ_MINIMIZE_TIME ?= 2s
# Conversion on arbitrary JSON and the Prometheus-text progress scrape (the
# webhooks' own targets cover validation and defaulting; fuzz-webhooks runs them).
RELIABILITY_FUZZ_TARGETS := FuzzSpokeRoundTrip FuzzHubRoundTrip FuzzProgressScrape

.PHONY: fuzz
fuzz: ## Fuzz validation, defaulting, conversion and progress parsing for FUZZ_TIME each (about 80 s at 10s; not in .ci/run).
	@$(MAKE) --no-print-directory fuzz-webhooks FUZZTIME=$(FUZZ_TIME)
	@for t in $(RELIABILITY_FUZZ_TARGETS); do \
		echo "fuzzing $$t for $(FUZZ_TIME)"; \
		go test ./test/reliability/fuzz -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZ_TIME) -fuzzminimizetime $(FUZZ_MINIMIZE_TIME) || exit 1; \
	done
