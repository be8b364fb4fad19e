"""should_stop(): the grace embody-engine gets on preemption, cancel and time limits, for scripts.

The agent ends a job by sending SIGTERM to all of its processes and SIGKILL after its grace
period (``--kill-grace-ms``): on preemption by a higher-priority job, on cancel, and when the
job's ``time_limit_seconds`` runs out. embody-engine's SIGTERM handler only raises a flag; the
training loop finishes the step in flight, writes a checkpoint and exits with 128 + SIGTERM, so a
preempted job resumes from where it stopped instead of from its last periodic checkpoint.

Here the same: the handler sets a flag, and the loop asks ``should_stop()`` once per step:

    for step in range(start, steps):
        train_step()
        if embody.should_stop():
            embody.checkpoint(save(step), step=step)
            sys.exit(embody.STOPPED_EXIT_CODE)

The handler is installed by the first should_stop() call (or by install_sigterm_handler()), not
on import: a script that never asks would otherwise ignore SIGTERM and be killed only by the
SIGKILL, a grace period later, having done nothing with it. Python runs signal handlers in the
main thread only, between bytecodes, so it must be installed from the main thread; the flag can
be read from any.

Several ranks get the signal at slightly different moments. A rank that leaves its loop alone
leaves the others blocked in their next collective, so a multi-rank loop should agree first, as
the engine does (engine/dist/agree_on_stop.h), e.g. with torch.distributed:

    stop = torch.tensor([float(embody.should_stop())], device=device)
    torch.distributed.all_reduce(stop, op=torch.distributed.ReduceOp.MAX)
    if stop.item() > 0: ...
"""

from __future__ import annotations

import os
import signal
import threading
import warnings
from types import FrameType
from typing import Any, Optional

# How the engine ends after a SIGTERM it handled: the run stopped early and can resume.
STOPPED_EXIT_CODE = 128 + signal.SIGTERM

_stop = threading.Event()
_installed = False
_warned_not_main = False


def _on_sigterm(signum: int, frame: Optional[FrameType]) -> None:
    if not _stop.is_set():
        # The job's log says why the run is about to end; os.write, not print: a handler may
        # interrupt a print in progress on the same stream.
        try:
            os.write(2, b"embody: SIGTERM received; stopping at the next should_stop() check\n")
        except OSError:
            pass
    _stop.set()


def install_sigterm_handler() -> Any:
    """Makes SIGTERM set the stop flag instead of ending the process; returns the handler it
    replaced. Call from the main thread (Python's rule for signal handlers). Idempotent."""
    global _installed
    if threading.current_thread() is not threading.main_thread():
        raise RuntimeError("install_sigterm_handler() must be called from the main thread "
                           "(Python runs signal handlers there only)")
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    _installed = True
    return previous


def should_stop() -> bool:
    """True once the job has been asked to stop (SIGTERM: preemption, cancel, time limit).

    The first call installs the SIGTERM handler when made from the main thread; from another
    thread it warns once and only reads the flag (call install_sigterm_handler() from the main
    thread first). Costs a flag read afterwards.
    """
    global _warned_not_main
    if not _installed:
        if threading.current_thread() is threading.main_thread():
            install_sigterm_handler()
        elif not _warned_not_main:
            _warned_not_main = True
            warnings.warn("embody.should_stop() called outside the main thread before "
                          "install_sigterm_handler(): SIGTERM still ends the process at once",
                          RuntimeWarning, stacklevel=2)
    return _stop.is_set()


def request_stop() -> None:
    """Sets the stop flag as SIGTERM would: for a loop's own reasons (a time budget) and tests."""
    _stop.set()


def _reset() -> None:
    """For tests: the flag down and the default SIGTERM action back."""
    global _installed
    _stop.clear()
    if _installed and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _installed = False

