# ml-operator Makefile (operator-sdk go/v4 layout).
#
# Everything is built from the Go module proxy into bin/; nothing is
# downloaded from anywhere else. Run `make help` for the targets.

VERSION ?= 0.2.0
# The release VERSION replaces in its channels: the CSV's spec.replaces, as
# in catalog/ml-operator/channels.yaml (empty for the first release).
PREVIOUS_VERSION ?= 0.1.0
IMAGE_TAG_BASE ?= ghcr.io/ml-operator/ml-operator
IMG ?= $(IMAGE_TAG_BASE):v$(VERSION)
MODEL_SERVER_IMG ?= ghcr.io/ml-operator/model-server:v$(VERSION)
STORAGE_INITIALIZER_IMG ?= ghcr.io/ml-operator/storage-initializer:v$(VERSION)
BUNDLE_IMG ?= $(IMAGE_TAG_BASE)-bundle:v$(VERSION)
CATALOG_IMG ?= $(IMAGE_TAG_BASE)-catalog:latest
CHANNELS ?= stable,candidate
DEFAULT_CHANNEL ?= stable
CONTAINER_TOOL ?= docker

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

LOCALBIN ?= $(shell pwd)/bin
STAMPS := $(LOCALBIN)/.stamps
include hack/tools/versions.mk

CONTROLLER_GEN ?= $(LOCALBIN)/controller-gen
KUSTOMIZE      ?= $(LOCALBIN)/kustomize
OPERATOR_SDK   ?= $(LOCALBIN)/operator-sdk
OPM            ?= $(LOCALBIN)/opm
KWOK           ?= $(LOCALBIN)/kwok
KWOKCTL        ?= $(LOCALBIN)/kwokctl
KUBECTL        ?= $(LOCALBIN)/kubectl
CRD_REF_DOCS   ?= $(LOCALBIN)/crd-ref-docs

# envtest finds kube-apiserver, etcd and kubectl here.
export KUBEBUILDER_ASSETS := $(LOCALBIN)

K8S_LDFLAGS := -s -w $(foreach p,k8s.io/component-base/version k8s.io/client-go/pkg/version,\
	-X $(p).gitVersion=v$(K8S_VERSION) -X $(p).gitMajor=$(word 1,$(subst ., ,$(K8S_VERSION))) \
	-X $(p).gitMinor=$(word 2,$(subst ., ,$(K8S_VERSION))) -X $(p).gitTreeState=clean)

# Each test binary gets 30 minutes instead of go test's 10: the real-torch
# trainer package comes close to 10 at a load average of 20.
GO_TEST_FLAGS ?= -timeout 30m

# Tool builds print one line each (hack/build-tool.sh) and log the rest here.
export TOOL_LOG_DIR := $(LOCALBIN)/.logs
# The tools `make test` and `make run` build on a fresh machine, in the order
# they are built, with the time each took on 2 cores with empty Go caches
# (measured; README "The two commands").
TOOLS_ORDER := kube-apiserver etcd kubectl controller-gen kustomize crd-ref-docs kube-controller-manager kube-scheduler kwok
export TOOLS_TOTAL := $(words $(TOOLS_ORDER))
BUILD_TOOL = $(CURDIR)/hack/build-tool.sh
# $(call build_tool,NAME,VERSION,ESTIMATE) prefixes the build command.
build_tool = STAMP=$@ $(BUILD_TOOL) $(1) $(2) "$(call tool_n,$(1))" "$(3)" --
tool_n = $(if $(filter $(1),$(TOOLS_ORDER)),$(call tool_pos,$(1)) of $(TOOLS_TOTAL),$(if $(filter $(1),$(REAL_NODE_TOOLS)),for the real node,not needed by make test or make run))
# What the real node (make run NODE=real, make e2e-real) builds on top.
REAL_NODE_TOOLS := kubelet kube-proxy coredns prometheus
tool_pos = $(strip $(foreach i,$(shell seq $(TOOLS_TOTAL)),$(if $(filter $(1),$(word $(i),$(TOOLS_ORDER))),$(i))))

.PHONY: all
all: build

##@ General

.PHONY: help
help: ## Display this help.
	@awk 'BEGIN {FS = ":.*##"; printf "\nUsage:\n  make \033[36m<target>\033[0m\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-22s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) } ' $(MAKEFILE_LIST)

##@ Development

