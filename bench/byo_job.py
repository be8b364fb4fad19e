#!/usr/bin/env python3
"""The jobs bench/byo_bench submits: a user's PyTorch code on Embody, one subcommand per goal.

  init    prints the wall clock (ns) when the interpreter starts and when init_process_group
          returned: submit -> every rank through the env:// rendezvous.
  ddp     a 2-layer MLP under DistributedDataParallel (gloo), blocks of steps with embody.report
          and without it interleaved (ABBA) in one run; each rank ends printing a SHA-256 of its
          parameters, so equal hashes mean bitwise-equal ranks.
  resume  the same kind of model trained for --steps; with --hold-at N the first attempt waits
          after step N until it is asked to stop (preemption), checkpoints through the SDK and
          exits 143; a restarted attempt resumes from embody.resume_path().
  read    embody.data streaming a dataset: samples/s of ds.samples() in this process, with its
          CPU seconds, the process's cgroup CPU limit and the CPUs its affinity allows, and of a
          DataLoader over ds.torch() with --workers worker processes (0: none).

Every subcommand prints its figures as one line "BYO <json>" (rank 0, or per rank where noted).
"""
import time

T_START_NS = time.time_ns()  # before anything heavy is imported

import argparse  # noqa: E402
import gc  # noqa: E402
import hashlib  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402


def emit(**fields) -> None:
    print("BYO " + json.dumps(fields), flush=True)


def init_group():
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method="env://")
    return dist


def leave_group(dist, mlp=None) -> None:
    """Destroys the process group after the DDP wrapper that holds it is gone, while the caller
    still holds every tensor it gave to a collective. PyTorch 1.13's gloo group joins its worker
    threads holding the GIL; a worker that is just then dropping the last reference to a tensor
    whose Python object is gone needs the GIL to free it, and both wait forever."""
    if mlp is not None:
        mlp.ddp = None
        gc.collect()
    dist.destroy_process_group()


def cmd_init(_args) -> int:
    import torch  # noqa: F401  (what a training script imports first)
    t_imported = time.time_ns()
    dist = init_group()
    t_init = time.time_ns()
    emit(what="init", rank=dist.get_rank(), start_ns=T_START_NS, imported_ns=t_imported,
         init_ns=t_init)
    dist.destroy_process_group()
    return 0


class Mlp:
    """A 2-layer MLP regression with fixed per-rank batches: the step is pure compute + one
    gradient all-reduce, the same on every run."""

    def __init__(self, args, rank: int):
        import torch
        import torch.nn as nn
        from torch.nn.parallel import DistributedDataParallel
        torch.set_num_threads(1)
        torch.manual_seed(args.seed)
        self.torch = torch
        self.model = nn.Sequential(nn.Linear(args.inputs, args.hidden), nn.Tanh(),
                                   nn.Linear(args.hidden, args.outputs))
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=args.lr)
        self.args = args
        self.rank = rank
        self.ddp = None
        self.DistributedDataParallel = DistributedDataParallel
        # A target function the MLP can learn, so the loss falls.
        g = torch.Generator().manual_seed(args.seed + 1)
        self.w_true = torch.randn(args.inputs, args.outputs, generator=g) / args.inputs ** 0.5

    def wrap(self) -> None:
        self.ddp = self.DistributedDataParallel(self.model)

    def batch(self, step: int):
        # A function of (seed, rank, step) only: a resumed run sees the batches it would have.
        g = self.torch.Generator().manual_seed((self.args.seed * 1000003 + step) * 64 + self.rank)
        x = self.torch.randn(self.args.batch, self.args.inputs, generator=g)
        return x, self.torch.tanh(x @ self.w_true)

    def step(self, x, y) -> float:
        loss = ((self.ddp(x) - y) ** 2).mean()
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        return loss.item()

    def digest(self) -> str:
        h = hashlib.sha256()
        for p in self.model.parameters():
            h.update(p.detach().contiguous().numpy().tobytes())
        return h.hexdigest()


