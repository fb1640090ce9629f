# make chaos: owned by the reliability work (issue 10, item 1).
#
# Starts its own local kwok cluster (name "chaos", state and logs in
# CHAOS_WORKDIR), builds the manager from this tree and runs it as a child
# process, then: CHAOS_JOBS TrainingJobs with random sizes and outcomes while
# the manager is SIGKILLed CHAOS_KILLS times, a two-replica leader failover,
# and a kube-apiserver outage. Fails on any invariant violation. Not part of
# `make test` (build tag chaos). docs/chaos.md.

##@ Chaos

CHAOS_JOBS ?= 200
CHAOS_KILLS ?= 20
CHAOS_WORKDIR ?= $(CURDIR)/tmp/chaos
CHAOS_TIMEOUT ?= 45m
# Anything else, e.g. CHAOS_FLAGS="-seed=42 -max-ranks=4 -apiserver-outage=30s".
CHAOS_FLAGS ?=

.PHONY: chaos
chaos: cluster-tools ## Chaos suite on a local kwok cluster: manager SIGKILLs, leader failover, apiserver outage (CHAOS_JOBS, CHAOS_KILLS, CHAOS_FLAGS).
	go test -tags chaos ./test/chaos/ -run TestChaos -count=1 -timeout $(CHAOS_TIMEOUT) -v \
		-args -jobs=$(CHAOS_JOBS) -kills=$(CHAOS_KILLS) -workdir=$(CHAOS_WORKDIR) $(CHAOS_FLAGS)

.PHONY: chaos-unit
chaos-unit: ## The chaos suite's own unit tests (invariant checks, audit-log attribution); no cluster.
	go test -tags chaos ./test/chaos/ -run 'TestPodWatcherInvariants|TestForeignDeletionsFromTheAuditLog' -count=1 -v

# CI runs a smaller chaos suite: every phase (SIGKILLs, leader failover, the
# API server outage) and every invariant, with fewer and smaller jobs, plus
# the suite's unit tests. About 3 minutes on 2 cores.
CHAOS_SMOKE_JOBS ?= 40
CHAOS_SMOKE_KILLS ?= 5

.PHONY: chaos-smoke
chaos-smoke: cluster-tools ## CI: the chaos suite's unit tests, then the suite with CHAOS_SMOKE_JOBS jobs (ranks 1..4) and CHAOS_SMOKE_KILLS kills.
	go test -tags chaos ./test/chaos/ -run 'TestPodWatcherInvariants|TestForeignDeletionsFromTheAuditLog' -count=1
	go test -tags chaos ./test/chaos/ -run TestChaos -count=1 -timeout $(CHAOS_TIMEOUT) -v \
		-args -jobs=$(CHAOS_SMOKE_JOBS) -kills=$(CHAOS_SMOKE_KILLS) -max-ranks=4 -workdir=$(CHAOS_WORKDIR)-smoke $(CHAOS_FLAGS)
