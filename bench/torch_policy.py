#!/usr/bin/python3
"""PyTorch reference throughput of the embodied policy transformer on packed data.

The model of docs/design.md ("The engine") at its reference size (d_model 256, 4 layers, 8 heads, MLP 1024,
float32): per-modality embeddings (language ids, 8x8x3 image patches -> linear, 16-float proprio
state -> linear, action x_t -> linear + sinusoidal time features -> linear), a modality embedding
and learned positions that restart in every sample; pre-norm blocks (RMSNorm, multi-head attention
within each sample, RMSNorm, GELU MLP); a final RMSNorm and a flow-matching action head on the 16
action tokens x 7 dims of each sample (loss = mean squared error of v against a - noise over the
action tokens, x_t = (1-t) noise + t a).

Data: the packed plan written by bench/dump_packed_plan (the engine's own loader, so both sides
train on identical rows); content (token ids, patches, states, actions, noise, t) is drawn from each
sample's seed. Two packed forms of the same computation, timed on the same steps:
  mask        every row is one sequence of tokens_per_row slots (padding included) and attention
              uses a block-diagonal mask over the row (torch 1.13 has no scaled_dot_product_attention,
              so it is the explicit softmax(QK^T/sqrt(d) + mask) V);
  per_sample  only real tokens, attention run per sample (a loop over the segments).
Both forms are first checked to give the same loss from the same parameters on the same batch.

Reports the median over --steps timed steps (after --warmup) of real tokens/s of forward +
backward + AdamW step, with torch.set_num_threads(--threads), and one JSON line at the end.

Run with Debian's interpreter (pyenv's python3 has no torch), and for a fair run without the
machine's OpenBLAS overrides:
  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE /usr/bin/python3 bench/torch_policy.py --plan P.json
"""
import argparse
import ctypes
import json
import math
import os
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

PATCH_DIM = 8 * 8 * 3
STATE_DIM = 16
TIME_DIM = 64
PAD, LANGUAGE, IMAGE, STATE, ACTION = 0, 1, 2, 3, 4


class Config:
    d_model = 256
    layers = 4
    heads = 8
    mlp = 1024
    vocab = 512
    max_positions = 512
    action_dim = 7
    action_horizon = 16


def time_features(t):
    """Sinusoidal features of t in [0, 1]: (n,) -> (n, TIME_DIM)."""
    half = TIME_DIM // 2
    freqs = torch.exp(-math.log(10000.0) * torch.arange(half, dtype=torch.float32) / half)
    angles = 1000.0 * t[:, None] * freqs[None, :]
    return torch.cat([torch.sin(angles), torch.cos(angles)], dim=1)


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.heads = c.heads
        self.norm1 = RMSNorm(c.d_model)
        self.qkv = nn.Linear(c.d_model, 3 * c.d_model)
        self.proj = nn.Linear(c.d_model, c.d_model)
        self.norm2 = RMSNorm(c.d_model)
        self.fc1 = nn.Linear(c.d_model, c.mlp)
        self.fc2 = nn.Linear(c.mlp, c.d_model)

    def attention(self, x, batch, form):
        S, C = x.shape
        H, D = self.heads, C // self.heads
        qkv = self.qkv(x).view(S, 3, H, D)
        scale = 1.0 / math.sqrt(D)
        if form == "mask":
            R, T = batch["rows"], batch["T"]
            q, k, v = qkv.view(R, T, 3, H, D).permute(2, 0, 3, 1, 4)  # each (R, H, T, D)
            scores = torch.matmul(q, k.transpose(-1, -2)) * scale  # (R, H, T, T)
            scores = scores.masked_fill(~batch["mask"], float("-inf"))
            out = torch.matmul(torch.softmax(scores, dim=-1), v)  # (R, H, T, D)
            out = out.permute(0, 2, 1, 3).reshape(S, C)
        else:
            q, k, v = qkv.permute(1, 2, 0, 3)  # each (H, S, D)
            # split, not slicing: a slice's backward writes a full-size zero tensor per sample,
            # split's backward is one concatenation.
            lengths = batch["segment_lengths"]
            outs = []
            for qs, ks, vs in zip(q.split(lengths, 1), k.split(lengths, 1), v.split(lengths, 1)):
                s = torch.matmul(qs, ks.transpose(-1, -2)) * scale  # (H, L, L)
                outs.append(torch.matmul(torch.softmax(s, dim=-1), vs))
            out = torch.cat(outs, dim=1).permute(1, 0, 2).reshape(S, C)
        return self.proj(out)

    def forward(self, x, batch, form):
        x = x + self.attention(self.norm1(x), batch, form)
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x)), approximate="tanh"))


