#!/usr/bin/env python3
"""The folder dependency rules, and the check that every `#include "…"` keeps them.

This file is where the allowed graph is written down (docs/design.md shows the same tables).
Folders sit in layers; a file may include a header of its own folder or of a folder in a LOWER
layer, never a peer or a higher one. With strict layers an include cycle between folders cannot
form without an upward edge, so this one check refuses both. It runs over top-level folders
(engine/ and agent/ each as one folder), and again inside engine/ and inside agent/ over their
subfolders. The files directly in agent/ are their own node ("agent"); engine/ keeps every source
in a subfolder, so a source directly in it is a table error.

Test code (files named *_test.* or *_fuzzer.*, anything in a testing/ folder or under tests/)
includes nothing and is included by nothing but other test code, so it may also include:
anything inside its own top-level folder (an engine test may reach any engine subfolder), the
shared test support (tests/support/, any testing/ folder), and the extras in TEST_EXTRAS.
Production code may never include test code (bench/ excepted: it is a harness above tests/).

KNOWN_EXCEPTIONS lists the upward edges the tree has today, each with why; the check fails on
any other upward edge, and on an exception that no longer occurs, so the list only shrinks.

Usage: check_include_graph.py [REPO_ROOT]   (exit 0 clean, 1 violations, 2 a bad table)
"""

import os
import re
import sys

# Top-level folders, lowest first. A folder with C++ sources that is missing here is an error.
TOP_LAYERS = [
    ["common"],  # Status, parsing, hashes, the HTTP edge (common/http)
    ["api"],  # the contracts between components: job spec, agent protocol
    ["storage", "planner"],  # datasets and checkpoints on disk; the parallelism planner
    ["engine", "agent", "controlplane", "cli"],  # the four programs: peers never include each other
    ["tests", "sdk"],  # cross-component tests and their support; the SDK's fixtures
    ["bench"],  # benchmarks drive any component and the test support
]

# engine/'s subfolders, lowest first. Every engine source lives in a subfolder: "engine" (the
# files directly in engine/) has no layer, so a source put there is a table error. cpu (the
# instruction-set path every kernel dispatches on) is the bottom; batches (what a policy trains
# on) sit above the simulator that makes demonstrations; policy (the RL actor-critic, its
# checkpoint, post-training quantisation, held-out assessment) sits below evaluation and the two
# trainers that use it; engine/jobs is the top (main.cc and one entry per job kind).
# engine/testing holds test helpers (test code).
ENGINE_LAYERS = [
    ["engine/cpu"],
    ["engine/fp8", "engine/data", "engine/optim", "engine/report"],
    ["engine/kernels"],
    ["engine/model"],
    ["engine/format"],
    ["engine/sim", "engine/dist"],
    ["engine/batches"],
    ["engine/policy"],
    ["engine/eval"],
    ["engine/rl", "engine/train"],
    ["engine/jobs"],
    ["engine/testing"],
]

# agent/'s subfolders, lowest first (agent/README.md says what each holds); "agent" is the files
# directly in agent/, the assembled agent and its command line, at the top. Folders in one layer
# are peers and never include each other. agent/testing holds test helpers (test code).
AGENT_LAYERS = [
    ["agent/sandbox", "agent/launch"],
    ["agent/node", "agent/images", "agent/data"],
    ["agent/jobs"],
    ["agent/rsh", "agent/heartbeat"],
    ["agent/local_api"],
    ["agent"],
    ["agent/testing"],
]

# The top-level folders checked again over their subfolders, with each one's table.
SUBFOLDER_LAYERS = {"engine": ("ENGINE_LAYERS", ENGINE_LAYERS),
                    "agent": ("AGENT_LAYERS", AGENT_LAYERS)}

# Test code's extra edges beyond its folder's own rules: (from folder, to folder): why.
TEST_EXTRAS = {
    ("cli", "controlplane"): "the CLI's pg tests run an embody-server in process",
    ("planner", "engine"): "the step model is checked against the engine's measured step",
}

# Upward edges that exist today (from folder, to folder): why. Remove an entry when its edge
# goes; the check says when one no longer occurs.
KNOWN_EXCEPTIONS = {}

# Test code whose name does not say so: path: why. Treated as test code; the list only shrinks.
TEST_CODE_ELSEWHERE = {}

SOURCE_SUFFIXES = (".cc", ".h", ".cu", ".cuh", ".cpp", ".hpp")
SKIPPED_DIRS = {"build", "node_modules", ".git", "third_party"}
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')


