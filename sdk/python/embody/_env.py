"""What a job learns from its environment: the agent to report to, its checkpoint directory, the
checkpoint to resume from, and which rank of how many it is.

The agent starts every rank with ``EMBODY_AGENT_URL``, ``EMBODY_JOB_ID``, ``EMBODY_JOB_TOKEN``,
``EMBODY_CHECKPOINT_DIR``, ``EMBODY_CA_FILE`` (https agents only) and, on a restart,
``EMBODY_RESUME_FROM`` (docs/contracts.md, "Agent <-> job"). A process without
``EMBODY_AGENT_URL`` is not in a job: a laptop, a notebook, CI. One with the URL but without a
usable id or token is a broken launch, which is said at once rather than discovered later as
events that went nowhere.

The environment is read when asked, never cached here: the callers that keep what they read (the
reporter) say so, and tests can change it between cases.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional

from embody._errors import NotInJobError

# Where checkpoints go outside a job: the engine's default too (engine/main.cc).
LOCAL_CHECKPOINT_DIR = "./checkpoints"


@dataclass(frozen=True)
class JobEnv:
    """The job-local API of the job this process belongs to."""

    agent_url: str
    job_id: int
    token: str
    ca_file: str  # "" : the system's CAs (and http:// needs none)


def job_env() -> Optional[JobEnv]:
    """The job this process runs in; None outside any job.

    Raises NotInJobError when ``EMBODY_AGENT_URL`` is set but the id or token is missing or
    malformed: a script started by hand with a copied URL, which should not report into nothing.
    """
    url = os.environ.get("EMBODY_AGENT_URL", "")
    if not url:
        return None
    if not url.startswith(("http://", "https://")):
        raise NotInJobError(0, "invalid_argument",
                            f"EMBODY_AGENT_URL must be an http:// or https:// URL, got {url!r}")
    job_text = os.environ.get("EMBODY_JOB_ID", "")
    token = os.environ.get("EMBODY_JOB_TOKEN", "")
    if not job_text.isdigit() or int(job_text) <= 0:
        raise NotInJobError(0, "invalid_argument",
                            f"EMBODY_AGENT_URL is set but EMBODY_JOB_ID is not a job id "
                            f"({job_text!r})")
    if not token:
        raise NotInJobError(0, "unauthenticated",
                            "EMBODY_AGENT_URL is set but EMBODY_JOB_TOKEN is empty")
    return JobEnv(url, int(job_text), token, os.environ.get("EMBODY_CA_FILE", ""))


def strict() -> bool:
    """``EMBODY_STRICT=1``: reporting outside a job is an error instead of a warning."""
    return os.environ.get("EMBODY_STRICT", "") == "1"


def checkpoint_dir() -> str:
    """The directory the agent uploads checkpoints from; ./checkpoints outside a job.

    Kept exactly as the agent wrote it (not resolved through symbolic links): the agent compares
    a checkpoint's path with its own spelling of the directory, lexically.
    """
    return os.environ.get("EMBODY_CHECKPOINT_DIR", "") or LOCAL_CHECKPOINT_DIR


def _first_int(names: tuple[str, ...], default: int) -> int:
    for name in names:
        text = os.environ.get(name, "")
        if text == "":
            continue
        try:
            return int(text)
        except ValueError:
            raise ValueError(f"{name}={text!r} is not an integer") from None
    return default


def rank() -> int:
    """This process's rank: torch's ``RANK`` first (torchrun sets it), then Open MPI's
    ``OMPI_COMM_WORLD_RANK`` (what an Embody job's mpirun sets); 0 when neither is set."""
    return _first_int(("RANK", "OMPI_COMM_WORLD_RANK"), 0)


def world_size() -> int:
    """How many ranks the job has: ``WORLD_SIZE``, then ``OMPI_COMM_WORLD_SIZE``; 1 otherwise."""
    return _first_int(("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE"), 1)


def local_rank() -> int:
    """This process's rank among those on its node: ``LOCAL_RANK``, then
    ``OMPI_COMM_WORLD_LOCAL_RANK``; 0 otherwise. The index of its GPU in CUDA_VISIBLE_DEVICES
    when each rank has one."""
    return _first_int(("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK"), 0)
