# Admission webhooks (issue 5).

##@ Webhooks

.PHONY: fuzz-webhooks
fuzz-webhooks: ## Fuzz only the webhook targets (validation, defaulting, undecodable values), FUZZ_TIME executions each.
	$(call fuzz-run,$(FUZZ_TIME),./webhooks/rules:%)
