#!/usr/bin/env python3
"""Behaviour cloning with PyTorch DDP on an Embody dataset, written as a PyTorch user writes it.

An MLP maps each frame's low-dimensional observations (every 1-D float key but the actions) to
the action at that frame. Every rank trains on its part of the dataset (DistributedSampler),
gradients are averaged by DistributedDataParallel over gloo (nccl where the job has GPUs).

What Embody adds is five calls of the `embody` SDK, which every job's python3 imports:
  embody.data.open("dataset:NAME")  the dataset the job's spec names ("datasets")
  embody.report(step=..., loss=...) the step's numbers, charted in the dashboard
  embody.checkpoint_file(step)      a checkpoint the agent uploads to the blob store
  embody.resume_path()              the checkpoint a restarted or preempted attempt starts from
  embody.should_stop()              preemption, cancel or time limit: finish the step, save, exit

Runs the same under Embody's mpirun launcher, under torchrun ("launcher": "torchrun"), and on a
laptop with `torchrun --nproc_per_node 2 train_bc.py --dataset dir:/path/to/dataset`.
"""
import argparse
import gc
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, Dataset, DistributedSampler

import embody


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dataset", default="dataset:demo", help="dataset:NAME[@V] or dir:PATH")
    p.add_argument("--steps", type=int, default=200, help="optimizer steps in all")
    p.add_argument("--batch-size", type=int, default=16, help="samples per rank per step")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--checkpoint-every", type=int, default=50, help="steps; 0: only at the end")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--log-every", type=int, default=10)
    return p.parse_args()


class Frames(Dataset):
    """(observation, action) of every frame: the map-style view DistributedSampler needs."""

    def __init__(self, ref: str):
        self.data = embody.data.open(ref)
        self.obs_keys = [k.name for k in self.data.keys
                         if k.name != "actions" and k.dtype in ("f32", "f64") and len(k.shape) == 1]
        if not self.obs_keys:
            raise SystemExit(f"{ref}: no low-dimensional float observation keys")
        self.obs_dim = sum(self.data.key(k).shape[0] for k in self.obs_keys)
        self.action_dim = self.data.key("actions").shape[0]

    def __len__(self) -> int:
        return self.data.num_samples

    def __getitem__(self, i: int):
        s = self.data.read_sample(i, keys=self.obs_keys)
        obs = torch.cat([torch.as_tensor(s.values[k], dtype=torch.float32).reshape(-1)
                         for k in self.obs_keys])
        return obs, torch.as_tensor(s.action_chunk[0], dtype=torch.float32)


def main() -> int:
    args = parse_args()
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    dist.init_process_group(backend, init_method="env://")  # MASTER_ADDR, RANK, ... from Embody
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0))) if backend == "nccl" \
        else torch.device("cpu")
    torch.manual_seed(args.seed)

    frames = Frames(args.dataset)
    sampler = DistributedSampler(frames, num_replicas=world, rank=rank, shuffle=True,
                                 seed=args.seed, drop_last=True)
    loader = DataLoader(frames, batch_size=args.batch_size, sampler=sampler, drop_last=True)
    steps_per_epoch = len(loader)
    if steps_per_epoch == 0:
        raise SystemExit(f"{len(frames)} samples make no batch of {args.batch_size} on {world} ranks")

    print(f"rank {rank} of {world}: {len(sampler)} samples per epoch, {steps_per_epoch} steps",
          flush=True)

    model = nn.Sequential(nn.Linear(frames.obs_dim, args.hidden), nn.Tanh(),
                          nn.Linear(args.hidden, frames.action_dim)).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)

    # A restarted or preempted attempt continues where the last checkpoint left off. Only rank 0
    # reads it (the file is on its node) and hands the state to the others.
    start, loss_value = 0, float("nan")
    state = [None]
    if rank == 0 and (path := embody.resume_path()) is not None:
        state[0] = torch.load(path, map_location="cpu")
        print(f"resuming from {path} (step {state[0]['step']})", flush=True)
    dist.broadcast_object_list(state, src=0)
    if state[0] is not None:
        model.load_state_dict(state[0]["model"])
        optimizer.load_state_dict(state[0]["optimizer"])
        start = state[0]["step"] + 1
        loss_value = state[0]["loss"]
    ddp = DistributedDataParallel(model)

    def save(step: int) -> None:
        if rank == 0:
            with embody.checkpoint_file(step, metrics={"loss": loss_value}) as path:
                torch.save({"step": step, "loss": loss_value, "model": model.state_dict(),
                            "optimizer": optimizer.state_dict()}, path)

    loss_fn = nn.MSELoss()
    step = start
    epoch = start // steps_per_epoch
    code = 0
    # Every step's vote on stopping goes through this one tensor, alive until the process group
    # is gone (see the end of main).
    stop = torch.zeros(1)
    loss = None
    t0 = time.perf_counter()
    while step < args.steps and code == 0:
        sampler.set_epoch(epoch)  # the same order as an undisturbed run, also after a resume
        for i, (obs, action) in enumerate(loader):
            if epoch * steps_per_epoch + i < step:
                continue  # the batches this epoch trained on before the restart
            loss = loss_fn(ddp(obs.to(device)), action.to(device))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            loss_value = loss.item()
            embody.report(step=step, steps=args.steps, loss=loss_value, lr=args.lr,
                          samples_per_s=args.batch_size * world / max(time.perf_counter() - t0, 1e-9))
            t0 = time.perf_counter()
            if rank == 0 and step % args.log_every == 0:
                print(f"step {step} loss {loss_value:.6f}", flush=True)
            # Every rank leaves the loop at the same step: a SIGTERM reaches them at slightly
            # different moments.
            stop.fill_(float(embody.should_stop()))
            dist.all_reduce(stop, op=dist.ReduceOp.MAX)
            last = step == args.steps - 1
            if stop.item() > 0 or last or (args.checkpoint_every and
                                           step % args.checkpoint_every == 0 and step > 0):
                save(step)
            if stop.item() > 0:
                print(f"stopped at step {step}", flush=True)
                code = embody.STOPPED_EXIT_CODE
                break
            step += 1
            if step >= args.steps:
                break
        epoch += 1
    if rank == 0 and code == 0:
        print(f"done: step {args.steps - 1} loss {loss_value:.9g}", flush=True)
    embody.flush()
    # The wrapper holds the process group: dropped first, so that the group dies inside
    # destroy_process_group() while `stop` still lives. PyTorch 1.13's gloo group joins its worker
    # threads holding the GIL; a worker that is just then dropping the last reference to a
    # collective's tensor whose Python object is gone needs the GIL to free it, and both wait
    # forever (a rank that hangs after its last step, one exit in a few under load).
    del ddp, loss
    gc.collect()
    dist.destroy_process_group()
    return code


if __name__ == "__main__":
    sys.exit(main())