.PHONY: manifests
manifests: controller-gen ## Generate CRDs, RBAC and webhook manifests into config/.
	$(CONTROLLER_GEN) rbac:roleName=manager-role crd:allowDangerousTypes=true webhook paths="./api/..." paths="./controllers/..." paths="./webhooks/..." output:crd:artifacts:config=config/crd/bases

.PHONY: generate
generate: controller-gen ## Generate DeepCopy methods.
	$(CONTROLLER_GEN) object:headerFile="hack/boilerplate.go.txt" paths="./api/..."

.PHONY: fmt
fmt: ## Run go fmt.
	go fmt ./...

.PHONY: go-mod-download
go-mod-download: $(STAMPS)/go-mod-download ## Download the project's Go modules (once per go.sum; quietly, into a log).
$(STAMPS)/go-mod-download: go.mod go.sum | $(STAMPS)
	@mkdir -p $(TOOL_LOG_DIR)
	@echo "downloading the project's Go modules (about 1 min the first time; log: $(TOOL_LOG_DIR)/go-mod-download.log)"
	@go mod download -x >$(TOOL_LOG_DIR)/go-mod-download.log 2>&1 || { \
		echo "go mod download failed; the last lines of $(TOOL_LOG_DIR)/go-mod-download.log:" >&2; \
		tail -n 25 $(TOOL_LOG_DIR)/go-mod-download.log | sed 's/^/  | /' >&2; exit 1; }
	@touch $@

.PHONY: vet
vet: ## Run go vet.
	go vet ./...

# Coverage is measured over the operator's own code: the API, the controllers,
# the webhooks and the integrations they call (generated DeepCopy excluded).
COVERPKG ?= ./api/...,./controllers/...,./webhooks/...,./internal/integrations/...
COVER_MIN ?= 75

.PHONY: test
test: envtest-tools controller-gen kustomize crd-ref-docs go-mod-download vet ## Run vet, then the unit and envtest suites built with the race detector (RACE); writes cover.out and lists what did not run.
	@go build -o $(LOCALBIN)/testsummary ./hack/testsummary
	@rc=0; \
	TESTUTIL_TIMEOUT=$${TESTUTIL_TIMEOUT:-$(if $(RACE),30s,10s)} $(if $(RACE),CGO_ENABLED=1 )go test $(RACE) -vet=off -ldflags=-w $(RACE_PKGS) -json -coverpkg=$(COVERPKG) -coverprofile=cover.all.out $(GO_TEST_FLAGS) | $(LOCALBIN)/testsummary || rc=1; \
	echo "without the race detector: $(NORACE_PKGS)"; \
	go test -vet=off -ldflags=-w $(NORACE_PKGS) -json $(GO_TEST_FLAGS) | $(LOCALBIN)/testsummary || rc=1; \
	exit $$rc
	@grep -v 'zz_generated' cover.all.out > cover.out && rm -f cover.all.out
	@echo "coverage of api/, controllers/, webhooks/, internal/integrations/: $$(go tool cover -func=cover.out | awk '/^total:/ {print $$3}')"

# The test binaries are linked without DWARF (-ldflags=-w): nothing reads
# it, and writing it is a large part of linking some 40 race-built binaries.
# One pass does both: every package is built with the race detector and
# with coverage (covermode atomic), so any data race fails `make test`.
# It replaced a second, race-only pass over the same suites (make
# test-race) that cost a cold CI run 15 minutes (docs/decisions.md, "One
# test pass"). `make test RACE=` runs them without it, faster. The race
# detector needs cgo, so this pass turns it on even where the rest of the
# build has it off (.ci/run: CGO_ENABLED=0 for everything else).
RACE ?= -race

# -vet=off: the vet prerequisite (go vet ./...) has run every analyzer go
# test would. NORACE_PKGS are tested in a second go test without the race
# detector or coverage: the harnesses of the real node and cert-manager
# (and the commands that only wrap them) and the static checks. They run no
# concurrent Go code of ours (the harnesses' concurrency is the programs
# they start), they cover none of COVERPKG, and the race build of the
# harnesses would compile some 300 packages that nothing else in the race
# pass links (cert-manager's controllers, go-containerregistry, parts of
# k8s.io/apiserver) a second time: the end-to-end suites compile them once,
# without it (docs/decisions.md, "A cold CI run under an hour").
NORACE_PKGS ?= ./internal/certmanager/... ./internal/realnode/... ./cmd/realnode/... ./hack/imagedigests/... ./test/static/...
RACE_PKGS = $(filter-out $(shell go list $(NORACE_PKGS)),$(shell go list ./...))

