# OLM for real (issue 21): `make e2e-olm` installs the operator from the
# project's file-based catalog with OLM v0.38.0 on the real node
# (internal/realnode), the way a cluster admin does. OLM's own binaries and
# manifests come from its Go module (hack/tools/olm); the images are built
# here without a container engine (internal/images). hack/tools/olm and
# hack/tools/opm are Go workspaces with the project (their go.work), so
# OLM's and opm's dependencies build at the project's versions and Go's
# build cache compiles what they share with the project once
# (test/static/tools checks it). docs/install.md §6 and
# docs/local-cluster.md "OLM on the real node".

##@ OLM on the real node

OLM_VERSION ?= v0.38.0
GRPC_HEALTH_PROBE_VERSION ?= v0.4.41
# Static linux/amd64 binaries for the OLM, util, opm and catalog images.
OLM_BIN ?= $(LOCALBIN)/olm-$(OLM_VERSION)
E2E_OLM_TIMEOUT ?= 30m
E2E_OLM_FLAGS ?=

.PHONY: olm-tools
olm-tools: $(STAMPS)/olm-$(OLM_VERSION) $(STAMPS)/opm-static-$(OPM_VERSION) ## OLM's olm, catalog, copy-content, cpb and grpc_health_probe, and a static opm, into bin/olm-v0.38.0/.

$(STAMPS)/olm-$(OLM_VERSION): hack/tools/olm/go.mod | $(STAMPS)
	@mkdir -p $(OLM_BIN)
	@cd hack/tools/olm && $(call build_tool,olm,$(OLM_VERSION),about 3 min) env CGO_ENABLED=0 GONOSUMDB=github.com/operator-framework,k8s.io go build -trimpath -tags json1 \
		-ldflags "-X github.com/operator-framework/operator-lifecycle-manager/pkg/version.OLMVersion=$(patsubst v%,%,$(OLM_VERSION))" \
		-o $(OLM_BIN)/ github.com/operator-framework/operator-lifecycle-manager/cmd/olm github.com/operator-framework/operator-lifecycle-manager/cmd/catalog \
		github.com/operator-framework/operator-lifecycle-manager/cmd/copy-content github.com/operator-framework/operator-lifecycle-manager/util/cpb \
		github.com/grpc-ecosystem/grpc-health-probe
	@mv $(OLM_BIN)/grpc-health-probe $(OLM_BIN)/grpc_health_probe
	@touch $@

# opm without cgo: the images have no C library. Serving a file-based
# catalog needs no SQLite.
$(STAMPS)/opm-static-$(OPM_VERSION): | $(STAMPS)
	@mkdir -p $(OLM_BIN)
	@cd hack/tools/opm && $(call build_tool,opm-static,$(OPM_VERSION),about 1 min) env CGO_ENABLED=0 GONOSUMDB=github.com/operator-framework,k8s.io go build -trimpath -tags json1,containers_image_openpgp \
		-ldflags "-X github.com/operator-framework/operator-registry/cmd/opm/version.gitCommit=$(OPM_VERSION) -X github.com/operator-framework/operator-registry/cmd/opm/version.opmVersion=$(OPM_VERSION)" \
		-o $(OLM_BIN)/opm github.com/operator-framework/operator-registry/cmd/opm
	@touch $@

# OLM's bundle-unpack jobs run /bin/cp from its util image (upstream's is
# distroless with busybox); Debian's static busybox plays that part.
.PHONY: olm-packages
olm-packages:
	@test -x /bin/busybox && dpkg-query -W -f='$${Status}' busybox-static 2>/dev/null | grep -q 'install ok installed' \
		|| { echo "installing busybox-static with apt-get"; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends busybox-static; }

.PHONY: e2e-olm
e2e-olm: node-packages olm-packages node-tools olm-tools operator-sdk scorecard-test ## OLM end to end on the real node (test/e2eolm; root): catalog → Subscription → approved InstallPlan → CSV Succeeded, webhooks with OLM's certificates, conversion, upgrade to 0.2.0 with work in flight, the CSV's samples, the scorecard's descriptor tests, uninstall.
	OLM_BIN=$(OLM_BIN) go test -tags e2e_olm ./test/e2eolm/ -count=1 -timeout $(E2E_OLM_TIMEOUT) -v $(E2E_OLM_FLAGS)
