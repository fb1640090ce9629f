#!/usr/bin/env python3
"""Example ml-operator trainer (PyTorch, DistributedDataParallel).

It follows the operator's contract (docs/trainingjob.md):

* Rendezvous: run it under torchrun; the operator's PET_* variables configure
  torchrun, which sets RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT for
  init_process_group. The backend is gloo without GPUs, nccl with them.
* Hyperparameters: HYPERPARAM_<KEY> (epochs, learningRate, batchSize, and
  epochSeconds, an artificial per-epoch delay for demos and tests).
* Flags: the operator's default launch command (docs/trainingjob.md, "The
  default launch command") runs it as /app/train.py with --model=,
  --dataset=, --<key>=<value> per hyperparameter and --checkpoint-dir=; a
  flag wins over the variable of the same setting. The model and dataset
  are only named in the log: the model is a linear regression on synthetic
  data, whatever they say.
* Checkpoints: every CHECKPOINT_FREQUENCY epochs rank 0 writes
  $CHECKPOINT_DIR/epoch-<N> (atomically) and keeps the last
  CHECKPOINT_KEEP_LAST. When RESUME_FROM_CHECKPOINT names a checkpoint, the
  model and optimizer are restored from it and training continues at the
  next epoch.
* Progress: rank 0 serves the gauges training_epoch, training_total_epochs,
  training_loss, training_accuracy, training_throughput_samples_per_second,
  training_checkpoint_epoch and training_checkpoint_timestamp_seconds in the
  Prometheus text format on METRICS_PORT (default 8000), path /metrics.
"""
import glob
import os
import re
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel


def env_int(name, default):
    value = os.environ.get(name, "")
    return int(float(value)) if value else default


def env_float(name, default):
    value = os.environ.get(name, "")
    return float(value) if value else default


def checkpoint_epoch(path):
    m = re.search(r"epoch-(\d+)$", path)
    return int(m.group(1)) if m else -1


def save_checkpoint(directory, epoch, model, optimizer, keep_last):
    os.makedirs(directory, exist_ok=True)
    final = os.path.join(directory, f"epoch-{epoch}")
    tmp = final + ".tmp"
    torch.save({"epoch": epoch, "model": model.state_dict(), "optimizer": optimizer.state_dict()}, tmp)
    os.replace(tmp, final)  # a crash never leaves a half-written checkpoint
    existing = sorted(glob.glob(os.path.join(directory, "epoch-*")), key=checkpoint_epoch)
    existing = [p for p in existing if checkpoint_epoch(p) >= 0]
    for old in existing[:-keep_last]:
        os.remove(old)
    return final


def serve_metrics(port):
    from prometheus_client import Gauge, start_http_server

    gauges = {
        name: Gauge(name, help_text)
        for name, help_text in [
            ("training_epoch", "Last completed epoch."),
            ("training_total_epochs", "Epochs to train."),
            ("training_loss", "Training loss of the last epoch."),
            ("training_accuracy", "Share of predictions within tolerance."),
            ("training_throughput_samples_per_second", "Samples per second over the last epoch."),
            ("training_checkpoint_epoch", "Epoch of the latest checkpoint."),
            ("training_checkpoint_timestamp_seconds", "Unix time the latest checkpoint was written."),
        ]
    }
    start_http_server(port)
    return gauges


def parse_flags(argv):
    """--name=value flags: model, dataset, checkpoint-dir, and the rest as
    hyperparameters by their key as written (--learningRate=0.001)."""
    settings, hyperparameters = {}, {}
    for arg in argv:
        if not arg.startswith("--") or "=" not in arg:
            raise SystemExit(f"train.py: {arg!r} is not --name=value")
        name, value = arg[2:].split("=", 1)
        if name in ("model", "dataset", "checkpoint-dir"):
            settings[name] = value
        else:
            hyperparameters[name.upper()] = value
    return settings, hyperparameters


