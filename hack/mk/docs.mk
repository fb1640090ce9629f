##@ Docs

# The one place the crd-ref-docs arguments live: `make docs` and the
# staleness test in test/docs (which sets DOCS_OUT to a temp file) both use it.
DOCS_OUT ?= docs/crd-reference.md

.PHONY: docs
docs: crd-ref-docs ## Generate docs/crd-reference.md from the Go types in api/ (override the output with DOCS_OUT).
	$(CRD_REF_DOCS) --source-path=./api --config=hack/crd-ref-docs/config.yaml \
		--renderer=markdown --output-mode=single --output-path=$(DOCS_OUT)
