"""`python3 -m embody.torchrun ARGS`: torch's torchrun (torch.distributed.run) with ARGS.

What a command job's `"launcher": "torchrun"` starts on each node (agent/mpi_launch.cc). It is
torchrun itself, after one repair: torch before 2.0 reads its --redirects/--tee values by
iterating the Std flag enum, and Python 3.11 no longer yields a flag's zero member there, so
every value ("0", the default, included) came back None and torchrun failed before starting a
worker (Debian 12's python3-torch 1.13 with Python 3.11). Where torch reads them right, nothing
is changed.
"""
import re
import sys


def _repair_std_values() -> None:
    try:
        from torch.distributed.elastic.multiprocessing import api
    except ImportError:
        return
    std = api.Std
    try:
        if std.from_str("0") is not None:
            return
    except Exception:  # an API this repair does not know: leave it to torch
        return

    def from_str(cls, vm: str):
        if re.fullmatch(r"[0-3]", vm):
            return cls(int(vm))
        if re.fullmatch(r"(\d:[0-3],)*\d:[0-3]", vm):
            return {int(i): cls(int(v)) for i, v in (m.split(":") for m in vm.split(","))}
        raise ValueError(f"{vm} does not match a number 0-3 or a mapping such as 0:1,1:2")

    std.from_str = classmethod(from_str)


def main() -> None:
    _repair_std_values()
    from torch.distributed.run import main as torchrun_main
    sys.argv[0] = "torchrun"
    torchrun_main()


if __name__ == "__main__":
    main()
