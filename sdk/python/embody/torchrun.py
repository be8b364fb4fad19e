"""`python3 -m embody.torchrun ARGS`: torch's torchrun (torch.distributed.run) with ARGS.

What a command job's `"launcher": "torchrun"` starts on each node (agent/launch/mpi_launch.cc). It is
torchrun itself, after one repair: torch before 2.0 reads its --redirects/--tee values by
iterating the Std flag enum, and Python 3.11 no longer yields a flag's zero member there, so
every value ("0", the default, included) came back None and torchrun failed before starting a
worker (Debian 12's python3-torch 1.13 with Python 3.11). Where torch reads them right, nothing
is changed.

And one wait, on every node but the first: torch's TCPStore client (torch 1.13) retries a refused
connection a whole second later, and the other nodes' torchruns, started at the same moment as the
first node's, reach its rendezvous store before it listens (each imports torch first, for about
a second). So while torch is imported here, a thread knocks at the first node's endpoint
(PET_MASTER_ADDR:PET_MASTER_PORT, what the agent sets) every 10 ms, and torchrun starts once it
answers: its first try then connects. It waits at most a minute; then torch's own retries go on.
"""
import os
import re
import socket
import sys
import threading
import time
from typing import Optional

# How long the other nodes wait for the first node's store before leaving it to torch.
_ENDPOINT_WAIT_S = 60.0
_ENDPOINT_POLL_S = 0.01


def _knock_until_listening(addr: str, port: int, deadline: float) -> None:
    while time.monotonic() < deadline:
        try:
            socket.create_connection((addr, port), timeout=1.0).close()
            return
        except OSError:
            time.sleep(_ENDPOINT_POLL_S)


def _await_first_node() -> Optional[threading.Thread]:
    """A thread that returns once the first node's rendezvous endpoint accepts connections; None
    on the first node, or where the agent named no endpoint (torchrun run by hand)."""
    try:
        node_rank = int(os.environ.get("PET_NODE_RANK", "0"))
        addr = os.environ["PET_MASTER_ADDR"]
        port = int(os.environ["PET_MASTER_PORT"])
    except (KeyError, ValueError):
        return None
    if node_rank == 0 or not addr or not 0 < port < 65536:
        return None
    deadline = time.monotonic() + _ENDPOINT_WAIT_S
    thread = threading.Thread(target=_knock_until_listening, args=(addr, port, deadline),
                              name="embody-rendezvous-wait", daemon=True)
    thread.start()
    return thread


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
    waiting = _await_first_node()
    _repair_std_values()
    from torch.distributed.run import main as torchrun_main
    if waiting is not None:
        waiting.join(_ENDPOINT_WAIT_S)
    sys.argv[0] = "torchrun"
    torchrun_main()


if __name__ == "__main__":
    main()
