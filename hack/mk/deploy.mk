# Install/deploy targets: owned by the packaging work (issue 8).
# They talk to the cluster in your kubeconfig; docs/install.md explains them.

# bin/kubectl when `make envtest-tools` built it, else the one on PATH.
DEPLOY_KUBECTL ?= $(or $(wildcard $(KUBECTL)),kubectl)
# What `make deploy` installs: config/default, or an overlay such as
# config/overlays/monitoring (adds the ServiceMonitor, alerts and dashboard).
DEPLOY_DIR ?= config/default
# Extra flags for the kubectl delete of undeploy/uninstall (e.g. --wait=false).
DELETE_FLAGS ?=

# The overlay deploy/undeploy build: DEPLOY_DIR with the manager image set to IMG.
define DEPLOY_KUSTOMIZATION
resources:
- ../../$(DEPLOY_DIR)
images:
- name: $(IMAGE_TAG_BASE)
  newName: $(IMG_REPO)
  newTag: $(IMG_TAG)
endef

# The same without the CRDs, so undeploy leaves them (and with them every
# TrainingJob, ModelDeployment and checkpoint) in place.
define UNDEPLOY_KUSTOMIZATION
resources:
- ../../$(DEPLOY_DIR)
patches:
- patch: |-
    $$patch: delete
    apiVersion: apiextensions.k8s.io/v1
    kind: CustomResourceDefinition
    metadata:
      name: trainingjobs.ml.example.com
- patch: |-
    $$patch: delete
    apiVersion: apiextensions.k8s.io/v1
    kind: CustomResourceDefinition
    metadata:
      name: modeldeployments.ml.example.com
endef

##@ Deployment

.PHONY: install
install: kustomize ## Install the CRDs into the cluster in your kubeconfig.
	$(KUSTOMIZE) build config/crd | $(DEPLOY_KUBECTL) apply --server-side --force-conflicts -f -

.PHONY: uninstall
uninstall: kustomize ## Remove the CRDs, and with them every TrainingJob and ModelDeployment (checkpoint PVCs with retainOnDelete stay).
	$(KUSTOMIZE) build config/crd | $(DEPLOY_KUBECTL) delete --ignore-not-found $(DELETE_FLAGS) -f -

.PHONY: deploy-manifests
deploy-manifests: kustomize ## Print what `make deploy` would apply (DEPLOY_DIR with IMG).
	$(shell mkdir -p tmp/deploy)
	$(file >tmp/deploy/kustomization.yaml,$(DEPLOY_KUSTOMIZATION))
	@$(KUSTOMIZE) build tmp/deploy

.PHONY: deploy
deploy: kustomize ## Deploy the operator (DEPLOY_DIR, default config/default) with image IMG; needs cert-manager.
	$(shell mkdir -p tmp/deploy)
	$(file >tmp/deploy/kustomization.yaml,$(DEPLOY_KUSTOMIZATION))
	$(KUSTOMIZE) build tmp/deploy | $(DEPLOY_KUBECTL) apply --server-side --force-conflicts -f -

.PHONY: undeploy
undeploy: kustomize ## Remove the operator but keep the CRDs and all custom resources (then `make uninstall` removes those).
	$(shell mkdir -p tmp/undeploy)
	$(file >tmp/undeploy/kustomization.yaml,$(UNDEPLOY_KUSTOMIZATION))
	$(KUSTOMIZE) build tmp/undeploy | $(DEPLOY_KUBECTL) delete --ignore-not-found $(DELETE_FLAGS) -f -
