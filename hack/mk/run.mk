# make run: owned by the local-cluster work (issue 7).

##@ Run

.PHONY: run
run: ## Run the manager on this machine against the cluster in your kubeconfig.
	go run ./cmd --leader-elect=false --metrics-secure=false --metrics-bind-address=:8080 --enable-webhooks=false
