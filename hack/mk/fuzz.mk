# Fuzzing (issue 10): every fuzz target, briefly.

##@ Fuzzing

# Budgets are execution counts (go test's `-fuzztime Nx`), not durations.
# Go 1.26's fuzz coordinator has a shutdown race at a *duration* deadline
# (golang/go#75804, fixed in Go 1.27): a worker still mid-call when the
# deadline fires is reported as `--- FAIL ... context deadline exceeded`,
# with no failing input, on a loaded machine. A count has no wall-clock
# deadline to race; a real finding still fails and writes its input to
# testdata/fuzz/. FUZZ_TIME takes a duration too (FUZZ_TIME=10m) for long
# local runs, where a bare deadline failure with no input written is that race.
FUZZ_TIME ?= 200000x
# Minimizing a new input is capped by time (the worker's own timeout, not the
# coordinator's deadline): 2000 executions of a large conversion input took
# 30 s, a 2 s cap keeps a target's run short.
FUZZ_MINIMIZE_TIME ?= 2s
# fuzz-smoke (CI) runs each target this many times (a few seconds each).
FUZZ_SMOKE_TIME ?= 20000x

# Every `func FuzzXxx` in a _test.go file of the module, as <package dir>:<target>.
# Found by name rather than listed, so a new target is fuzzed in CI without
# anyone remembering to add it here: validation and defaulting (webhooks/rules),
# conversion on arbitrary JSON (api/v1alpha1), the Prometheus-text
# progress parsing and the status computed from it
# (internal/integrations/progress). A target lives in a package whose test
# binary links neither controller-runtime's client nor client-go, so the
# instrumented build below stays small (docs/decisions.md, "Fuzz targets
# live in packages without controller-runtime").
FUZZ_TARGETS = $(shell grep -rHo --include='*_test.go' --exclude-dir=bin --exclude-dir=.git --exclude-dir=vendor \
	'^func Fuzz[A-Za-z0-9_]*' . | sed -e 's|/[^/]*_test.go:func |:|' | sort)

# fuzz-run fuzzes the targets of FUZZ_TARGETS that match the pattern $(2)
# (all when empty) with -fuzztime $(1) each: real fuzzing (go test -fuzz),
# not only the seed corpus that plain go test runs. Each package's test
# binary is built once with fuzzing's coverage instrumentation (go test -c
# -fuzz) and run once per target, from the package's directory (its
# testdata/fuzz corpus) with go test's own fuzz cache
# ($GOCACHE/fuzz/<import path>): one link per package instead of one per
# target.
define fuzz-run
	@test -n "$(filter $(or $(2),%),$(FUZZ_TARGETS))" || { echo "no fuzz targets found"; exit 1; }
	@bins=$$(mktemp -d); trap 'rm -rf "$$bins"' EXIT; cache=$$(go env GOCACHE)/fuzz; \
	for pt in $(filter $(or $(2),%),$(FUZZ_TARGETS)); do \
		pkg=$${pt%%:*}; t=$${pt##*:}; \
		ip=$$(go list $$pkg) || exit 1; bin=$$bins/$$(echo "$$ip" | tr / _).test; \
		if [ ! -x "$$bin" ]; then \
			echo "building $$pkg's tests with fuzzing instrumentation"; \
			go test -c -fuzz "^$$t$$" -o "$$bin" $$pkg || exit 1; \
		fi; \
		echo "fuzzing $$t in $$pkg, -fuzztime $(1)"; \
		(cd $$pkg && "$$bin" -test.run '^$$' -test.fuzz "^$$t$$" -test.fuzztime $(1) \
			-test.fuzzminimizetime $(FUZZ_MINIMIZE_TIME) -test.fuzzcachedir "$$cache/$$ip" -test.paniconexit0) || exit 1; \
	done
endef

.PHONY: fuzz
fuzz: ## Fuzz validation, defaulting, conversion and progress parsing, FUZZ_TIME executions each.
	$(call fuzz-run,$(FUZZ_TIME))

.PHONY: fuzz-smoke
fuzz-smoke: ## CI: every fuzz target really fuzzes (go test -fuzz), FUZZ_SMOKE_TIME executions each.
	$(call fuzz-run,$(FUZZ_SMOKE_TIME))

.PHONY: fuzz-list
fuzz-list: ## List the fuzz targets make fuzz and make fuzz-smoke run.
	@for pt in $(FUZZ_TARGETS); do echo $$pt; done
