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
* Checkpoints: every CHECKPOINT_FREQUENCY epochs rank 0 writes the
  directory $CHECKPOINT_DIR/epoch-<N> (state.pt, then the completion marker
  COMPLETE, a JSON line with the epoch, step and CHECKPOINT_ATTEMPT that
  wrote it) and keeps the last CHECKPOINT_KEEP_LAST complete ones. On SIGTERM
  (the operator ending the gang, a drain, an eviction), or when a collective
  fails because a peer went away, rank 0 saves the last completed step as
  $CHECKPOINT_DIR/step-<S> the same way and the process exits 143.
* Resume: from the complete checkpoint with the highest step among
  RESUME_FROM_CHECKPOINT (the newest the operator saw) and those in
  CHECKPOINT_DIR (a checkpoint saved at SIGTERM is newer: its pod was gone
  before the operator's next scrape). A checkpoint without its marker (torn
  by a kill mid-write) is never used. Training continues at the step after
  the saved one, mid-epoch if need be.
* Progress: rank 0 serves the gauges training_epoch, training_total_epochs,
  training_step (steps done, across attempts), training_loss,
  training_accuracy, training_throughput_samples_per_second,
  training_checkpoint_epoch, training_checkpoint_timestamp_seconds,
  training_checkpoint_attempt and, for a step-<S> checkpoint,
  training_checkpoint_step in the Prometheus text format on METRICS_PORT
  (default 8000), path /metrics.
* Hang (for tests of spec.failurePolicy.stallTimeout): hyperparameters
  hangRank and hangAtStep make that rank, in attempt hangAttempt (default
  0), call all_reduce at that step in a group no other rank uses, which
  never returns; every other rank then blocks in its next gradient
  all_reduce.
"""
import glob
import json
import os
import re
import shutil
import signal
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


MARKER = "COMPLETE"


def read_marker(path):
    """The marker of a complete checkpoint directory, None when it has none."""
    try:
        with open(os.path.join(path, MARKER)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def save_checkpoint(directory, name, meta, model, optimizer):
    """Writes directory/name: the state, then the completion marker. A kill
    before the marker leaves a directory no one resumes from."""
    final = os.path.join(directory, name)
    tmp = final + ".tmp-" + str(os.getpid())
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), **meta}, os.path.join(tmp, "state.pt"))
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)
    with open(os.path.join(final, MARKER + ".tmp"), "w") as f:
        json.dump(meta, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(os.path.join(final, MARKER + ".tmp"), os.path.join(final, MARKER))
    return final


def complete_checkpoints(directory):
    """(step, path, meta) of every complete checkpoint in directory, oldest first."""
    found = []
    for path in glob.glob(os.path.join(directory, "epoch-*")) + glob.glob(os.path.join(directory, "step-*")):
        if not re.search(r"/(epoch|step)-\d+$", path):
            continue
        meta = read_marker(path)
        if meta is not None:
            found.append((meta["step"], path, meta))
    return sorted(found, key=lambda c: c[0])


def prune(directory, keep_last):
    """Keeps the keep_last newest complete checkpoints; removes older ones
    and torn ones (no marker) older than the newest complete one."""
    complete = complete_checkpoints(directory)
    for _, path, _ in complete[:-keep_last]:
        shutil.rmtree(path, ignore_errors=True)
    if complete:
        newest = os.path.getmtime(complete[-1][1])
        for path in glob.glob(os.path.join(directory, "epoch-*")) + glob.glob(os.path.join(directory, "step-*")):
            if read_marker(path) is None and os.path.getmtime(path) < newest:
                shutil.rmtree(path, ignore_errors=True)


def resume_point(directory, resume):
    """The checkpoint to resume from: the complete one with the highest step
    among RESUME_FROM_CHECKPOINT and those in the checkpoint directory."""
    candidates = complete_checkpoints(directory) if directory else []
    if resume:
        meta = read_marker(resume)
        if meta is None:
            print(f"RESUME_FROM_CHECKPOINT {resume} is missing or has no completion marker; not used", flush=True)
        else:
            candidates.append((meta["step"], resume, meta))
    if not candidates:
        return None
    return max(candidates, key=lambda c: c[0])


GAUGES = {
    "training_epoch": "Last completed epoch.",
    "training_total_epochs": "Epochs to train.",
    "training_step": "Training steps done, across attempts.",
    "training_loss": "Training loss of the last epoch.",
    "training_accuracy": "Share of predictions within tolerance.",
    "training_throughput_samples_per_second": "Samples per second over the last epoch.",
    "training_checkpoint_epoch": "Epoch of the latest checkpoint.",
    "training_checkpoint_step": "Step of the latest checkpoint, when it was saved mid-epoch (step-<S>).",
    "training_checkpoint_attempt": "Attempt (CHECKPOINT_ATTEMPT) that wrote the latest checkpoint.",
    "training_checkpoint_timestamp_seconds": "Unix time the latest checkpoint was written.",
}


class Progress:
    """Rank 0's progress gauges: only the values set are served."""

    def __init__(self):
        self.values = {}

    def set(self, name, value):
        self.values[name] = float(value)

    def unset(self, name):
        self.values.pop(name, None)

    def collect(self):
        from prometheus_client.core import GaugeMetricFamily

        for name, value in list(self.values.items()):
            yield GaugeMetricFamily(name, GAUGES[name], value=value)


