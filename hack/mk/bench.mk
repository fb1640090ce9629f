# make bench / make bench-smoke: owned by the benchmark work (issue 9).
#
# Starts its own local kwok cluster (internal/localcluster) with enough
# simulated nodes for the load, runs bin/manager as a separate process,
# measures, prints a table, writes bench/results/<date>.json and deletes the
# cluster. It measures; nothing passes or fails on speed. docs/benchmarks.md.

##@ Benchmarks

# Burst size: BENCH_JOBS TrainingJobs x BENCH_RANKS ranks, created at once.
BENCH_JOBS ?= 500
BENCH_RANKS ?= 8
# Times each scenario runs (median and min – max are reported).
BENCH_REPEATS ?= 3
# The manager's --kube-api-qps/--kube-api-burst, and the baseline client's.
BENCH_QPS ?= 50
BENCH_BURST ?= 100
# Worker-pod counts for the memory readings, gang sizes for the restart time.
BENCH_MEMORY_PODS ?= 0,1000,4000
BENCH_RESTART_RANKS ?= 8,64,512,1024
# Anything else, e.g. BENCH_FLAGS="--gpus-per-worker=1 --skip=memory".
BENCH_FLAGS ?=

# The peer: Kubeflow's training-operator v1, built unmodified from its module
# (go install ...@TRAINING_OPERATOR_VERSION), gets the same burst in the same
# run, once, after ours (BENCH_FLAGS="--skip=peer" leaves it out). Its
# PyTorchJob CRD is read from the module it was built from.
TRAINING_OPERATOR_CRD = $(shell go env GOMODCACHE)/github.com/kubeflow/training-operator@$(TRAINING_OPERATOR_VERSION)/manifests/base/crds/kubeflow.org_pytorchjobs.yaml
BENCH_PEER_FLAGS = --peer $(LOCALBIN)/training-operator.v1 --peer-version $(TRAINING_OPERATOR_VERSION) --peer-crd $(TRAINING_OPERATOR_CRD)

.PHONY: bench
bench: cluster-tools training-operator build ## Benchmarks on a local kwok cluster, the peer (Kubeflow training-operator) included: table + bench/results/<date>.json (BENCH_JOBS, BENCH_RANKS, BENCH_REPEATS).
	go run ./cmd/bench --manager $(LOCALBIN)/manager --bin $(LOCALBIN) \
		--jobs $(BENCH_JOBS) --ranks $(BENCH_RANKS) --repeats $(BENCH_REPEATS) \
		--qps $(BENCH_QPS) --burst $(BENCH_BURST) \
		--memory-pods $(BENCH_MEMORY_PODS) --restart-ranks $(BENCH_RESTART_RANKS) $(BENCH_PEER_FLAGS) $(BENCH_FLAGS)

.PHONY: training-operator
training-operator: $(STAMPS)/training-operator-$(TRAINING_OPERATOR_VERSION) ## Kubeflow's training-operator v1, the benchmark's peer (bin/training-operator.v1).
$(STAMPS)/training-operator-$(TRAINING_OPERATOR_VERSION): | $(STAMPS)
	@$(call build_tool,training-operator,$(TRAINING_OPERATOR_VERSION),$(EST_TRAINING_OPERATOR)) env GOBIN=$(LOCALBIN) GONOSUMDB=k8s.io go install github.com/kubeflow/training-operator/cmd/training-operator.v1@$(TRAINING_OPERATOR_VERSION)
	@touch $@

# make bench-gang: the time to bind a gang of BENCH_GANG_RANKS ranks with
# Kubernetes' native gang scheduling against as many plain pods, on one
# cluster started with the native gang scheduling gates (8-GPU ranks, one per
# node). Only that scenario runs.
BENCH_GANG_RANKS ?= 64
.PHONY: bench-gang
bench-gang: cluster-tools build ## Bind time of a BENCH_GANG_RANKS-rank gang, native gang scheduling against plain pods (BENCH_REPEATS).
	go run ./cmd/bench --manager $(LOCALBIN)/manager --bin $(LOCALBIN) --gang native --gpus-per-worker 8 --jobs 0 --ranks 0 --latency-samples 0 \
		--gang-ranks $(BENCH_GANG_RANKS) --repeats $(BENCH_REPEATS) --qps $(BENCH_QPS) --burst $(BENCH_BURST) \
		--memory-pods "" --restart-ranks "" --skip burst,latency,cost,memory,restart,rollout $(BENCH_FLAGS)

# make bench-rollout: only how fast a ModelDeployment's traffic moves under
# the service router (weight change -> split served; failing analysis ->
# back on stable), BENCH_ROLLOUT_SAMPLES of each, on a cluster whose
# manager reads a canned Prometheus on loopback. make bench runs the same
# after its other scenarios, with --latency-samples of each.
BENCH_ROLLOUT_SAMPLES ?= 10
.PHONY: bench-rollout
bench-rollout: cluster-tools build ## ModelDeployment traffic timings only: weight -> split served, failing analysis -> back on stable (service router; BENCH_ROLLOUT_SAMPLES).
	go run ./cmd/bench --manager $(LOCALBIN)/manager --bin $(LOCALBIN) --jobs 0 --ranks 0 --latency-samples $(BENCH_ROLLOUT_SAMPLES) \
		--memory-pods "" --restart-ranks "" --skip burst,latency,cost,memory,restart,gang,peer $(BENCH_FLAGS)

# make bench-memory: the manager's memory at BENCH_MEMORY_LEVELS worker pods,
# in one run on one cluster, and on the way up a steady run that holds
# BENCH_STEADY_PODS pods for BENCH_STEADY, reading memory every
# BENCH_STEADY_INTERVAL (issue 24, item 2). Only the memory scenario runs;
# the raw samples are written as they are read (bench/results/<date>.json,
# marked incomplete until the run ends).
BENCH_MEMORY_LEVELS ?= 0,1000,4000,10000
BENCH_STEADY_PODS ?= 4000
BENCH_STEADY ?= 30m
BENCH_STEADY_INTERVAL ?= 1m
# A directory for the manager's heap profiles at each level (empty: none).
BENCH_PROFILES ?=
.PHONY: bench-memory
bench-memory: cluster-tools build ## The manager's memory at 0, 1,000, 4,000 and 10,000 worker pods, and a 30-minute steady run at 4,000 (BENCH_MEMORY_LEVELS, BENCH_STEADY_PODS, BENCH_STEADY).
	go run ./cmd/bench --manager $(LOCALBIN)/manager --bin $(LOCALBIN) --jobs 0 --ranks $(BENCH_RANKS) --repeats 1 \
		--latency-samples 0 --qps $(BENCH_QPS) --burst $(BENCH_BURST) \
		--memory-pods $(BENCH_MEMORY_LEVELS) --steady-pods $(BENCH_STEADY_PODS) --steady $(BENCH_STEADY) \
		--steady-interval $(BENCH_STEADY_INTERVAL) $(if $(BENCH_PROFILES),--profiles $(BENCH_PROFILES)) \
		--restart-ranks "" --skip burst,latency,cost,restart,gang,rollout,peer $(BENCH_FLAGS)

.PHONY: bench-smoke
bench-smoke: cluster-tools build ## A small benchmark (20 x 4, once) that only checks the harness works; writes no results file.
	go run ./cmd/bench --manager $(LOCALBIN)/manager --bin $(LOCALBIN) --out "" \
		--jobs 20 --ranks 4 --repeats 1 --latency-samples 5 --cost-jobs 3 \
		--memory-pods 0,80 --steady-pods 80 --steady 10s --steady-interval 5s --restart-ranks 4 $(BENCH_FLAGS)
