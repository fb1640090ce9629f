# make e2e: owned by the local-cluster work (issue 7).

##@ End to end

E2E_FLAGS ?=
E2E_TIMEOUT ?= 20m
# The tests mostly wait on the cluster, so they run side by side even on 2
# cores (go test's default is GOMAXPROCS at a time).
E2E_PARALLEL ?= 16

.PHONY: e2e
e2e: cluster-tools ## End-to-end suite (test/e2e) against a local kwok cluster it starts and stops itself; then e2e-native.
	go test -tags e2e ./test/e2e/ -count=1 -timeout $(E2E_TIMEOUT) -parallel $(E2E_PARALLEL) -v -skip '^TestNativeGang' $(E2E_FLAGS) 2>&1 | \
		grep -E --line-buffered -v '^=== (RUN|PAUSE|CONT)'
	$(MAKE) --no-print-directory e2e-native

# The TestNativeGang tests need the control plane started with Kubernetes'
# native gang scheduling gates: a second run of the suite, with a cluster of
# its own (-gang=native), and only those tests.
E2E_NATIVE_FLAGS ?=
.PHONY: e2e-native
e2e-native: cluster-tools ## The end-to-end tests of native gang scheduling (TestNativeGang*), on a local cluster started with its feature gates.
	go test -tags e2e ./test/e2e/ -count=1 -timeout $(E2E_TIMEOUT) -v -run '^TestNativeGang' $(E2E_NATIVE_FLAGS) -args -gang=native 2>&1 | \
		grep -E --line-buffered -v '^=== (RUN|PAUSE|CONT)'
