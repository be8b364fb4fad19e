#!/usr/bin/python3
"""Writes tests/golden/policy_tiny.golden: a PyTorch (float64) reference for the policy
transformer of engine/model/policy_transformer.h on a tiny configuration.

The script builds a fixed packed batch (3 samples in 2 rows, the layout of
engine/model/packed_batch.h), initialises every parameter from a fixed torch seed, runs the model
in float64 and writes the batch, the parameters (float32, the exact values our model loads), the
loss, the predicted velocities, two intermediate activations and every parameter gradient
(float64). engine's policy_golden_test loads the file by tensor name and compares.

Run with Debian's torch (not the pyenv python first on PATH):
    /usr/bin/python3 tests/golden/make_golden.py [--out tests/golden/policy_tiny.golden]

File format (little endian): b"EMBGOLD1", u32 record count, then per record:
u32 name length, name (utf-8), u8 dtype (0 f32, 1 f64, 2 i32), u32 ndim, u32 dims[ndim], data.
"""
import argparse
import math
import struct

import torch
import torch.nn.functional as F

# Must match engine/model (packed_batch.h, policy_layers.h).
PATCH_DIM = 192
STATE_DIM = 16
TIME_FEATURES = 64
RMS_EPS = 1e-5
PAD, LANGUAGE, IMAGE, STATE, ACTION = 0, 1, 2, 3, 4

CONFIG = dict(d_model=32, layers=2, heads=4, mlp=64, vocab=64, max_positions=64, action_dim=7,
              action_horizon=6, causal=0)
PATCHES_PER_CAMERA = 2
TOKENS_PER_ROW = 40
# (language tokens, frames, cameras) per sample, and the rows they are packed into.
SAMPLES = [(5, 1, 2), (3, 2, 1), (8, 1, 3)]
ROWS = [[2, 0], [1]]


def param_shapes(c):
    C, M, A = c["d_model"], c["mlp"], c["action_dim"]
    shapes = [("embed.token", (c["vocab"], C)), ("embed.position", (c["max_positions"], C)),
              ("embed.modality", (4, C)), ("embed.patch.weight", (C, PATCH_DIM)),
              ("embed.patch.bias", (C,)), ("embed.state.weight", (C, STATE_DIM)),
              ("embed.state.bias", (C,)), ("embed.action.weight", (C, A)),
              ("embed.action.bias", (C,)), ("embed.time.weight", (C, TIME_FEATURES)),
              ("embed.time.bias", (C,))]
    for l in range(c["layers"]):
        b = f"blocks.{l}."
        shapes += [(b + "norm1.weight", (C,)), (b + "attn.qkv.weight", (3 * C, C)),
                   (b + "attn.qkv.bias", (3 * C,)), (b + "attn.proj.weight", (C, C)),
                   (b + "attn.proj.bias", (C,)), (b + "norm2.weight", (C,)),
                   (b + "mlp.fc1.weight", (M, C)), (b + "mlp.fc1.bias", (M,)),
                   (b + "mlp.fc2.weight", (C, M)), (b + "mlp.fc2.bias", (C,))]
    shapes += [("norm_f.weight", (C,)), ("action_head.weight", (A, C)),
               ("action_head.bias", (A,))]
    return shapes


def init_params(c, gen):
    """Random values large enough that every path carries a visible gradient."""
    params = {}
    for name, shape in param_shapes(c):
        if "norm" in name:
            v = 1.0 + 0.1 * torch.randn(shape, generator=gen)
        elif name.endswith(".bias"):
            v = 0.1 * torch.randn(shape, generator=gen)
        elif name in ("embed.token", "embed.position", "embed.modality"):
            v = 0.3 * torch.randn(shape, generator=gen)
        else:  # Linear weight (out, in)
            v = torch.randn(shape, generator=gen) / math.sqrt(shape[1])
        params[name] = v.to(torch.float32)
    return params


