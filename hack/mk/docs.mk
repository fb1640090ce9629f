##@ Docs

# The one place the crd-ref-docs arguments live: `make docs` and the
# staleness test in test/static/docs (which sets DOCS_OUT to a temp file) both use it.
DOCS_OUT ?= docs/crd-reference.md
# The rules table of docs/admission.md is generated from the invalid-manifest
# corpus; it is written next to DOCS_OUT, so a DOCS_OUT in a temp dir leaves
# docs/ alone (test/static/docs/admission_rules_test.go compares the two).
ADMISSION_DOC_OUT ?= $(dir $(DOCS_OUT))admission.md

.PHONY: docs
docs: crd-ref-docs ## Generate docs/crd-reference.md from the Go types in api/ and the rules table of docs/admission.md from test/testdata/invalid (override the outputs with DOCS_OUT).
	$(CRD_REF_DOCS) --source-path=./api --config=hack/crd-ref-docs/config.yaml \
		--renderer=markdown --output-mode=single --output-path=$(DOCS_OUT)
	go run ./hack/gen-admission-rules -corpus test/testdata/invalid -doc docs/admission.md -out $(ADMISSION_DOC_OUT)
