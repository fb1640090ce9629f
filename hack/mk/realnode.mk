# The real single-node cluster (issue 19): `make e2e-real` and
# `make run NODE=real`. A real kubelet with containerd + runc, the CNI bridge
# plugin, kube-proxy (iptables) and CoreDNS join a control plane the harness
# starts itself (internal/realnode). Needs root. docs/local-cluster.md,
# section "A real node".

##@ Real node

COREDNS ?= $(LOCALBIN)/coredns
REALNODE_WORKDIR ?= $(shell pwd)/.realnode
REALNODE_FLAGS ?=
E2E_REAL_TIMEOUT ?= 45m
E2E_REAL_FLAGS ?=
# TestOperator/Workloads runs its four workloads side by side (mostly
# waiting); go test's default -parallel is GOMAXPROCS, 2 on CI.
E2E_REAL_PARALLEL ?= 4

.PHONY: node-packages
node-packages: ## apt-get install containerd, runc, containernetworking-plugins, iptables, conntrack and mmdebstrap when missing (root).
	@bash hack/realnode/install-packages.sh

.PHONY: node-tools
node-tools: envtest-tools $(STAMPS)/kube-controller-manager-$(K8S_VERSION) $(STAMPS)/kube-scheduler-$(K8S_VERSION) $(STAMPS)/kubelet-$(K8S_VERSION) $(STAMPS)/kube-proxy-$(K8S_VERSION) $(STAMPS)/coredns-$(COREDNS_VERSION) $(STAMPS)/registry-$(REGISTRY_VERSION) ## Control plane, kubelet, kube-proxy, CoreDNS and the local registry into bin/.

$(STAMPS)/coredns-$(COREDNS_VERSION): | $(STAMPS)
	@# Plugins: kubernetes, errors, health, ready, loop, cache, reload, log; no forward.
	@cd hack/tools/coredns && $(call build_tool,coredns,$(COREDNS_VERSION),$(EST_COREDNS)) env CGO_ENABLED=0 go build -ldflags "-s -w" -o $(COREDNS) .
	@touch $@

# The local registry: Debian's docker-registry (distribution 2.8), its
# program copied into bin/registry by hack/realnode/debian-binary.sh, not
# installed (the package would enable a system service). It was built from
# distribution v3 on the module proxy until that cost a cold CI run 2 to 4
# minutes (docs/decisions.md, "A cold CI run under an hour").
$(STAMPS)/registry-$(REGISTRY_VERSION): | $(STAMPS)
	@bash hack/realnode/debian-binary.sh docker-registry usr/bin/docker-registry $(LOCALBIN)/registry
	@touch $@

# Prometheus for the progressive-delivery tests (test/e2ereal, issue 23):
# cmd/prometheus of the module the project's go.mod requires (its `tool`
# directive; the same release whose PromQL engine the preset tests evaluate
# with), static, with Kubernetes service discovery only (upstream's build
# tags remove_all_sd and enable_kubernetes_sd leave out the cloud
# providers' SDKs) and without the web UI assets (they are not in the
# module; the HTTP API is all the tests and the manager use). Built in the
# project's own module graph, it shares the compilation of client-go,
# client_golang, the PromQL engine and the rest with the project: .ci/run's
# static -trimpath build (docs/decisions.md, "A cold CI run under an hour").
# Debian's prometheus package was tried: it is built without Kubernetes
# discovery.
PROMETHEUS ?= $(LOCALBIN)/prometheus
PROMETHEUS_RELEASE = $(shell echo $(PROMETHEUS_VERSION) | sed -E 's/^v0\.([0-9])([0-9][0-9])\.([0-9]+)$$/\1.\2.\3/; s/^([0-9]+)\.0([0-9])/\1.\2/')
.PHONY: prometheus
prometheus: $(STAMPS)/prometheus-$(PROMETHEUS_VERSION) ## Prometheus (cmd/prometheus of the project's go.mod, Kubernetes discovery only) into bin/, for make e2e-real.
$(STAMPS)/prometheus-$(PROMETHEUS_VERSION): go.mod | $(STAMPS)
	@$(call build_tool,prometheus,$(PROMETHEUS_VERSION),$(EST_PROMETHEUS)) env CGO_ENABLED=0 go build -trimpath \
		-tags remove_all_sd,enable_kubernetes_sd \
		-ldflags "-s -w -X github.com/prometheus/common/version.Version=$(PROMETHEUS_RELEASE) -X github.com/prometheus/common/version.Branch=$(PROMETHEUS_VERSION)" \
		-o $(PROMETHEUS) github.com/prometheus/prometheus/cmd/prometheus
	@touch $@

.PHONY: trainer-rootfs
trainer-rootfs: node-packages ## The trainer image's Debian root filesystem (mmdebstrap, about 5 min cold) into the image cache, ahead of make e2e-real.
	go run ./hack/trainer-rootfs

.PHONY: realnode
realnode: ## Build bin/realnode (the real node harness's command).
	go build -o $(LOCALBIN)/realnode ./cmd/realnode

.PHONY: e2e-real
e2e-real: node-packages node-tools prometheus kustomize ## End-to-end suite on a real single-node cluster (test/e2ereal; root): pods, DNS, kube-proxy, safety rules, then `make deploy` of the operator, a real two-rank PyTorch job and stepped rollouts judged by a real Prometheus; then `make run NODE=real` until Ctrl-C (test/e2ereal/makerun).
	rc=0; \
	go test -tags e2e_real ./test/e2ereal/ -count=1 -timeout $(E2E_REAL_TIMEOUT) -parallel $(E2E_REAL_PARALLEL) -v $(E2E_REAL_FLAGS) || rc=1; \
	echo "e2e-real: next, make run NODE=real until Ctrl-C (test/e2ereal/makerun), after the suite's node is down"; \
	go test -tags e2e_real ./test/e2ereal/makerun/ -count=1 -timeout 25m -v $(E2E_REAL_FLAGS) || rc=1; \
	exit $$rc

# make bench-real: the real-node figures (test/e2ereal BenchmarkRealNode,
# once; root): a two-rank TrainingJob's create -> all ranks Running with the
# image present, the gang restart after a rank is killed, and a
# ModelDeployment weight change -> the traffic its Service serves, counted by
# requests. BENCH_REAL_SAMPLES samples of each; the raw samples go to
# bench/results/<date>-realnode.json. It reports; it never fails on speed.
BENCH_REAL_SAMPLES ?= 3
.PHONY: bench-real
bench-real: node-packages node-tools kustomize ## Real-node figures (root): create -> ranks Running, gang restart, weight change -> traffic (BENCH_REAL_SAMPLES); bench/results/<date>-realnode.json.
	go test -tags e2e_real ./test/e2ereal/ -count=1 -timeout $(E2E_REAL_TIMEOUT) -run '^$$' -bench '^BenchmarkRealNode$$' -benchtime 1x -v \
		-args -bench-samples=$(BENCH_REAL_SAMPLES) -bench-out=$(CURDIR)/bench/results

.PHONY: run-real
run-real: node-packages node-tools realnode ## A real single-node cluster until Ctrl-C (what `make run NODE=real` runs).
	$(LOCALBIN)/realnode run --workdir $(REALNODE_WORKDIR) --bin $(LOCALBIN) $(REALNODE_FLAGS)

.PHONY: run-real-down
run-real-down: realnode ## Remove what a killed `make run NODE=real` left on the machine (processes, mounts, routes, rules, namespaces, cgroups).
	$(LOCALBIN)/realnode down --workdir $(REALNODE_WORKDIR)