.PHONY: coverage-check
coverage-check: ## Fail when cover.out (from make test) is below COVER_MIN percent.
	@total=$$(go tool cover -func=cover.out | awk '/^total:/ {sub("%","",$$3); print $$3}'); \
	echo "coverage $$total% (minimum $(COVER_MIN)%)"; \
	awk -v t="$$total" -v m="$(COVER_MIN)" 'BEGIN { exit !(t+0 >= m+0) }' || { echo "coverage below $(COVER_MIN)%"; exit 1; }

.PHONY: build
build: go-mod-download ## Build the manager binary.
	go build -o bin/manager ./cmd

##@ Tools

.PHONY: tools
tools: envtest-tools cluster-tools controller-gen kustomize operator-sdk opm ## Build every tool into bin/.

.PHONY: ci-tools
ci-tools: envtest-tools controller-gen kustomize crd-ref-docs go-mod-download ## What both of .ci/run's parallel streams need, built once before they start.

.PHONY: envtest-tools
envtest-tools: $(STAMPS)/kube-apiserver-$(K8S_VERSION) $(STAMPS)/etcd-$(ETCD_VERSION) $(STAMPS)/kubectl-$(K8S_VERSION) ## kube-apiserver, etcd, kubectl for envtest.

.PHONY: cluster-tools
cluster-tools: envtest-tools $(STAMPS)/kube-controller-manager-$(K8S_VERSION) $(STAMPS)/kube-scheduler-$(K8S_VERSION) $(STAMPS)/kwok-$(KWOK_VERSION) ## Everything the local kwok cluster needs.

$(STAMPS):
	mkdir -p $@

# The Kubernetes binaries, etcd and kwok are built from their modules under
# hack/tools, each in a Go workspace (its go.work) with the project's own
# module: the workspace resolves every shared dependency (client-go,
# apimachinery, grpc, otel, ...) at the project's version, so Go's build
# cache compiles it once for the tools and the project together. Their
# go.mod files stay out of the project's, whose importers would otherwise
# inherit k8s.io/kubernetes's unresolvable v0.0.0 requirements
# (docs/decisions.md, "A cold CI run under an hour").
define k8s_tool
$$(STAMPS)/$(1)-$$(K8S_VERSION): | $$(STAMPS)
	@cd hack/tools/k8s && $$(call build_tool,$(1),v$$(K8S_VERSION),$(2)) env GONOSUMDB=k8s.io go build -ldflags "$$(K8S_LDFLAGS)" -o $$(LOCALBIN)/$(1) k8s.io/kubernetes/cmd/$(1)
	@touch $$@
endef
$(eval $(call k8s_tool,kube-apiserver,$(EST_KUBE_APISERVER)))
$(eval $(call k8s_tool,kube-controller-manager,$(EST_KUBE_CONTROLLER_MANAGER)))
$(eval $(call k8s_tool,kube-scheduler,$(EST_KUBE_SCHEDULER)))
$(eval $(call k8s_tool,kubectl,$(EST_KUBECTL)))
$(eval $(call k8s_tool,kubelet,$(EST_KUBELET)))
$(eval $(call k8s_tool,kube-proxy,$(EST_KUBE_PROXY)))

$(STAMPS)/etcd-$(ETCD_VERSION): | $(STAMPS)
	@cd hack/tools/etcd && $(call build_tool,etcd,v$(ETCD_VERSION),$(EST_ETCD)) go build -o $(LOCALBIN)/etcd .
	@touch $@

$(STAMPS)/kwok-$(KWOK_VERSION): | $(STAMPS)
	@cd hack/tools/kwok && $(call build_tool,kwok,$(KWOK_VERSION),$(EST_KWOK)) go build -o $(LOCALBIN)/ sigs.k8s.io/kwok/cmd/kwok sigs.k8s.io/kwok/cmd/kwokctl
	@touch $@