def build_batch(c, gen):
    """The packed batch, laid out as engine/model/packed_batch.h documents."""
    H, A, T = c["action_horizon"], c["action_dim"], TOKENS_PER_ROW
    rows = len(ROWS)
    N = rows * T
    b = dict(modality=[PAD] * N, position=[0] * N, sample=[-1] * N, index=[-1] * N,
             row_begin=[0], cu_seqlens=[], patches=[], states=[], time=[], noisy_action=[],
             target_velocity=[], loss_weight=[])
    contents = []
    for (lang, frames, cams) in SAMPLES:
        contents.append(dict(
            language=torch.randint(0, c["vocab"], (lang,), generator=gen).tolist(),
            frames=frames, cameras=cams,
            patches=torch.randn(frames * cams * PATCHES_PER_CAMERA, PATCH_DIM, generator=gen),
            states=torch.randn(frames, STATE_DIM, generator=gen),
            actions=torch.rand(H, A, generator=gen) * 2 - 1,
            noise=torch.randn(H, A, generator=gen),
            time=float(torch.rand((), generator=gen)),
            weight=float(0.5 + torch.rand((), generator=gen))))
    k = 0  # sample number in the batch (row order)
    for r, members in enumerate(ROWS):
        slot = r * T
        b["cu_seqlens"].append(0)
        for s_in in members:
            s = contents[s_in]
            pos = 0

            def put(m, idx):
                nonlocal slot, pos
                b["modality"][slot], b["position"][slot] = m, pos
                b["sample"][slot], b["index"][slot] = k, idx
                slot += 1
                pos += 1

            for tok in s["language"]:
                put(LANGUAGE, tok)
            per_frame = s["cameras"] * PATCHES_PER_CAMERA
            for f in range(s["frames"]):
                for p in range(per_frame):
                    put(IMAGE, len(b["patches"]))
                    b["patches"].append(s["patches"][f * per_frame + p].tolist())
                put(STATE, len(b["states"]))
                b["states"].append(s["states"][f].tolist())
            t = torch.tensor(s["time"], dtype=torch.float32)
            b["time"].append(float(t))
            xt = ((1 - t) * s["noise"] + t * s["actions"]).to(torch.float32)
            tgt = (s["actions"] - s["noise"]).to(torch.float32)
            for h in range(H):
                put(ACTION, len(b["loss_weight"]))
                b["loss_weight"].append(s["weight"])
                b["noisy_action"].append(xt[h].tolist())
                b["target_velocity"].append(tgt[h].tolist())
            b["cu_seqlens"].append(slot - r * T)
            k += 1
        b["row_begin"].append(k)
    return b


def time_features(t):
    half = TIME_FEATURES // 2
    j = torch.arange(half, dtype=torch.float64)
    f = torch.exp(-math.log(10000.0) * j / half)
    arg = 1000.0 * t[:, None] * f[None, :]
    feats = torch.cat([torch.sin(arg), torch.cos(arg)], dim=1)
    return feats.to(torch.float32).to(torch.float64)  # our model keeps the features in float32


def rms_norm(x, w):
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + RMS_EPS) * w


