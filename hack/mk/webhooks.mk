# Admission webhooks (issue 5).

##@ Webhooks

WEBHOOK_FUZZ_TARGETS := FuzzTrainingJobDefaulter FuzzTrainingJobValidator FuzzModelDeploymentDefaulter FuzzModelDeploymentValidator
FUZZTIME ?= 30s

.PHONY: fuzz-webhooks
fuzz-webhooks: ## Fuzz every webhook defaulter and validator for FUZZTIME each (their seed corpus runs in make test).
	@for t in $(WEBHOOK_FUZZ_TARGETS); do \
		echo "fuzzing $$t for $(FUZZTIME)"; \
		go test ./webhooks -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) || exit 1; \
	done