def is_test_code(path):
    if path in TEST_CODE_ELSEWHERE:
        return True
    parts = path.split("/")
    name = parts[-1]
    stem = name.rsplit(".", 1)[0]
    return (parts[0] == "tests" or "testing" in parts[:-1] or stem.endswith("_test")
            or stem.endswith("_fuzzer"))


def is_test_support(path):
    if path in TEST_CODE_ELSEWHERE:
        return True
    parts = path.split("/")
    return path.startswith("tests/support/") or "testing" in parts[:-1]


def top_node(path):
    return path.split("/")[0]


def sub_node(path):
    """engine/model/x.h -> "engine/model"; engine/x.h -> "engine" (the same for agent/)."""
    parts = path.split("/")
    return parts[0] + "/" + parts[1] if len(parts) > 2 else parts[0]


def layer_index(layers):
    index = {}
    for level, folders in enumerate(layers):
        for folder in folders:
            if folder in index:
                raise ValueError(f"{folder} is in two layers")
            index[folder] = level
    return index


def scan(root):
    """Every (file, line, included path) whose target starts with a top-level folder."""
    tops = {d for d in os.listdir(root)
            if os.path.isdir(os.path.join(root, d)) and d not in SKIPPED_DIRS
            and not d.startswith(".")}
    sources, includes = set(), []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIPPED_DIRS and not d.startswith("."))
        for name in sorted(filenames):
            if not name.endswith(SOURCE_SUFFIXES):
                continue
            full = os.path.join(dirpath, name)
            path = os.path.relpath(full, root).replace(os.sep, "/")
            if "/" not in path:
                continue  # a file in the repository root belongs to no folder
            sources.add(path)
            with open(full, encoding="utf-8", errors="replace") as f:
                for number, line in enumerate(f, 1):
                    m = INCLUDE.match(line)
                    if m and m.group(1).split("/")[0] in tops and "/" in m.group(1):
                        includes.append((path, number, m.group(1)))
    return sources, includes


def check(root):
    """Returns (violations, stale exceptions, table errors) as lists of strings."""
    try:
        top_level = layer_index(TOP_LAYERS)
        sub_level = {top: layer_index(layers) for top, (_, layers) in SUBFOLDER_LAYERS.items()}
    except ValueError as e:
        return [], [], [str(e)]
    sources, includes = scan(root)
    errors = []
    for path in sorted(sources):
        if top_node(path) not in top_level:
            errors.append(f"{top_node(path)}/ has C++ sources but no layer in TOP_LAYERS")
        top = top_node(path)
        if top in sub_level and sub_node(path) not in sub_level[top]:
            errors.append(f"{sub_node(path)}/ has C++ sources but no layer in "
                          f"{SUBFOLDER_LAYERS[top][0]}")
    errors = sorted(set(errors))

    violations, used = [], set()

    def judge(where, target, src, dst, level, test):
        if src == dst or src not in level or dst not in level:
            return
        if level[dst] < level[src]:
            return
        if test and ((src, dst) in TEST_EXTRAS or top_node(src) == top_node(dst)):
            return
        if (src, dst) in KNOWN_EXCEPTIONS:
            used.add((src, dst))
            return
        kind = "a peer" if level[dst] == level[src] else "a higher layer"
        violations.append(f"{where}: includes \"{target}\": {src} may not include {dst} ({kind})")

    for path, number, target in includes:
        where = f"{path}:{number}"
        test = is_test_code(path)
        if not test and is_test_support(target) and top_node(path) != "bench":
            violations.append(f"{where}: production code includes test code \"{target}\"")
            continue
        if test and is_test_support(target):
            continue
        judge(where, target, top_node(path), top_node(target), top_level, test)
        top = top_node(path)
        if top in sub_level and top_node(target) == top:
            judge(where, target, sub_node(path), sub_node(target), sub_level[top], test)

    stale = [f"{a} -> {b}" for (a, b) in sorted(KNOWN_EXCEPTIONS) if (a, b) not in used]
    stale += [f"{p} (test code outside testing/)" for p in sorted(TEST_CODE_ELSEWHERE)
              if p not in sources]
    return violations, stale, errors


def main(argv):
    root = argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
    violations, stale, errors = check(os.path.abspath(root))
    for e in errors:
        print(f"include graph table: {e}")
    for v in violations:
        print(v)
    for s in stale:
        print(f"known exception {s} no longer occurs: remove it from "
              "tests/include_graph/check_include_graph.py and docs/design.md")
    if errors:
        return 2
    if violations or stale:
        print(f"{len(violations)} include(s) break the folder layers (tests/include_graph/"
              "check_include_graph.py says which folder may include which)")
        return 1
    print("include graph: every include goes to its own folder or a lower layer")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