class Policy(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.token = nn.Embedding(c.vocab, c.d_model)
        self.patch = nn.Linear(PATCH_DIM, c.d_model)
        self.state = nn.Linear(STATE_DIM, c.d_model)
        self.action = nn.Linear(c.action_dim, c.d_model)
        self.time = nn.Linear(TIME_DIM, c.d_model)
        self.modality = nn.Embedding(5, c.d_model)
        self.position = nn.Embedding(c.max_positions, c.d_model)
        self.blocks = nn.ModuleList([Block(c) for _ in range(c.layers)])
        self.norm = RMSNorm(c.d_model)
        self.head = nn.Linear(c.d_model, c.action_dim)
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)
            if isinstance(m, nn.Linear):
                nn.init.zeros_(m.bias)

    def forward(self, batch, form):
        f = batch[form]
        S = f["slots"]
        # Embed each modality on its own slots, then place them (padding slots stay zero).
        x = torch.zeros(S, self.c.d_model)
        x = x.index_copy(0, f["lang_slot"], self.token(batch["lang_ids"]))
        x = x.index_copy(0, f["img_slot"], self.patch(batch["patches"]))
        x = x.index_copy(0, f["state_slot"], self.state(batch["states"]))
        act = self.action(batch["x_t"]) + self.time(time_features(batch["t_per_action"]))
        x = x.index_copy(0, f["act_slot"], act)
        x = x + (self.modality(f["modality"]) + self.position(f["position"])) * f["real"]
        for block in self.blocks:
            x = block(x, f, form)
        v = self.head(self.norm(x).index_select(0, f["act_slot"]))
        err = (v - batch["target"]).pow(2).sum(-1)
        return (err * batch["weight"]).sum() / (batch["weight"].sum() * self.c.action_dim)


