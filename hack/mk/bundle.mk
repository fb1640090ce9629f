# OLM bundle, file-based catalog and images: owned by the packaging work (issue 8).
# docs/install.md describes the release procedure these targets implement.

BUNDLE_CHANNELS ?= --channels=$(CHANNELS)
BUNDLE_DEFAULT_CHANNEL ?= --default-channel=$(DEFAULT_CHANNEL)
BUNDLE_METADATA_OPTS ?= $(BUNDLE_CHANNELS) $(BUNDLE_DEFAULT_CHANNEL)
BUNDLE_GEN_FLAGS ?= -q --overwrite --version $(VERSION) $(BUNDLE_METADATA_OPTS)
# operator-sdk v1.34's marker parser predates controller-tools' CEL markers
# (fieldPath, messageExpression) and fails on api/; the CSV descriptors are
# kept in the CSV base instead, so it is pointed at an empty API directory.
OLM_NO_APIS := tmp/olm-no-apis
# The catalog: one directory per package, with a template of channel entries
# and one rendered bundle per released version (docs/install.md, release procedure).
CATALOG_DIR ?= catalog
CATALOG_PACKAGE_DIR := $(CATALOG_DIR)/ml-operator
# IMG split into repository and tag (a registry host may carry a :port).
IMG_TAG = $(lastword $(subst :, ,$(IMG)))
IMG_REPO = $(patsubst %:$(IMG_TAG),%,$(IMG))
# The images the project builds are named by digest in the CSV and the
# catalog (disconnected clusters mirror by digest): `make bundle` replaces
# IMG and STORAGE_INITIALIZER_IMG by repository@digest, and `make
# catalog-add` BUNDLE_IMG. The digests are those of the images as
# internal/images builds them from this tree (hack/imagedigests), the
# images the real node runs; docs/install.md, release procedure.
# PIN_DIGESTS=0 keeps the tags (for images built another way, whose
# digests are not these).
PIN_DIGESTS ?= 1
IMAGE_DIGESTS = go run ./hack/imagedigests
# repo_of drops the tag of an image name.
repo_of = $(patsubst %:$(lastword $(subst :, ,$(1))),%,$(1))

# The overlay `make bundle` builds: config/manifests with the manager image
# set to IMG, and RELATED_IMAGE_MANAGER (which generate bundle turns into the
# CSV's relatedImages entry) copied from it.
define BUNDLE_KUSTOMIZATION
resources:
- ../../config/manifests
images:
- name: $(IMAGE_TAG_BASE)
  newName: $(IMG_REPO)
  newTag: $(IMG_TAG)
replacements:
- source:
    kind: Deployment
    name: ml-operator-controller-manager
    fieldPath: spec.template.spec.containers.[name=manager].image
  targets:
  - select:
      kind: Deployment
      name: ml-operator-controller-manager
    fieldPaths:
    - spec.template.spec.containers.[name=manager].env.[name=RELATED_IMAGE_MANAGER].value
  - select:
      kind: ClusterServiceVersion
    fieldPaths:
    - metadata.annotations.containerImage
$(if $(PREVIOUS_VERSION),$(CSV_REPLACES_PATCH))
endef
# spec.replaces of the CSV: the previous release, as the channel entries say.
define CSV_REPLACES_PATCH
patches:
- target:
    kind: ClusterServiceVersion
  patch: |-
    - op: add
      path: /spec/replaces
      value: ml-operator.v$(PREVIOUS_VERSION)
endef

##@ Bundle and catalog

.PHONY: bundle
bundle: manifests kustomize operator-sdk ## Generate and validate bundle/ and bundle.Dockerfile for VERSION (and IMG).
	$(shell mkdir -p $(OLM_NO_APIS) tmp/bundle-kustomize)
	$(OPERATOR_SDK) generate kustomize manifests -q --interactive=false --apis-dir $(OLM_NO_APIS)
	$(file >tmp/bundle-kustomize/kustomization.yaml,$(BUNDLE_KUSTOMIZATION))
	@if [ "$(PIN_DIGESTS)" = 1 ]; then \
		echo "digests of $(IMG) and $(STORAGE_INITIALIZER_IMG) as built from this tree (hack/imagedigests)"; \
		$(IMAGE_DIGESTS) manager . > tmp/bundle-kustomize/manager.digest; \
		$(IMAGE_DIGESTS) storage-initializer . > tmp/bundle-kustomize/storage-initializer.digest; \
	fi
	$(KUSTOMIZE) build tmp/bundle-kustomize \
		$(if $(filter 1,$(PIN_DIGESTS)),| sed -e "s|$(IMG)|$(IMG_REPO)@$$(cat tmp/bundle-kustomize/manager.digest)|g" \
			-e "s|$(STORAGE_INITIALIZER_IMG)|$(call repo_of,$(STORAGE_INITIALIZER_IMG))@$$(cat tmp/bundle-kustomize/storage-initializer.digest)|g") \
		| $(OPERATOR_SDK) generate bundle $(BUNDLE_GEN_FLAGS)
	$(OPERATOR_SDK) bundle validate ./bundle --select-optional suite=operatorframework

