# Tool versions: the one place they are pinned.
# Tools installed with `go install module@version` are pinned here; tools that
# need a module of their own (replace lines, build tags, a Go workspace with
# the project's module) are pinned in the go.mod under hack/tools/<name>/ (or,
# for Prometheus, the project's go.mod) and their version is repeated here
# only to name the stamp that skips a rebuild.
K8S_VERSION            ?= 1.36.3
ETCD_VERSION           ?= 3.6.8
CONTROLLER_GEN_VERSION ?= v0.23.0
KUSTOMIZE_VERSION      ?= v5.8.2
KWOK_VERSION           ?= v0.8.0
OPERATOR_SDK_VERSION   ?= v1.34.1
OPM_VERSION            ?= v1.60.0
CRD_REF_DOCS_VERSION   ?= v0.3.0
COREDNS_VERSION        ?= v1.14.7
# The real node's registry comes from Debian's docker-registry package
# (hack/realnode/debian-binary.sh): the suite the machine's apt sources
# serve (bookworm: 2.8.2). This names its stamp; the exact package version
# is written beside the binary (bin/registry.version).
REGISTRY_VERSION       ?= debian-bookworm
# The Prometheus server the real-node suite deploys (make prometheus): the
# module version of Prometheus 3.12.0, a `tool` of the project's go.mod,
# which requires it for the PromQL engine its tests evaluate the analysis
# presets with.
PROMETHEUS_VERSION     ?= v0.312.0
# The benchmark's peer (make bench; docs/benchmarks.md), built unmodified.
TRAINING_OPERATOR_VERSION ?= v1.9.2

# How long each tool took to build on 2 cores with empty Go caches (module
# downloads included), printed before it is built (hack/build-tool.sh).
EST_KUBE_APISERVER          ?= about 5 min
EST_ETCD                    ?= about 1 min
EST_KUBECTL                 ?= about 1 min
EST_CONTROLLER_GEN          ?= about 1 min
EST_KUSTOMIZE               ?= about 1 min
EST_CRD_REF_DOCS            ?= about 30 s
EST_KUBE_CONTROLLER_MANAGER ?= about 1 min
EST_KUBE_SCHEDULER          ?= about 1 min
EST_KWOK                    ?= about 2 min
EST_KUBELET                 ?= about 6 min
EST_KUBE_PROXY              ?= about 1 min
EST_COREDNS                 ?= about 10 min
# Prometheus: on top of the project's own compilation (it shares it), not alone.
EST_PROMETHEUS              ?= about 3 min
# training-operator: 32 min measured once, niced, with the machine's other
# work at load 15-20; not measured on an idle machine.
EST_TRAINING_OPERATOR       ?= about 30 min under load