.PHONY: controller-gen
controller-gen: $(STAMPS)/controller-gen-$(CONTROLLER_GEN_VERSION) ## controller-gen.
$(STAMPS)/controller-gen-$(CONTROLLER_GEN_VERSION): | $(STAMPS)
	@$(call build_tool,controller-gen,$(CONTROLLER_GEN_VERSION),$(EST_CONTROLLER_GEN)) env GOBIN=$(LOCALBIN) go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)
	@touch $@

.PHONY: kustomize
kustomize: $(STAMPS)/kustomize-$(KUSTOMIZE_VERSION) ## kustomize.
$(STAMPS)/kustomize-$(KUSTOMIZE_VERSION): | $(STAMPS)
	@$(call build_tool,kustomize,$(KUSTOMIZE_VERSION),$(EST_KUSTOMIZE)) env GOBIN=$(LOCALBIN) go install sigs.k8s.io/kustomize/kustomize/v5@$(KUSTOMIZE_VERSION)
	@touch $@

.PHONY: crd-ref-docs
crd-ref-docs: $(STAMPS)/crd-ref-docs-$(CRD_REF_DOCS_VERSION) ## crd-ref-docs.
$(STAMPS)/crd-ref-docs-$(CRD_REF_DOCS_VERSION): | $(STAMPS)
	@$(call build_tool,crd-ref-docs,$(CRD_REF_DOCS_VERSION),$(EST_CRD_REF_DOCS)) env GOBIN=$(LOCALBIN) go install github.com/elastic/crd-ref-docs@$(CRD_REF_DOCS_VERSION)
	@touch $@

# One build command for the binaries of the operator-sdk module, so that the
# second one compiles nothing the first did not.
OPSDK_GO_BUILD = env CGO_ENABLED=0 GONOSUMDB=github.com/operator-framework,k8s.io GOFLAGS=-mod=mod go build -tags containers_image_openpgp

.PHONY: operator-sdk
operator-sdk: $(STAMPS)/operator-sdk-$(OPERATOR_SDK_VERSION) ## operator-sdk (built from hack/tools/opsdk).
$(STAMPS)/operator-sdk-$(OPERATOR_SDK_VERSION): | $(STAMPS)
	@cd hack/tools/opsdk && $(call build_tool,operator-sdk,$(OPERATOR_SDK_VERSION),about 4 min) $(OPSDK_GO_BUILD) \
		-ldflags "-X github.com/operator-framework/operator-sdk/internal/version.Version=$(OPERATOR_SDK_VERSION) -X github.com/operator-framework/operator-sdk/internal/version.GitVersion=$(OPERATOR_SDK_VERSION) -X github.com/operator-framework/operator-sdk/internal/version.KubernetesVersion=v1.28.0" \
		-o $(LOCALBIN)/operator-sdk github.com/operator-framework/operator-sdk/cmd/operator-sdk
	@touch $@

# The scorecard's test image's binary (images/scorecard-test of the same
# operator-sdk module), static: make e2e-olm runs the scorecard with it.
.PHONY: scorecard-test
scorecard-test: $(STAMPS)/scorecard-test-$(OPERATOR_SDK_VERSION) ## scorecard-test, the scorecard's test binary (built from hack/tools/opsdk).
$(STAMPS)/scorecard-test-$(OPERATOR_SDK_VERSION): | $(STAMPS)
	@cd hack/tools/opsdk && $(call build_tool,scorecard-test,$(OPERATOR_SDK_VERSION),about 1 min) $(OPSDK_GO_BUILD) \
		-o $(LOCALBIN)/scorecard-test github.com/operator-framework/operator-sdk/images/scorecard-test
	@touch $@

.PHONY: opm
opm: $(STAMPS)/opm-$(OPM_VERSION) ## opm (built from hack/tools/opm).
$(STAMPS)/opm-$(OPM_VERSION): | $(STAMPS)
	@cd hack/tools/opm && $(call build_tool,opm,$(OPM_VERSION),about 80 s) env GONOSUMDB=github.com/operator-framework,k8s.io go build -tags json1,containers_image_openpgp \
		-ldflags "-X github.com/operator-framework/operator-registry/cmd/opm/version.gitCommit=$(OPM_VERSION) -X github.com/operator-framework/operator-registry/cmd/opm/version.opmVersion=$(OPM_VERSION)" \
		-o $(LOCALBIN)/opm github.com/operator-framework/operator-registry/cmd/opm
	@touch $@

# Feature areas add their targets in hack/mk/*.mk.
-include hack/mk/*.mk