.PHONY: bundle-validate
bundle-validate: operator-sdk ## Validate bundle/ with operator-sdk's operatorframework suite (no regeneration).
	$(OPERATOR_SDK) bundle validate ./bundle --select-optional suite=operatorframework

.PHONY: catalog-add
catalog-add: opm ## Render bundle/ into the catalog as VERSION (image BUNDLE_IMG); then add it to the channels (docs/install.md).
	@grep -q '^  version: $(VERSION)$$' bundle/manifests/ml-operator.clusterserviceversion.yaml || { echo "bundle/ is not version $(VERSION): run make bundle VERSION=$(VERSION) first"; exit 1; }
	$(OPM) render ./bundle --output yaml \
		| sed -e 's|^image: ""|image: $(BUNDLE_IMG)|' > $(CATALOG_PACKAGE_DIR)/bundle-v$(VERSION).yaml
	@grep -q '^image: $(BUNDLE_IMG)$$' $(CATALOG_PACKAGE_DIR)/bundle-v$(VERSION).yaml || { echo "image not set in rendered bundle"; exit 1; }
	@if [ "$(PIN_DIGESTS)" = 1 ]; then \
		digest=$$($(IMAGE_DIGESTS) bundle $(CATALOG_PACKAGE_DIR)/bundle-v$(VERSION).yaml ml-operator.v$(VERSION) bundle/metadata/annotations.yaml) && \
		sed -i -e "s|^image: $(BUNDLE_IMG)$$|image: $(call repo_of,$(BUNDLE_IMG))@$$digest|" $(CATALOG_PACKAGE_DIR)/bundle-v$(VERSION).yaml && \
		echo "bundle image pinned: $(call repo_of,$(BUNDLE_IMG))@$$digest"; \
	fi

.PHONY: catalog-validate
catalog-validate: opm ## Validate the file-based catalog with opm.
	$(OPM) validate $(CATALOG_DIR)

##@ Images (need a container engine; not run on the build machines without one)

.PHONY: docker-build
docker-build: ## Build the manager image IMG.
	$(CONTAINER_TOOL) build --build-arg VERSION=$(VERSION) -t $(IMG) .

.PHONY: docker-push
docker-push: ## Push the manager image IMG.
	$(CONTAINER_TOOL) push $(IMG)

.PHONY: docker-build-model-server
docker-build-model-server: ## Build the model server image MODEL_SERVER_IMG from model-server.Dockerfile (the real node builds it without an engine).
	$(CONTAINER_TOOL) build -f model-server.Dockerfile --build-arg VERSION=$(VERSION) -t $(MODEL_SERVER_IMG) .

.PHONY: docker-build-storage-initializer
docker-build-storage-initializer: ## Build the storage initializer image STORAGE_INITIALIZER_IMG from storage-initializer.Dockerfile (the real node builds it without an engine).
	$(CONTAINER_TOOL) build -f storage-initializer.Dockerfile --build-arg VERSION=$(VERSION) -t $(STORAGE_INITIALIZER_IMG) .

.PHONY: bundle-build
bundle-build: ## Build the bundle image BUNDLE_IMG from bundle.Dockerfile.
	$(CONTAINER_TOOL) build -f bundle.Dockerfile -t $(BUNDLE_IMG) .

.PHONY: bundle-push
bundle-push: ## Push the bundle image BUNDLE_IMG.
	$(CONTAINER_TOOL) push $(BUNDLE_IMG)

.PHONY: catalog-build
catalog-build: opm catalog-validate ## Build the catalog image CATALOG_IMG from catalog/ (opm serve base image).
	rm -f $(CATALOG_DIR).Dockerfile
	$(OPM) generate dockerfile $(CATALOG_DIR) --builder-image quay.io/operator-framework/opm:$(OPM_VERSION) --base-image quay.io/operator-framework/opm:$(OPM_VERSION)
	$(CONTAINER_TOOL) build -f $(CATALOG_DIR).Dockerfile -t $(CATALOG_IMG) .

.PHONY: catalog-push
catalog-push: ## Push the catalog image CATALOG_IMG.
	$(CONTAINER_TOOL) push $(CATALOG_IMG)
