"""What the SDK's tests share: a clean environment per case, the SDK's process state reset, the
C++ fixtures found, and child interpreters that import the SDK from this tree."""

from __future__ import annotations

import os
import subprocess
import sys
import unittest
from typing import Optional

SDK_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO = os.path.dirname(os.path.dirname(SDK_DIR))
if SDK_DIR not in sys.path:
    sys.path.insert(0, SDK_DIR)

import embody  # noqa: E402
from embody import _report, _signals  # noqa: E402

# Every variable the SDK reads: a case starts with none of them set.
_VARIABLES = ("EMBODY_AGENT_URL", "EMBODY_JOB_ID", "EMBODY_JOB_TOKEN", "EMBODY_CA_FILE",
              "EMBODY_CHECKPOINT_DIR", "EMBODY_RESUME_FROM", "EMBODY_STRICT", "EMBODY_DATASETS",
              "RANK", "WORLD_SIZE", "LOCAL_RANK", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
              "OMPI_COMM_WORLD_LOCAL_RANK")


class SdkTestCase(unittest.TestCase):
    """Each case runs with the SDK's variables unset (set what it needs with ``setenv``) and a
    fresh reporter and stop flag."""

    def setUp(self) -> None:
        self._saved = {k: os.environ.pop(k) for k in _VARIABLES if k in os.environ}
        _report._reset()
        _signals._reset()

    def tearDown(self) -> None:
        _report._close_and_reset(timeout_s=2.0)
        _signals._reset()
        for k in _VARIABLES:
            os.environ.pop(k, None)
        os.environ.update(self._saved)

    def setenv(self, values: dict[str, str]) -> None:
        os.environ.update(values)


def binary(variable: str, name: str) -> Optional[str]:
    """A C++ fixture: from ``variable`` (ctest sets it; then it must exist), else build/bin."""
    path = os.environ.get(variable)
    if path:
        if not os.path.exists(path):
            raise AssertionError(f"{variable}={path} does not exist: build it first")
        return path
    fallback = os.path.join(REPO, "build", "bin", name)
    return fallback if os.path.exists(fallback) else None


def run_python(code: str, env: dict[str, str], timeout_s: float = 60.0,
               **kwargs: object) -> subprocess.CompletedProcess[str]:
    """Runs ``code`` in a fresh interpreter with the SDK importable and only ``env`` (plus
    PATH) in its environment, as a job's rank would be."""
    child_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": SDK_DIR,
                 "PYTHONDONTWRITEBYTECODE": "1", **env}
    return subprocess.run(  # type: ignore[call-overload]
        [sys.executable, "-c", code], env=child_env, text=True, capture_output=True,
        timeout=timeout_s, **kwargs)


def have_numpy() -> bool:
    try:
        import numpy  # noqa: F401
    except ImportError:
        return False
    return True
