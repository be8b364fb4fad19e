"""checkpoint() and resume_path(): a script's checkpoints survive its node, as the engine's do.

The agent uploads a checkpoint to the server's blob store when the job reports it with a
``checkpoint`` event ``{"step", "path", "bytes", "metrics"?}`` and only when ``path`` names a
regular file directly in the job's ``EMBODY_CHECKPOINT_DIR`` (agent/data/checkpoint_uploader.h: the
path is compared lexically with the agent's own spelling of that directory, then opened without
following links). A restarted attempt gets ``EMBODY_RESUME_FROM``: the job's own newest reported
file when its node can still read it, or else the newest upload, fetched by the agent to
``downloads/job-<id>/step-<N>.ckpt`` (agent/jobs/job_runner.cc).

So the SDK keeps checkpoints the engine's way, ``<EMBODY_CHECKPOINT_DIR>/step-<N>.ckpt``:
  - the agent prefers a local ``step-<N>.ckpt`` at least as new as the upload to a download
    (that name is what it looks for), and resume_path() can find a newer one by name;
  - a file the caller wrote elsewhere is copied there (temporary name, fsync, rename): a link
    would let a later write to the caller's file change a checkpoint the agent is uploading;
  - ``checkpoint_file(step)`` yields a temporary path in the directory instead, for callers who
    would rather not copy: what they write there is renamed into place when the block ends;
  - only the newest ``keep`` (3, the server's retention for a command job) are kept on disk.

checkpoint() returns when the agent accepted the event, the upload then runs in the background.
Before the event it flushes the step events reported so far: the agent files with a checkpoint
the numbers of the step event of the same step, which must therefore arrive first.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
import time
import warnings
from typing import Any, Iterator, Optional, Union

from embody import _env, _report
from embody._api import LocalApiClient, encode_event, events_body
from embody._errors import EmbodyError, NotInJobError

PathLike = Union[str, "os.PathLike[str]"]

KEEP = 3
_STEP_FILE = re.compile(r"step-(\d{1,18})\.ckpt")
_COPY_BLOCK = 8 << 20
# As embody-engine writes its checkpoints: the directory is the job's own (0700) while it runs,
# and the next attempt on this node may run as another uid, which reads the files it adopts
# back only through the others' bit once the agent has given them to root.
_CHECKPOINT_MODE = 0o644
_no_job_warned = False


def checkpoint_path(step: int) -> str:
    """``<EMBODY_CHECKPOINT_DIR>/step-<step>.ckpt``: where checkpoint(…, step) keeps the file.

    Absolute, and spelled as the agent spells the directory (no symbolic link resolved)."""
    name = f"step-{_report.as_step(step)}.ckpt"
    return os.path.join(os.path.abspath(_env.checkpoint_dir()), name)


def checkpoint(path: PathLike, step: int, *, metrics: Optional[dict[str, Any]] = None,
               keep: Optional[int] = KEEP, timeout_s: float = 120.0) -> str:
    """Hands the checkpoint file ``path`` of step ``step`` to the agent, which uploads it to the
    server's blob store; returns where the file is kept (``checkpoint_path(step)``).

    ``path`` is copied there unless it is that file already. ``metrics`` (numbers) are filed
    with the checkpoint for the server's retention (``engine.checkpoint.best``); by default the
    agent takes those of the step event reported for the same step. ``keep``: how many of the
    newest step-N.ckpt files to leave in the directory (None: all).

    Synchronous: returns when the agent accepted the event, waiting out a full queue (429) and
    an agent briefly unreachable for at most ``timeout_s``. Raises EventRefusedError with the
    agent's message on a refusal, NotInJobError when the agent does not know the job, and
    EmbodyError on a rank other than 0 (whose agent URL and directory may be another node's).
    Outside a job the file is still kept (in ./checkpoints) and nothing is sent.
    """
    step, numbers = _check(step, metrics, keep)
    final = checkpoint_path(step)
    source = os.fspath(path)
    os.makedirs(os.path.dirname(final), exist_ok=True)
    if not (os.path.exists(final) and os.path.samefile(source, final)):
        _copy_atomically(source, final)
    elif not os.path.isfile(final):
        raise EmbodyError(f"{final} is not a regular file")
    _announce(final, step, numbers, keep, timeout_s)
    return final


@contextlib.contextmanager
def checkpoint_file(step: int, *, metrics: Optional[dict[str, Any]] = None,
                    keep: Optional[int] = KEEP, timeout_s: float = 120.0) -> Iterator[str]:
    """A path to write step ``step``'s checkpoint to, without a copy:

        with embody.checkpoint_file(step) as path:
            torch.save(state, path)

    The path is a temporary name in the checkpoint directory; when the block ends without an
    exception the file is synced, renamed to ``checkpoint_path(step)`` and handed to the agent
    as checkpoint() does. A block that raises leaves nothing behind.
    """
    step, numbers = _check(step, metrics, keep)
    final = checkpoint_path(step)
    directory = os.path.dirname(final)
    os.makedirs(directory, exist_ok=True)
    fd, temp = tempfile.mkstemp(prefix=f".step-{step}.ckpt.", suffix=".tmp", dir=directory)
    os.close(fd)
    try:
        yield temp
        if os.path.getsize(temp) == 0:
            # e.g. numpy.save, which appends ".npy" to a name without it: the data went elsewhere.
            raise EmbodyError(f"nothing was written to {temp}: write the checkpoint to exactly "
                              "that path")
        os.chmod(temp, _CHECKPOINT_MODE)
        _sync_file(temp)
        os.replace(temp, final)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    _sync_dir(directory)
    _announce(final, step, numbers, keep, timeout_s)


def resume_path() -> Optional[str]:
    """The checkpoint file a restarted or preempted attempt should start from; None on a first
    start (no ``EMBODY_RESUME_FROM``).

    As embody-engine reads it: the newest ``step-<N>.ckpt`` in that file's directory whose step
    is at least the named one's (the job may have written newer ones after the server last heard,
    and pruned the named one), else the named path itself; also when the directory cannot be
    listed, as the agent's download directory cannot by the job.
    """
    named = os.environ.get("EMBODY_RESUME_FROM", "")
    if not named:
        return None
    return newest_checkpoint_from(named)


def newest_checkpoint_from(path: str) -> str:
    """engine::NewestCheckpointFrom: the newest step-N.ckpt beside ``path`` at or after its step;
    ``path`` when there is none (or the directory cannot be listed)."""
    directory, name = os.path.split(path)
    try:
        steps = sorted(int(m.group(1)) for entry in os.listdir(directory or ".")
                       if (m := _STEP_FILE.fullmatch(entry)))
    except OSError:
        return path
    if not steps:
        return path
    named = _STEP_FILE.fullmatch(name)
    if named is None or steps[-1] < int(named.group(1)):
        return path
    return os.path.join(directory, f"step-{steps[-1]}.ckpt")


def _check(step: Any, metrics: Optional[dict[str, Any]],
           keep: Optional[int]) -> tuple[int, Optional[dict[str, Any]]]:
    """The arguments checked before any file is touched: the step, the metrics as JSON numbers,
    ``keep``, and that this is rank 0 (another rank's agent URL and directory may be another
    node's, which does not hold the job's checkpoints)."""
    step = _report.as_step(step)
    numbers = None
    if metrics is not None:
        numbers = {name: _report._number(name, value) for name, value in metrics.items()}
    if keep is not None and (type(keep) is not int or keep < 1):
        raise ValueError(f"keep must be an integer >= 1, or None, got {keep!r}")
    if _env.rank() != 0:
        raise EmbodyError(
            f"checkpoint() on rank {_env.rank()}: checkpoints are rank 0's to report (its node's "
            "agent uploads them); save and report them from rank 0 only")
    return step, numbers


def _announce(final: str, step: int, metrics: Optional[dict[str, Any]], keep: Optional[int],
              timeout_s: float) -> None:
    """Posts the checkpoint event for ``final`` and prunes older files once it is accepted."""
    global _no_job_warned
    event: dict[str, Any] = {"type": "checkpoint", "step": step, "path": final,
                             "bytes": os.stat(final).st_size}
    if metrics is not None:
        event["metrics"] = metrics
    env = _env.job_env()
    if env is None:
        if _env.strict():
            raise NotInJobError(0, "not_found", "not in an Embody job (EMBODY_AGENT_URL is not "
                                "set) and EMBODY_STRICT=1; the checkpoint is kept at " + final)
        if not _no_job_warned:
            _no_job_warned = True
            warnings.warn(f"embody: not in an Embody job; checkpoints are kept in "
                          f"{os.path.dirname(final)} and not uploaded",
                          _report.NotInJobWarning, stacklevel=3)
    else:
        deadline = time.monotonic() + timeout_s
        sink = _report.sink()
        if isinstance(sink, _report.Reporter):
            sink.flush(timeout_s, raise_pending=False)
        client = LocalApiClient(env)
        client.post_until(events_body([encode_event(event)]),
                          max(deadline, time.monotonic() + 1.0))
    if keep is not None:
        _prune(os.path.dirname(final), keep, final)


def _copy_atomically(source: str, final: str) -> None:
    directory = os.path.dirname(final)
    fd, temp = tempfile.mkstemp(prefix=f".{os.path.basename(final)}.", suffix=".tmp",
                                dir=directory)
    try:
        with open(source, "rb") as src, os.fdopen(fd, "wb") as dst:
            shutil.copyfileobj(src, dst, _COPY_BLOCK)
            os.fchmod(dst.fileno(), _CHECKPOINT_MODE)
            dst.flush()
            os.fsync(dst.fileno())
        os.replace(temp, final)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    _sync_dir(directory)


def _sync_file(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _sync_dir(directory: str) -> None:
    """The rename reaches the disk: a node that crashes right after keeps the new name."""
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _prune(directory: str, keep: int, newest: str) -> None:
    """Removes all but the ``keep`` newest step-N.ckpt files, never ``newest``."""
    try:
        steps = sorted(int(m.group(1)) for entry in os.listdir(directory)
                       if (m := _STEP_FILE.fullmatch(entry)))
    except OSError:
        return
    for step in steps[:-keep]:
        path = os.path.join(directory, f"step-{step}.ckpt")
        if path != newest:
            with contextlib.suppress(OSError):
                os.unlink(path)
