# ml-operator Makefile (operator-sdk go/v4 layout).
#
# Everything is built from the Go module proxy into bin/; nothing is
# downloaded from anywhere else. Run `make help` for the targets.

VERSION ?= 0.2.0
IMAGE_TAG_BASE ?= ghcr.io/ml-operator/ml-operator
IMG ?= $(IMAGE_TAG_BASE):v$(VERSION)
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

K8S_LDFLAGS := $(foreach p,k8s.io/component-base/version k8s.io/client-go/pkg/version,\
	-X $(p).gitVersion=v$(K8S_VERSION) -X $(p).gitMajor=$(word 1,$(subst ., ,$(K8S_VERSION))) \
	-X $(p).gitMinor=$(word 2,$(subst ., ,$(K8S_VERSION))) -X $(p).gitTreeState=clean)

GO_TEST_FLAGS ?=

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

.PHONY: vet
vet: ## Run go vet.
	go vet ./...

# Coverage is measured over the operator's own code (generated DeepCopy excluded).
COVERPKG ?= ./api/...,./controllers/...,./webhooks/...
COVER_MIN ?= 75

.PHONY: test
test: envtest-tools controller-gen kustomize crd-ref-docs vet ## Run vet, unit tests and envtest suites (real kube-apiserver + etcd from bin/); writes cover.out.
	go test ./... -coverpkg=$(COVERPKG) -coverprofile=cover.all.out $(GO_TEST_FLAGS)
	@grep -v 'zz_generated' cover.all.out > cover.out && rm -f cover.all.out
	@echo "coverage of api/, controllers/, webhooks/: $$(go tool cover -func=cover.out | awk '/^total:/ {print $$3}')"

.PHONY: coverage-check
coverage-check: ## Fail when cover.out (from make test) is below COVER_MIN percent.
	@total=$$(go tool cover -func=cover.out | awk '/^total:/ {sub("%","",$$3); print $$3}'); \
	echo "coverage $$total% (minimum $(COVER_MIN)%)"; \
	awk -v t="$$total" -v m="$(COVER_MIN)" 'BEGIN { exit !(t+0 >= m+0) }' || { echo "coverage below $(COVER_MIN)%"; exit 1; }

.PHONY: build
build: ## Build the manager binary.
	go build -o bin/manager ./cmd

##@ Tools

.PHONY: tools
tools: envtest-tools cluster-tools controller-gen kustomize operator-sdk opm ## Build every tool into bin/.

.PHONY: envtest-tools
envtest-tools: $(STAMPS)/kube-apiserver-$(K8S_VERSION) $(STAMPS)/etcd-$(ETCD_VERSION) $(STAMPS)/kubectl-$(K8S_VERSION) ## kube-apiserver, etcd, kubectl for envtest.

.PHONY: cluster-tools
cluster-tools: envtest-tools $(STAMPS)/kube-controller-manager-$(K8S_VERSION) $(STAMPS)/kube-scheduler-$(K8S_VERSION) $(STAMPS)/kwok-$(KWOK_VERSION) ## Everything the local kwok cluster needs.

$(STAMPS):
	mkdir -p $@

define k8s_tool
$$(STAMPS)/$(1)-$$(K8S_VERSION): | $$(STAMPS)
	@echo "building $(1) v$$(K8S_VERSION) into $$(LOCALBIN) (hack/tools/k8s)"
	cd hack/tools/k8s && GONOSUMDB=k8s.io GOFLAGS=-mod=mod go build -ldflags "$$(K8S_LDFLAGS)" -o $$(LOCALBIN)/$(1) k8s.io/kubernetes/cmd/$(1)
	touch $$@
endef
$(foreach t,kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet kube-proxy,$(eval $(call k8s_tool,$(t))))

$(STAMPS)/etcd-$(ETCD_VERSION): | $(STAMPS)
	cd hack/tools/etcd && GOFLAGS=-mod=mod go build -o $(LOCALBIN)/etcd .
	touch $@

$(STAMPS)/kwok-$(KWOK_VERSION): | $(STAMPS)
	GOBIN=$(LOCALBIN) go install sigs.k8s.io/kwok/cmd/kwok@$(KWOK_VERSION) sigs.k8s.io/kwok/cmd/kwokctl@$(KWOK_VERSION)
	touch $@

.PHONY: controller-gen
controller-gen: $(STAMPS)/controller-gen-$(CONTROLLER_GEN_VERSION) ## controller-gen.
$(STAMPS)/controller-gen-$(CONTROLLER_GEN_VERSION): | $(STAMPS)
	GOBIN=$(LOCALBIN) go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)
	touch $@

.PHONY: kustomize
kustomize: $(STAMPS)/kustomize-$(KUSTOMIZE_VERSION) ## kustomize.
$(STAMPS)/kustomize-$(KUSTOMIZE_VERSION): | $(STAMPS)
	GOBIN=$(LOCALBIN) go install sigs.k8s.io/kustomize/kustomize/v5@$(KUSTOMIZE_VERSION)
	touch $@

.PHONY: crd-ref-docs
crd-ref-docs: $(STAMPS)/crd-ref-docs-$(CRD_REF_DOCS_VERSION) ## crd-ref-docs.
$(STAMPS)/crd-ref-docs-$(CRD_REF_DOCS_VERSION): | $(STAMPS)
	GOBIN=$(LOCALBIN) go install github.com/elastic/crd-ref-docs@$(CRD_REF_DOCS_VERSION)
	touch $@

.PHONY: operator-sdk
operator-sdk: $(STAMPS)/operator-sdk-$(OPERATOR_SDK_VERSION) ## operator-sdk (built from hack/tools/opsdk).
$(STAMPS)/operator-sdk-$(OPERATOR_SDK_VERSION): | $(STAMPS)
	cd hack/tools/opsdk && GONOSUMDB=github.com/operator-framework,k8s.io GOFLAGS=-mod=mod go build -tags containers_image_openpgp \
		-ldflags "-X github.com/operator-framework/operator-sdk/internal/version.Version=$(OPERATOR_SDK_VERSION) -X github.com/operator-framework/operator-sdk/internal/version.GitVersion=$(OPERATOR_SDK_VERSION) -X github.com/operator-framework/operator-sdk/internal/version.KubernetesVersion=v1.28.0" \
		-o $(LOCALBIN)/operator-sdk github.com/operator-framework/operator-sdk/cmd/operator-sdk
	touch $@

.PHONY: opm
opm: $(STAMPS)/opm-$(OPM_VERSION) ## opm (built from hack/tools/opm).
$(STAMPS)/opm-$(OPM_VERSION): | $(STAMPS)
	cd hack/tools/opm && GONOSUMDB=github.com/operator-framework GOFLAGS=-mod=mod go build -tags json1,containers_image_openpgp \
		-ldflags "-X github.com/operator-framework/operator-registry/cmd/opm/version.gitCommit=$(OPM_VERSION) -X github.com/operator-framework/operator-registry/cmd/opm/version.opmVersion=$(OPM_VERSION)" \
		-o $(LOCALBIN)/opm github.com/operator-framework/operator-registry/cmd/opm
	touch $@

# Feature areas add their targets in hack/mk/*.mk.
-include hack/mk/*.mk
