# TrainingJob controller (issues 3 and 4).

##@ TrainingJob

.PHONY: test-trainingjob
test-trainingjob: ## Run the TrainingJob controller's unit, envtest, metrics and real-launcher tests.
	go test $(GO_TEST_FLAGS) ./controllers/trainingjob/... ./test/torch/launcher/... ./test/torch/trainer/...

.PHONY: run-example-trainer
run-example-trainer: ## Run the example trainer locally under Debian's torchrun (one rank, 3 epochs).
	PET_NNODES=1 PET_NPROC_PER_NODE=1 PET_NODE_RANK=0 PET_MASTER_ADDR=127.0.0.1 PET_MASTER_PORT=29500 \
	PET_REDIRECTS=1 PET_TEE=1 HYPERPARAM_EPOCHS=3 CHECKPOINT_DIR=$$(mktemp -d) \
	/usr/bin/torchrun test/torch/trainer/train.py