def build_batch(step, c):
    """Tensors for one step of the plan: content from the per-sample seeds, slot layouts for both
    forms. Samples are visited in row order; within a sample the token order is language, then per
    frame cameras x patches and one state token, then the action tokens (as engine/model)."""
    rows = step["rows"]
    T = step["T"]
    lang, patches, states, xt, target, tpa, weight = [], [], [], [], [], [], []
    layout = {"mask": {"mod": [], "pos": [], "lang": [], "img": [], "state": [], "act": []},
              "per_sample": {"mod": [], "pos": [], "lang": [], "img": [], "state": [], "act": []}}
    segments = []
    mask = torch.zeros(len(rows), 1, T, T, dtype=torch.bool)
    real_slot = 0
    for r, row in enumerate(rows):
        off = 0
        for s in row:
            g = torch.Generator().manual_seed(int(s["seed"]) % (2**63))
            n_lang = s["language"]
            n_img = s["frames"] * s["cameras"] * s["patches_per_camera"]
            n_state = s["frames"] * s["state_tokens_per_frame"]
            H, A = s["action_tokens"], c.action_dim
            lang.append(torch.randint(0, c.vocab, (n_lang,), generator=g))
            patches.append(torch.randn(n_img, PATCH_DIM, generator=g))
            states.append(torch.randn(n_state, STATE_DIM, generator=g))
            a = torch.rand(H, A, generator=g) * 2 - 1
            noise = torch.randn(H, A, generator=g)
            t = torch.rand(1, generator=g)
            xt.append((1 - t) * noise + t * a)
            target.append(a - noise)
            tpa.append(t.expand(H))
            weight.append(torch.ones(H))
            kinds = [LANGUAGE] * n_lang
            for _ in range(s["frames"]):
                kinds += [IMAGE] * (s["cameras"] * s["patches_per_camera"])
                kinds += [STATE] * s["state_tokens_per_frame"]
            kinds += [ACTION] * H
            assert len(kinds) == s["tokens"], "plan and composition disagree"
            L = len(kinds)
            for form, base in (("mask", r * T + off), ("per_sample", real_slot)):
                lay = layout[form]
                for i, kind in enumerate(kinds):
                    lay["mod"].append((base + i, kind, i))
                    key = {LANGUAGE: "lang", IMAGE: "img", STATE: "state", ACTION: "act"}[kind]
                    lay[key].append(base + i)
            mask[r, 0, off:off + L, off:off + L] = True
            segments.append((real_slot, real_slot + L))
            off += L
            real_slot += L
        # Padding slots attend to themselves only (their output is never used), so no row of the
        # mask is empty and softmax stays finite.
        for i in range(off, T):
            mask[r, 0, i, i] = True
    batch = {
        "lang_ids": torch.cat(lang), "patches": torch.cat(patches), "states": torch.cat(states),
        "x_t": torch.cat(xt), "target": torch.cat(target), "t_per_action": torch.cat(tpa),
        "weight": torch.cat(weight), "real_tokens": real_slot,
    }
    for form, slots in (("mask", len(rows) * T), ("per_sample", real_slot)):
        lay = layout[form]
        modality = torch.zeros(slots, dtype=torch.long)
        position = torch.zeros(slots, dtype=torch.long)
        for slot, kind, pos in lay["mod"]:
            modality[slot] = kind
            position[slot] = pos
        batch[form] = {
            "slots": slots, "rows": len(rows), "T": T, "mask": mask,
            "segment_lengths": [b - a for a, b in segments],
            "modality": modality, "position": position,
            "real": (modality != PAD).float()[:, None],
            "lang_slot": torch.tensor(lay["lang"], dtype=torch.long),
            "img_slot": torch.tensor(lay["img"], dtype=torch.long),
            "state_slot": torch.tensor(lay["state"], dtype=torch.long),
            "act_slot": torch.tensor(lay["act"], dtype=torch.long),
        }
    return batch


def blas_info():
    info = {"env_OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE"),
            "env_OPENBLAS_L2_SIZE": os.environ.get("OPENBLAS_L2_SIZE")}
    with open("/proc/self/maps") as f:
        libs = sorted({l.split()[-1] for l in f if "blas" in l.split()[-1]})
    info["loaded"] = libs
    for path in libs:
        try:
            lib = ctypes.CDLL(path)
            lib.openblas_get_corename.restype = ctypes.c_char_p
            info["openblas_corename"] = lib.openblas_get_corename().decode()
            break
        except (OSError, AttributeError):
            continue
    return info