def main():
    settings, flags = parse_flags(sys.argv[1:])
    for key, value in flags.items():
        os.environ["HYPERPARAM_" + key] = value
    if "checkpoint-dir" in settings:
        os.environ["CHECKPOINT_DIR"] = settings["checkpoint-dir"]
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    dist.init_process_group(backend=backend)
    rank, world = dist.get_rank(), dist.get_world_size()

    epochs = env_int("HYPERPARAM_EPOCHS", 10)
    lr = env_float("HYPERPARAM_LEARNINGRATE", 0.05)
    batch = env_int("HYPERPARAM_BATCHSIZE", 64)
    epoch_seconds = env_float("HYPERPARAM_EPOCHSECONDS", 0.0)
    ckpt_dir = os.environ.get("CHECKPOINT_DIR", "")
    frequency = max(1, env_int("CHECKPOINT_FREQUENCY", 1))
    keep_last = max(1, env_int("CHECKPOINT_KEEP_LAST", 3))
    resume = os.environ.get("RESUME_FROM_CHECKPOINT", "")

    if rank == 0:
        print(f"rank 0: model {settings.get('model', os.environ.get('MODEL', ''))!r}, "
              f"dataset {settings.get('dataset', os.environ.get('DATASET', ''))!r}, "
              f"{epochs} epochs, checkpoints in {ckpt_dir!r}", flush=True)

    torch.manual_seed(0)
    model = DistributedDataParallel(torch.nn.Linear(1, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)

    start_epoch = 1
    if resume:
        if os.path.exists(resume):
            state = torch.load(resume)
            model.module.load_state_dict(state["model"])
            optimizer.load_state_dict(state["optimizer"])
            start_epoch = state["epoch"] + 1
            print(f"rank {rank}: resumed from checkpoint epoch {state['epoch']} ({resume})", flush=True)
        else:
            print(f"rank {rank}: RESUME_FROM_CHECKPOINT {resume} does not exist; starting over", flush=True)

    gauges = serve_metrics(env_int("METRICS_PORT", 8000)) if rank == 0 else None
    if gauges:
        gauges["training_total_epochs"].set(epochs)
        if start_epoch > 1:
            gauges["training_epoch"].set(start_epoch - 1)
            gauges["training_checkpoint_epoch"].set(start_epoch - 1)

    # Synthetic data, y = 3x + 2, a different shard per rank.
    gen = torch.Generator().manual_seed(rank)
    x = torch.rand(1024, 1, generator=gen)
    y = 3 * x + 2

    loss_fn = torch.nn.MSELoss()
    for epoch in range(start_epoch, epochs + 1):
        started = time.time()
        print(f"rank {rank}: epoch {epoch}/{epochs} started", flush=True)
        for i in range(0, len(x), batch):
            optimizer.zero_grad()
            loss = loss_fn(model(x[i:i + batch]), y[i:i + batch])
            loss.backward()  # DDP all-reduces the gradients across ranks
            optimizer.step()
        if epoch_seconds:
            time.sleep(epoch_seconds)
        with torch.no_grad():
            pred = model(x)
            loss = loss_fn(pred, y).item()
            accuracy = ((pred - y).abs() < 0.1).float().mean().item()
        print(f"rank {rank}: epoch {epoch}/{epochs} done loss={loss:.4f}", flush=True)
        if rank == 0:
            if ckpt_dir and epoch % frequency == 0:
                path = save_checkpoint(ckpt_dir, epoch, model.module, optimizer, keep_last)
                print(f"rank 0: checkpoint {path}", flush=True)
                gauges["training_checkpoint_epoch"].set(epoch)
                gauges["training_checkpoint_timestamp_seconds"].set(time.time())
            gauges["training_epoch"].set(epoch)
            gauges["training_loss"].set(loss)
            gauges["training_accuracy"].set(accuracy)
            gauges["training_throughput_samples_per_second"].set(len(x) / max(time.time() - started, 1e-9))
        dist.barrier()

    print(f"rank {rank}: training complete epochs={epochs}", flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
