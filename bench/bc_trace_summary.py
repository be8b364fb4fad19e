#!/usr/bin/env python3
"""Summarises a push roll-out trace of bc_decay_bench (--trace FILE): where the policy first goes
low, how often it is where the expert says "rise" and whether it follows, and how the block moves.

  python3 bench/bc_trace_summary.py FILE

A trace line is: episode, step, the 15 state values (effector x/0.3, y/0.3, z/0.15 - 1, gripper;
block x/0.3, y/0.3, z/0.15 - 1; goal x/0.3, y/0.3; block - effector and goal - effector / 0.1 m;
held), the policy's action (4) and the expert's (4). The push expert's branches are recomputed from
the state with engine/sim/sim_task.cc's constants. Prints a few lines and one JSON line.
"""
import collections
import json
import math
import sys

BLOCK_HALF, EFFECTOR_RADIUS = 0.025, 0.015
CONTACT = EFFECTOR_RADIUS + BLOCK_HALF
STANDOFF = CONTACT + 0.01  # the point behind the block where the expert descends
APPROACH, REALIGN, PUSH_Z, TRAVEL_Z = 0.02, 0.02, BLOCK_HALF + 0.02, 0.09


def geometry(r):
    ex, ey, ez = r[2] * 0.3, r[3] * 0.3, (r[4] + 1) * 0.15
    bx, by = r[6] * 0.3, r[7] * 0.3
    gx, gy = r[9] * 0.3, r[10] * 0.3
    gl = max(1e-9, math.hypot(gx - bx, gy - by))
    ux, uy = (gx - bx) / gl, (gy - by) / gl
    vx, vy = bx - ex, by - ey
    lateral, along = abs(ux * vy - uy * vx), ux * vx + uy * vy
    to_behind = math.hypot(bx - ux * STANDOFF - ex, by - uy * STANDOFF - ey)
    if ez < PUSH_Z and lateral <= REALIGN and 0 < along <= STANDOFF + APPROACH:
        branch = "push"
    elif to_behind < APPROACH:
        branch = "descend"
    elif ez < TRAVEL_Z:
        branch = "rise"
    else:
        branch = "travel"
    return branch, ez, to_behind


def clamp(v):
    return max(-1.0, min(1.0, v))


def cosine(a, b):
    na, nb = math.sqrt(sum(x * x for x in a)), math.sqrt(sum(x * x for x in b))
    return sum(x * y for x, y in zip(a, b)) / (na * nb + 1e-9)


def main():
    episodes = collections.defaultdict(list)
    with open(sys.argv[1]) as f:
        for line in f:
            r = [float(x) for x in line.split()]
            episodes[int(r[0])].append(r)
    by_branch = collections.defaultdict(lambda: [0, 0.0])
    first_low, magnitudes, moves, toward = [], [], [], []
    steps, timeouts = 0, 0
    for rows in episodes.values():
        timeouts += len(rows) >= 150  # the push task's step limit
        low_seen = False
        for r in rows:
            branch, ez, to_behind = geometry(r)
            a = [clamp(v) for v in r[17:20]]
            x = [clamp(v) for v in r[21:24]]
            by_branch[branch][0] += 1
            by_branch[branch][1] += cosine(a, x)
            magnitudes.append(math.sqrt(sum(v * v for v in a)))
            if not low_seen and ez < 0.06:
                low_seen = True
                first_low.append(to_behind)
        for a, b in zip(rows, rows[1:]):
            dx, dy = 0.3 * (b[6] - a[6]), 0.3 * (b[7] - a[7])
            gx, gy = 0.3 * (a[9] - a[6]), 0.3 * (a[10] - a[7])
            d = math.hypot(dx, dy)
            steps += 1
            if d > 1e-3:
                moves.append(d)
                toward.append((dx * gx + dy * gy) / (d * math.hypot(gx, gy) + 1e-12))
    first_low.sort()
    out = {
        "episodes": len(episodes),
        "timeouts": timeouts,
        "first_low_median_m": first_low[len(first_low) // 2] if first_low else None,
        "first_low_beyond_2cm": sum(d > 0.02 for d in first_low) / max(1, len(first_low)),
        "mean_action_norm": sum(magnitudes) / max(1, len(magnitudes)),
        "block_moving_share": len(moves) / max(1, steps),
        "block_move_mean_m": sum(moves) / max(1, len(moves)),
        "block_toward_goal_cos": sum(toward) / max(1, len(toward)),
        "branches": {b: {"states": n, "cos_policy_expert": c / n} for b, (n, c) in
                     sorted(by_branch.items())},
    }
    print("episodes %d, timeouts %d" % (out["episodes"], out["timeouts"]))
    print("first below 6 cm: median %.3f m from the descent point, beyond 2 cm in %.2f"
          % (out["first_low_median_m"] or 0, out["first_low_beyond_2cm"]))
    print("mean |a| %.3f; the block moves on %.2f of the steps, %.4f m a move, cos to the goal %.3f"
          % (out["mean_action_norm"], out["block_moving_share"], out["block_move_mean_m"],
             out["block_toward_goal_cos"]))
    for b, v in out["branches"].items():
        print("  %-8s %6d states, cos(policy, expert) %+.3f" % (b, v["states"], v["cos_policy_expert"]))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