def cmd_ddp(args) -> int:
    import embody
    dist = init_group()
    rank = dist.get_rank()
    mlp = Mlp(args, rank)
    mlp.wrap()
    batches = [mlp.batch(i) for i in range(8)]
    step = 0
    for _ in range(args.warmup):
        mlp.step(*batches[step % 8])
        step += 1
    # ABBA: off on on off, repeated, so a drift in the machine's speed cancels out.
    pattern = [False, True, True, False]
    seconds = {False: 0.0, True: 0.0}
    cpu = {False: 0.0, True: 0.0}  # this process's CPU time, the SDK's sender thread included
    steps = {False: 0, True: 0}
    in_report = 0.0
    calls = 0
    pairs = []  # per ABBA quad: time with report / time without
    quad = {False: 0.0, True: 0.0}
    for block in range(args.blocks):
        on = pattern[block % 4]
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(args.block_steps):
            x, y = batches[step % 8]
            loss = mlp.step(x, y)
            if on:
                r0 = time.perf_counter()
                embody.report(step=step, loss=loss, lr=args.lr)
                in_report += time.perf_counter() - r0
                calls += 1
            step += 1
        if on:
            embody.flush()  # the block pays for delivering its own events
        dt = time.perf_counter() - t0
        cpu[on] += time.process_time() - c0
        seconds[on] += dt
        steps[on] += args.block_steps
        quad[on] += dt
        if block % 4 == 3:
            pairs.append(quad[True] / quad[False])
            quad = {False: 0.0, True: 0.0}
    # Every rank's parameters, after the same all-reduced gradients.
    emit(what="ddp", rank=rank, sha256=mlp.digest(), loss=loss, steps=step)
    if rank == 0:
        pairs.sort()
        emit(what="report_overhead", step_ms_off=seconds[False] / steps[False] * 1e3,
             step_ms_on=seconds[True] / steps[True] * 1e3,
             ratio=(seconds[True] / steps[True]) / (seconds[False] / steps[False]),
             ratio_quad_median=pairs[len(pairs) // 2] if pairs else None,
             ratio_quad_min=pairs[0] if pairs else None,
             ratio_quad_max=pairs[-1] if pairs else None,
             cpu_ms_off=cpu[False] / steps[False] * 1e3, cpu_ms_on=cpu[True] / steps[True] * 1e3,
             cpu_ratio=(cpu[True] / steps[True]) / (cpu[False] / steps[False]),
             report_call_us=in_report / max(calls, 1) * 1e6, calls=calls)
    embody.flush()
    leave_group(dist, mlp)
    return 0


def cmd_resume(args) -> int:
    import embody
    import torch
    dist = init_group()
    rank = dist.get_rank()
    mlp = Mlp(args, rank)
    start = 1
    state = [None]
    if rank == 0 and (path := embody.resume_path()) is not None:
        state[0] = torch.load(path, map_location="cpu")
    dist.broadcast_object_list(state, src=0)
    resumed = state[0] is not None
    if resumed:
        mlp.model.load_state_dict(state[0]["model"])
        mlp.optimizer.load_state_dict(state[0]["optimizer"])
        start = state[0]["step"] + 1
        if rank == 0:
            print(f"resumed from step {state[0]['step']}", flush=True)
    mlp.wrap()
    loss = float("nan")

    def save(step: int) -> None:
        if rank == 0:
            with embody.checkpoint_file(step, metrics={"loss": loss}) as path:
                torch.save({"step": step, "model": mlp.model.state_dict(),
                            "optimizer": mlp.optimizer.state_dict()}, path)

    flag = torch.zeros(2)  # every vote's tensor, alive until the group is gone (leave_group)

    def agreed_stop(give_up: bool = False) -> bool:
        # Every rank leaves together: a SIGTERM (or the hold's deadline) reaches them apart.
        flag[0], flag[1] = float(embody.should_stop()), float(give_up)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        if flag[1].item() > 0:
            raise SystemExit(f"not preempted within {args.hold_seconds} s of step {args.hold_at}")
        return flag[0].item() > 0

    embody.install_sigterm_handler()
    for step in range(start, args.steps + 1):
        loss = mlp.step(*mlp.batch(step))
        embody.report(step=step, loss=loss)
        stop = agreed_stop()
        if not stop and not resumed and step == args.hold_at:
            # Wait here to be preempted, so the stop lands on this step on every run.
            print(f"holding at step {step}", flush=True)
            deadline = time.monotonic() + args.hold_seconds
            while not stop:
                time.sleep(0.05)
                stop = agreed_stop(time.monotonic() > deadline)
        if stop:
            save(step)
            print(f"stopped at step {step}", flush=True)
            leave_group(dist, mlp)
            return embody.STOPPED_EXIT_CODE
    save(args.steps)
    if rank == 0:
        emit(what="resume", final_loss=loss, resumed=resumed, start=start,
             sha256=mlp.digest())
    embody.flush()
    leave_group(dist, mlp)
    return 0


def cpu_limit():
    """The CPUs this process's cgroup may use (cgroup v2 cpu.max, v1 cfs_quota_us over
    cfs_period_us), or None when it has no limit or none can be read."""
    try:
        with open("/proc/self/cgroup") as f:
            entries = [line.rstrip("\n").split(":", 2) for line in f]
    except OSError:
        return None
    for _, controllers, path in entries:
        try:
            if controllers == "":
                with open(f"/sys/fs/cgroup{path}/cpu.max") as f:
                    quota, period = f.read().split()
            elif "cpu" in controllers.split(","):
                base = f"/sys/fs/cgroup/{controllers}{path}"
                with open(base + "/cpu.cfs_quota_us") as f, open(base + "/cpu.cfs_period_us") as g:
                    quota, period = f.read().strip(), g.read().strip()
            else:
                continue
            if quota not in ("max", "-1"):
                return int(quota) / int(period)
        except (OSError, ValueError):
            continue
    return None


def cmd_read(args) -> int:
    import embody
    ds = embody.data.open(args.dataset)
    n = ds.num_samples
    # One pass in this process, in the order embody-engine's loader reads (Partition of epoch 0).
    t0, c0 = time.perf_counter(), time.process_time()
    count = 0
    nbytes = 0
    for s in ds.samples(rank=0, world_size=1, epoch=0):
        count += 1
        nbytes += s.action_chunk.nbytes
    plain_s = time.perf_counter() - t0
    # CPU seconds of every thread of this process: over plain_s, the cores the read kept busy
    # (at most the cgroup's CPU limit and the cores the affinity allows).
    plain_cpu_s = time.process_time() - c0
    fields = {"what": "read", "samples": n, "plain_samples": count, "plain_seconds": plain_s,
              "plain_cpu_seconds": plain_cpu_s, "plain_samples_per_s": count / plain_s,
              "cpu_limit": cpu_limit(), "cpus_allowed": len(os.sched_getaffinity(0))}
    if args.workers > 0:
        import torch  # noqa: F401
        from torch.utils.data import DataLoader
        loader = DataLoader(ds.torch(rank=0, world_size=1), batch_size=args.batch,
                            num_workers=args.workers)
        t0 = time.perf_counter()
        count = 0
        for b in loader:
            count += int(b["index"].shape[0])
        loader_s = time.perf_counter() - t0
        fields.update(loader_workers=args.workers, loader_samples=count,
                      loader_seconds=loader_s, loader_samples_per_s=count / loader_s)
    emit(**fields)
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("init")
    for name in ("ddp", "resume"):
        q = sub.add_parser(name)
        q.add_argument("--inputs", type=int, default=64)
        q.add_argument("--hidden", type=int, default=512)
        q.add_argument("--outputs", type=int, default=16)
        q.add_argument("--batch", type=int, default=256)
        q.add_argument("--lr", type=float, default=1e-3)
        q.add_argument("--seed", type=int, default=0)
    q = sub.choices["ddp"]
    q.add_argument("--warmup", type=int, default=20)
    q.add_argument("--blocks", type=int, default=16, help="a multiple of 4 (ABBA)")
    q.add_argument("--block-steps", type=int, default=150)
    q = sub.choices["resume"]
    q.add_argument("--steps", type=int, default=100)
    q.add_argument("--hold-at", type=int, default=0, help="0: never hold")
    q.add_argument("--hold-seconds", type=float, default=120)
    q = sub.add_parser("read")
    q.add_argument("--dataset", required=True)
    q.add_argument("--workers", type=int, default=2)
    q.add_argument("--batch", type=int, default=32)
    args = p.parse_args()
    return {"init": cmd_init, "ddp": cmd_ddp, "resume": cmd_resume, "read": cmd_read}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