def serve_metrics(port):
    from prometheus_client import REGISTRY, start_http_server

    gauges = Progress()
    REGISTRY.register(gauges)
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


class Stop(Exception):
    """SIGTERM arrived: save and leave."""


def main():
    settings, flags = parse_flags(sys.argv[1:])
    for key, value in flags.items():
        os.environ["HYPERPARAM_" + key] = value
    if "checkpoint-dir" in settings:
        os.environ["CHECKPOINT_DIR"] = settings["checkpoint-dir"]
    stopping = []
    # Installed before the rendezvous: a SIGTERM at any time is honoured at
    # the next step boundary (or when a collective fails because of it).
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    dist.init_process_group(backend=backend)
    rank, world = dist.get_rank(), dist.get_world_size()

    epochs = env_int("HYPERPARAM_EPOCHS", 10)
    lr = env_float("HYPERPARAM_LEARNINGRATE", 0.05)
    batch = env_int("HYPERPARAM_BATCHSIZE", 64)
    epoch_seconds = env_float("HYPERPARAM_EPOCHSECONDS", 0.0)
    hang_rank = env_int("HYPERPARAM_HANGRANK", -1)
    hang_at_step = env_int("HYPERPARAM_HANGATSTEP", -1)
    hang_attempt = env_int("HYPERPARAM_HANGATTEMPT", 0)
    # A group of all ranks that only the hanging rank ever uses: its
    # all_reduce there has no partner and never returns (until the process
    # group's 30-minute timeout), while the others block in their next
    # gradient all_reduce, waiting for it.
    hang_group = dist.new_group(list(range(world))) if hang_rank >= 0 else None
    ckpt_dir = os.environ.get("CHECKPOINT_DIR", "")
    frequency = max(1, env_int("CHECKPOINT_FREQUENCY", 1))
    keep_last = max(1, env_int("CHECKPOINT_KEEP_LAST", 3))
    attempt = env_int("CHECKPOINT_ATTEMPT", 0)
    resume = os.environ.get("RESUME_FROM_CHECKPOINT", "")

    if rank == 0:
        print(f"rank 0: model {settings.get('model', os.environ.get('MODEL', ''))!r}, "
              f"dataset {settings.get('dataset', os.environ.get('DATASET', ''))!r}, "
              f"{epochs} epochs, checkpoints in {ckpt_dir!r}, attempt {attempt}, world size {world}", flush=True)

    torch.manual_seed(0)
    model = DistributedDataParallel(torch.nn.Linear(1, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)

    # Synthetic data, y = 3x + 2, a different shard per rank.
    gen = torch.Generator().manual_seed(rank)
    x = torch.rand(1024, 1, generator=gen)
    y = 3 * x + 2
    steps_per_epoch = (len(x) + batch - 1) // batch

    step = 0  # steps done, across attempts
    point = resume_point(ckpt_dir, resume)
    if point is not None:
        _, path, meta = point
        state = torch.load(os.path.join(path, "state.pt"))
        model.module.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        step = meta["step"]
        print(f"rank {rank}: resumed from checkpoint {os.path.basename(path)} at step {step} "
              f"(epoch {meta['epoch']}, written by attempt {meta['attempt']}) ({path})", flush=True)

    gauges = serve_metrics(env_int("METRICS_PORT", 8000)) if rank == 0 else None
    if gauges:
        gauges.set("training_total_epochs", epochs)
        gauges.set("training_step", step)
        if point is not None:
            meta = point[2]
            gauges.set("training_epoch", step // steps_per_epoch)
            gauges.set("training_checkpoint_epoch", meta["epoch"])
            gauges.set("training_checkpoint_attempt", meta["attempt"])
            if os.path.basename(point[1]).startswith("step-"):
                gauges.set("training_checkpoint_step", meta["step"])

    def save_step_checkpoint(why):
        """Rank 0 saves the last completed step (the same on every rank)."""
        if rank != 0 or not ckpt_dir:
            return
        meta = {"epoch": step // steps_per_epoch, "step": step, "attempt": attempt}
        path = save_checkpoint(ckpt_dir, f"step-{step}", meta, model.module, optimizer)
        print(f"rank 0: {why}: checkpoint {path} step {step} saved", flush=True)

    loss_fn = torch.nn.MSELoss()
    try:
        for epoch in range(step // steps_per_epoch + 1, epochs + 1):
            started = time.time()
            print(f"rank {rank}: epoch {epoch}/{epochs} started at step {step}", flush=True)
            for i in range(step % steps_per_epoch, steps_per_epoch):
                if stopping:
                    raise Stop()
                if step == hang_at_step and rank == hang_rank and attempt == hang_attempt:
                    print(f"rank {rank}: hanging in all_reduce at step {step}", flush=True)
                    dist.all_reduce(torch.zeros(1), group=hang_group)  # no other rank joins: never returns
                optimizer.zero_grad()
                loss = loss_fn(model(x[i * batch:(i + 1) * batch]), y[i * batch:(i + 1) * batch])
                loss.backward()  # DDP all-reduces the gradients across ranks
                optimizer.step()
                step += 1
                if gauges:
                    gauges.set("training_step", step)
                if epoch_seconds:
                    time.sleep(epoch_seconds / steps_per_epoch)
            with torch.no_grad():
                pred = model(x)
                loss = loss_fn(pred, y).item()
                accuracy = ((pred - y).abs() < 0.1).float().mean().item()
            print(f"rank {rank}: epoch {epoch}/{epochs} done loss={loss:.4f}", flush=True)
            if rank == 0:
                if ckpt_dir and epoch % frequency == 0:
                    path = save_checkpoint(ckpt_dir, f"epoch-{epoch}", {"epoch": epoch, "step": step, "attempt": attempt},
                                           model.module, optimizer)
                    prune(ckpt_dir, keep_last)
                    print(f"rank 0: checkpoint {path}", flush=True)
                    gauges.set("training_checkpoint_epoch", epoch)
                    gauges.set("training_checkpoint_attempt", attempt)
                    gauges.unset("training_checkpoint_step")
                    gauges.set("training_checkpoint_timestamp_seconds", time.time())
                gauges.set("training_epoch", epoch)
                gauges.set("training_loss", loss)
                gauges.set("training_accuracy", accuracy)
                gauges.set("training_throughput_samples_per_second", len(x) / max(time.time() - started, 1e-9))
            dist.barrier()
    except Stop:
        save_step_checkpoint("SIGTERM")
        return 143
    except RuntimeError as err:
        # A peer went away mid-collective (its pod was deleted or evicted):
        # the model is still the last completed step's.
        print(f"rank {rank}: collective failed at step {step}: {err}", flush=True)
        save_step_checkpoint("SIGTERM" if stopping else "collective failed")
        return 143 if stopping else 1

    print(f"rank {rank}: training complete epochs={epochs} steps={step}", flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
