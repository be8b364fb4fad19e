#!/usr/bin/env python3
"""Checks that no code compiled for AVX2 or AVX-512 can run on a CPU without it.

The engine compiles a few translation units per instruction set (*_avx2.cc, *_avx512*.cc) and
picks one at run time (engine/cpu/cpu_path.h). The hazard is the linker: an inline function or
template instantiated with external linkage in an AVX-512 unit and in any other unit is one
symbol, and the linker keeps either copy, so baseline code could call AVX-512 instructions. This
lists every externally visible code symbol each per-ISA object defines that any other object in
the given static libraries defines too, disassembles the per-ISA copy, and fails if that copy
holds any VEX or EVEX instruction (AVX and up). Shared code without them (Eigen's
throw_std_bad_alloc) is reported and allowed: whichever copy the linker keeps runs anywhere.

usage: check_isa_symbols.py LIB.a [LIB.a ...]
"""
import os
import re
import subprocess
import sys
import tempfile

# AT&T syntax: AVX and later instructions are the v-prefixed mnemonics, plus AVX-512 mask-register
# moves and anything naming ymm/zmm or opmask registers.
WIDE = re.compile(r"\t(v[a-z0-9]+|k(mov|and|or|xor|not|shift|test|add|unpck)[a-z]*)\s|%[yz]mm|%k[0-7]")


def defined_code_symbols(archive):
    """{member: set of external/weak text symbols} for every object in the archive."""
    out = subprocess.run(["nm", "--defined-only", "-A", archive], check=True,
                         capture_output=True, text=True).stdout
    members = {}
    for line in out.splitlines():
        # archive:member:address type name
        head, _, rest = line.partition(" ")
        parts = rest.split(" ", 1)
        if len(parts) != 2:
            continue
        kind, name = parts
        member = head.rsplit(":", 2)[-2] if head.count(":") >= 2 else head
        # Code only: 'u' (GNU unique) marks static locals of inline functions, which are data.
        if kind in ("T", "W", "i"):
            members.setdefault(member, set()).add(name)
    return members


def wide_instructions(archive, member, symbol):
    """The VEX/EVEX instruction lines of `symbol` as compiled in archive's `member`."""
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["ar", "x", os.path.abspath(archive), member], cwd=tmp, check=True)
        out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", f"--disassemble={symbol}",
                              os.path.join(tmp, member)], check=True, capture_output=True,
                             text=True).stdout
    return [line.strip() for line in out.splitlines() if WIDE.search(line)]


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    objects = {}
    for archive in argv[1:]:
        for member, syms in defined_code_symbols(archive).items():
            objects[f"{archive}:{member}"] = syms
    # kernels_avx512.cc.o, kernels_avx512_bf16.cc.o, linear_fast_avx2.cc.o, ...
    isa = {k: v for k, v in objects.items() if re.search(r"_avx(2|512)[._]", k)}
    if not isa:
        print("no per-ISA objects found in the given libraries", file=sys.stderr)
        return 1
    bad = 0
    for obj, syms in sorted(isa.items()):
        shared = set()
        for other, other_syms in objects.items():
            if other != obj:
                shared |= syms & other_syms
        archive, member = obj.rsplit(":", 1)
        for s in sorted(shared):
            wide = wide_instructions(archive, member, s)
            if wide:
                print(f"shared symbol {s} in {obj} holds {len(wide)} AVX instructions, e.g. "
                      f"{wide[0]}")
                bad += 1
            else:
                print(f"shared symbol {s} in {obj}: no AVX instruction, allowed")
        print(f"{obj}: {len(syms)} external code symbols, {len(shared)} shared")
    if bad:
        print(f"{bad} shared symbols: the linker may run per-ISA code on any CPU", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