def forward(c, P, b):
    C, Hh, A, T = c["d_model"], c["heads"], c["action_dim"], TOKENS_PER_ROW
    D = C // Hh
    f64 = torch.float64
    mod = torch.tensor(b["modality"])
    pos = torch.tensor(b["position"])
    sample = torch.tensor(b["sample"])
    index = torch.tensor(b["index"])
    N = mod.numel()
    real = mod != PAD
    x = torch.zeros(N, C, dtype=f64)
    add = torch.zeros(N, C, dtype=f64)
    lang = mod == LANGUAGE
    add[lang] += P["embed.token"][index[lang]]
    add[real] += P["embed.modality"][mod[real] - 1] + P["embed.position"][pos[real]]
    img = mod == IMAGE
    patches = torch.tensor(b["patches"], dtype=f64)
    add[img] += patches[index[img]] @ P["embed.patch.weight"].T + P["embed.patch.bias"]
    st = mod == STATE
    states = torch.tensor(b["states"], dtype=f64)
    add[st] += states[index[st]] @ P["embed.state.weight"].T + P["embed.state.bias"]
    act = mod == ACTION
    times = torch.tensor(b["time"], dtype=torch.float32).to(f64)
    tf = time_features(times[sample[act]])
    xt = torch.tensor(b["noisy_action"], dtype=f64)[index[act]]
    add[act] += tf @ P["embed.time.weight"].T + P["embed.time.bias"]
    add[act] += xt @ P["embed.action.weight"].T + P["embed.action.bias"]
    x = x + add
    embed = x

    # Attention mask: same row, same sample, both real (and key ≤ query when causal).
    row = torch.arange(N) // T
    slot_in_row = torch.arange(N) % T
    allowed = (row[:, None] == row[None, :]) & (sample[:, None] == sample[None, :]) & \
        real[:, None] & real[None, :]
    if c["causal"]:
        allowed &= slot_in_row[None, :] <= slot_in_row[:, None]
    for l in range(c["layers"]):
        p = f"blocks.{l}."
        h = rms_norm(x, P[p + "norm1.weight"])
        qkv = h @ P[p + "attn.qkv.weight"].T + P[p + "attn.qkv.bias"]
        q, k, v = qkv.split(C, dim=1)
        q = q.view(N, Hh, D).transpose(0, 1)  # (H, N, D)
        k = k.view(N, Hh, D).transpose(0, 1)
        v = v.view(N, Hh, D).transpose(0, 1)
        s = q @ k.transpose(1, 2) / math.sqrt(D)
        s = s.masked_fill(~allowed[None], float("-inf"))
        out = torch.zeros(Hh, N, D, dtype=f64)
        out[:, real] = torch.softmax(s[:, real], dim=-1) @ v  # padding queries: zeros
        out = out.transpose(0, 1).reshape(N, C)
        x = x + out @ P[p + "attn.proj.weight"].T + P[p + "attn.proj.bias"]
        h = rms_norm(x, P[p + "norm2.weight"])
        m = F.gelu(h @ P[p + "mlp.fc1.weight"].T + P[p + "mlp.fc1.bias"], approximate="tanh")
        x = x + m @ P[p + "mlp.fc2.weight"].T + P[p + "mlp.fc2.bias"]
    hf = rms_norm(x, P["norm_f.weight"])
    act_slots = torch.nonzero(act).flatten()
    order = torch.argsort(index[act_slots])
    vel = hf[act_slots[order]] @ P["action_head.weight"].T + P["action_head.bias"]
    target = torch.tensor(b["target_velocity"], dtype=f64)
    w = torch.tensor(b["loss_weight"], dtype=torch.float32).to(f64)
    loss = (w * ((vel - target) ** 2).sum(-1)).sum() / (w.sum() * A)
    return loss, vel, embed, hf


def write_golden(path, records):
    with open(path, "wb") as f:
        f.write(b"EMBGOLD1")
        f.write(struct.pack("<I", len(records)))
        for name, dtype, tensor in records:
            code = {"f32": 0, "f64": 1, "i32": 2}[dtype]
            torch_dtype = {"f32": torch.float32, "f64": torch.float64, "i32": torch.int32}[dtype]
            t = torch.as_tensor(tensor).to(torch_dtype).contiguous()
            nb = name.encode()
            f.write(struct.pack("<I", len(nb)) + nb + struct.pack("<BI", code, t.dim()))
            f.write(struct.pack(f"<{t.dim()}I", *t.shape))
            f.write(t.numpy().astype(t.numpy().dtype.newbyteorder("<")).tobytes())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="tests/golden/policy_tiny.golden")
    args = ap.parse_args()
    torch.set_default_dtype(torch.float64)
    gen = torch.Generator().manual_seed(20260311)
    c = CONFIG
    params32 = init_params(c, gen)
    batch = build_batch(c, gen)
    P = {k: v.to(torch.float64).requires_grad_(True) for k, v in params32.items()}
    loss, vel, embed, hf = forward(c, P, batch)
    loss.backward()

    cfg = [c["d_model"], c["layers"], c["heads"], c["mlp"], c["vocab"], c["max_positions"],
           c["action_dim"], c["action_horizon"], c["causal"], len(ROWS), TOKENS_PER_ROW]
    records = [("config", "i32", cfg)]
    for key in ("row_begin", "cu_seqlens", "modality", "position", "sample", "index"):
        records.append(("batch." + key, "i32", batch[key]))
    for key in ("patches", "states", "time", "noisy_action", "target_velocity", "loss_weight"):
        records.append(("batch." + key, "f32", batch[key]))
    for name, _ in param_shapes(c):
        records.append(("param." + name, "f32", params32[name]))
    records.append(("out.loss", "f64", [loss.item()]))
    records.append(("out.velocity", "f64", vel.detach()))
    records.append(("out.embed", "f64", embed.detach()))
    records.append(("out.final_hidden", "f64", hf.detach()))
    for name, _ in param_shapes(c):
        records.append(("grad." + name, "f64", P[name].grad))
    write_golden(args.out, records)
    print(f"wrote {args.out}: loss {loss.item():.6f}, {len(records)} records")


if __name__ == "__main__":
    main()
