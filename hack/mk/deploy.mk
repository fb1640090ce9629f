# Install/deploy targets: owned by the packaging work (issue 8).

##@ Deployment

.PHONY: install
install: kustomize ## Install the CRDs into the cluster in your kubeconfig.
	$(KUSTOMIZE) build config/crd | kubectl apply --server-side -f -

.PHONY: uninstall
uninstall: kustomize ## Remove the CRDs (and with them every TrainingJob and ModelDeployment).
	$(KUSTOMIZE) build config/crd | kubectl delete --ignore-not-found -f -