def time_form(form, batches, c, args):
    torch.manual_seed(args.seed)
    model = Policy(c)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    per_step = []
    losses = []
    for i in range(args.warmup + args.steps):
        b = batches[i % len(batches)]
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = model(b, form)
        loss.backward()
        opt.step()
        s = time.perf_counter() - t0
        losses.append(loss.item())
        if i >= args.warmup:
            per_step.append((s, b["real_tokens"], b[form]["slots"]))
    secs = [s for s, _, _ in per_step]
    tps = [n / s for s, n, _ in per_step]
    return {
        "median_tokens_per_s": statistics.median(tps),
        "median_step_seconds": statistics.median(secs),
        "mean_tokens_per_s": sum(n for _, n, _ in per_step) / sum(secs),
        "computed_slots_per_step": statistics.mean(sl for _, _, sl in per_step),
        "real_tokens_per_step": statistics.mean(n for _, n, _ in per_step),
        "first_loss": losses[0],
        "last_loss": losses[-1],
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--plan", required=True, help="JSON from bench/dump_packed_plan")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--forms", default="mask,per_sample")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    c = Config()
    with open(args.plan) as f:
        plan = json.load(f)
    T = plan["config"]["tokens_per_row"]
    c.action_horizon = plan["config"]["action_tokens"]
    steps = plan["steps"]
    needed = min(len(steps), args.warmup + args.steps)
    t0 = time.perf_counter()
    batches = []
    for st in steps[:needed]:
        st = dict(st, T=T)
        batches.append(build_batch(st, c))
    print(f"built {needed} batches in {time.perf_counter() - t0:.1f} s; "
          f"rows/step {statistics.mean(len(s['rows']) for s in steps[:needed]):.1f}, "
          f"real tokens/step {statistics.mean(b['real_tokens'] for b in batches):.0f}, "
          f"packing efficiency {statistics.mean(s['efficiency'] for s in steps[:needed]):.3f}",
          flush=True)

    # Both forms compute the same function: same loss and gradients from the same parameters.
    torch.manual_seed(args.seed)
    model = Policy(c)
    ref = {}
    for form in ("mask", "per_sample"):
        model.zero_grad(set_to_none=True)
        loss = model(batches[0], form)
        loss.backward()
        ref[form] = (loss.item(), torch.cat([p.grad.flatten() for p in model.parameters()]))
    loss_diff = abs(ref["mask"][0] - ref["per_sample"][0])
    grad_diff = (ref["mask"][1] - ref["per_sample"][1]).abs().max().item()
    grad_scale = ref["mask"][1].abs().max().item()
    print(f"check: loss mask {ref['mask'][0]:.6f} per_sample {ref['per_sample'][0]:.6f} "
          f"(|diff| {loss_diff:.2e}), max |grad diff| {grad_diff:.2e} of max |grad| "
          f"{grad_scale:.2e}", flush=True)
    if loss_diff > 1e-4 * abs(ref["mask"][0]) or grad_diff > 1e-3 * grad_scale:
        raise SystemExit("the two packed forms disagree")

    results = {}
    for form in args.forms.split(","):
        results[form] = time_form(form, batches, c, args)
        r = results[form]
        print(f"{form:>10}: median {r['median_tokens_per_s']:.0f} real tokens/s, "
              f"{r['median_step_seconds'] * 1e3:.0f} ms/step ({r['computed_slots_per_step']:.0f} "
              f"slots computed for {r['real_tokens_per_step']:.0f} real tokens), loss "
              f"{r['first_loss']:.4f} -> {r['last_loss']:.4f}", flush=True)
    line = {
        "bench": "torch_policy",
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "model": {"d_model": c.d_model, "layers": c.layers, "heads": c.heads, "mlp": c.mlp,
                  "action_horizon": c.action_horizon, "action_dim": c.action_dim},
        "tokens_per_row": T,
        "samples_per_step": plan["config"]["samples_per_step"],
        "warmup": args.warmup,
        "steps": args.steps,
        "blas": blas_info(),
        "loadavg_end": os.getloadavg(),
        "check": {"loss_diff": loss_diff, "max_grad_diff": grad_diff},
        "forms": results,
    }
    if "mask" in results and "per_sample" in results:
        line["ratio_per_sample_over_mask"] = (results["per_sample"]["median_tokens_per_s"] /
                                              results["mask"]["median_tokens_per_s"])
        print(f"ratio per_sample / mask: {line['ratio_per_sample_over_mask']:.2f}x")
    print(json.dumps(line))


if __name__ == "__main__":
    main()
