# make run / make run-down: owned by the local-cluster work (issue 7).
#
# With a kubeconfig that reaches a cluster (and no LOCAL=1), `make run` keeps
# the operator-sdk meaning: run the manager on this machine against it.
# Otherwise it brings up a local kwok cluster with simulated GPU nodes
# (cmd/localcluster, state in .kwok/), installs the CRDs and webhooks, runs
# the manager and tears it all down on Ctrl-C or `make run-down`.

##@ Run

LOCAL ?=
# NODE=real: a real single-node cluster instead (hack/mk/realnode.mk).
NODE ?=
LOCAL_WORKDIR ?= $(shell pwd)/.kwok
# GANG=native: the local cluster runs with Kubernetes' native gang
# scheduling on (feature gates GenericWorkload and GangScheduling,
# scheduling.k8s.io/v1alpha2 served); docs/local-cluster.md.
GANG ?=
LOCALCLUSTER_FLAGS = --workdir $(LOCAL_WORKDIR) --bin $(LOCALBIN) --manager $(LOCALBIN)/manager $(if $(GANG),--gang $(GANG))
# Extra manager flags for the local run, e.g. MANAGER_ARGS=--zap-log-level=debug.
MANAGER_ARGS ?=

.PHONY: doctor
doctor: ## Check this machine: what make test, make run and the real node need, what is missing and how to get it.
	@go run ./cmd/doctor -for test
	@echo
	@go run ./cmd/doctor -for real

.PHONY: run
run: ## Run the manager against the cluster in your kubeconfig; with none reachable (or LOCAL=1) on a local kwok cluster; NODE=real: a real single-node cluster.
	@go run ./cmd/doctor -for $(if $(filter real,$(NODE)),real,run) -quiet
	@if [ "$(NODE)" = "real" ]; then \
		$(MAKE) --no-print-directory run-real; \
	elif [ "$(LOCAL)" != "1" ] && $(KUBECTL) get --raw /readyz --request-timeout=5s >/dev/null 2>&1; then \
		echo "Running the manager against $$($(KUBECTL) config current-context) (LOCAL=1 for a local cluster instead)"; \
		go run ./cmd --leader-elect=false --metrics-secure=false --metrics-bind-address=:8080 --enable-webhooks=false $(MANAGER_ARGS); \
	else \
		$(MAKE) --no-print-directory run-local; \
	fi

.PHONY: run-local
run-local: cluster-tools build localcluster ## Local kwok cluster + CRDs + webhooks + manager, until Ctrl-C.
	$(LOCALBIN)/localcluster run $(LOCALCLUSTER_FLAGS) -- $(MANAGER_ARGS)

.PHONY: run-down
run-down: localcluster ## Stop `make run` and delete its local cluster.
	$(LOCALBIN)/localcluster down $(LOCALCLUSTER_FLAGS)

.PHONY: localcluster
localcluster: go-mod-download ## Build bin/localcluster (drives kwokctl for make run).
	go build -o $(LOCALBIN)/localcluster ./cmd/localcluster
