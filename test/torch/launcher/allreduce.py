"""Forms the process group from the environment torchrun sets up from the
operator's PET_* variables, all-reduces each rank's (rank + 1), and checks the
sum. Exits non-zero on any mismatch."""
import os
import sys

import torch
import torch.distributed as dist


def main():
    dist.init_process_group(backend=os.environ.get("BACKEND", "gloo"))
    rank, world = dist.get_rank(), dist.get_world_size()
    expected_world = int(os.environ["EXPECTED_WORLD_SIZE"])
    if world != expected_world:
        print(f"rank {rank}: world size {world}, want {expected_world}", file=sys.stderr)
        return 1
    t = torch.tensor([float(rank + 1)])
    dist.all_reduce(t)
    want = world * (world + 1) / 2
    if t.item() != want:
        print(f"rank {rank}: all_reduce gave {t.item()}, want {want}", file=sys.stderr)
        return 1
    print(f"rank {rank}/{world} node_rank {os.environ.get('GROUP_RANK')} all_reduce={t.item()} ok", flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
