"""The exceptions of the SDK, and how an error body of the job-local API becomes one.

The agent answers errors with the same body as embody-server, ``{"error": {"code", "message",
"field"?}}`` (common/http/status_http.h). They are decoded here the way the C++ clients decode
them (``StatusFromResponse``): the body's code is believed only when the HTTP status is the one the
server gives that code, so a proxy's 503 in front of a stale body cannot pick the exception.
"""

from __future__ import annotations

import json
from typing import Any, Optional

# HTTP status of each code, as common/http/status_http.cc maps them.
_STATUS_OF_CODE = {
    "invalid_argument": 400,
    "unimplemented": 400,
    "not_found": 404,
    "already_exists": 409,
    "failed_precondition": 409,
    "unauthenticated": 401,
    "permission_denied": 403,
    "resource_exhausted": 429,
    "unavailable": 503,
    "unprocessable": 422,
    "precondition_failed": 412,
    "internal": 500,
}

# Code of each HTTP status a body does not settle (CodeForHttpStatus).
_CODE_OF_STATUS = {
    400: "invalid_argument",
    401: "unauthenticated",
    403: "permission_denied",
    404: "not_found",
    409: "failed_precondition",
    412: "precondition_failed",
    422: "unprocessable",
    429: "resource_exhausted",
    500: "internal",
    501: "unimplemented",
}


class EmbodyError(Exception):
    """Base of every error the SDK raises on its own account."""


class ApiError(EmbodyError):
    """An answer of the job-local API other than 202, with the server's own words.

    ``status`` is the HTTP status, ``code`` the error code (``invalid_argument``, ...),
    ``message`` the server's message and ``field`` what it names at fault (``events[0].loss``),
    or ``""``.
    """

    def __init__(self, status: int, code: str, message: str, field: str = "") -> None:
        super().__init__(f"{message} (field {field})" if field else message)
        self.status = status
        self.code = code
        self.message = message
        self.field = field


class NotInJobError(ApiError):
    """The agent does not know this job or its token (401, 404), or there is no job at all.

    Raised on every later call too: nothing this process reports can reach the job's record.
    Outside a job it is raised only with ``EMBODY_STRICT=1`` (otherwise reporting warns once and
    does nothing, so a script runs the same on a laptop).
    """


class EventRefusedError(ApiError):
    """The agent refused an event (400): the message says which field and why.

    ``event`` is the refused event as the SDK sent it, when known. A post is refused whole by the
    agent; the SDK sends the other events of the batch again, so only this one is lost.
    """

    def __init__(self, status: int, code: str, message: str, field: str = "",
                 event: Optional[dict[str, Any]] = None) -> None:
        super().__init__(status, code, message, field)
        self.event = event


class AgentBusyError(ApiError):
    """The agent's event queue stayed full (429) past the caller's deadline."""


class AgentUnavailableError(EmbodyError):
    """The agent could not be reached, or answered 5xx, until the caller's deadline."""


class DataError(EmbodyError):
    """A dataset that cannot be read as one: a bad manifest, a damaged shard, a missing file."""


class ChecksumError(DataError):
    """A chunk, or a shard's index, whose bytes do not match the checksum written with them."""


def error_from_response(status: int, body: bytes) -> ApiError:
    """The exception for an HTTP answer that is not 202, decoded like the C++ clients do."""
    code = _CODE_OF_STATUS.get(status)
    if code is None:
        code = "unavailable" if 500 <= status <= 599 else (
            "invalid_argument" if 400 <= status <= 499 else "internal")
    text = body.decode("utf-8", "replace")
    message = f"HTTP {status}" + (f": {text[:200]}" if text else "")
    field = ""
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = None
    error = parsed.get("error") if isinstance(parsed, dict) else None
    if isinstance(error, dict):
        if isinstance(error.get("message"), str) and error["message"]:
            message = error["message"]
        else:
            message = f"HTTP {status}"
        if isinstance(error.get("field"), str):
            field = error["field"]
        named = error.get("code")
        if isinstance(named, str) and named != "ok" and _STATUS_OF_CODE.get(named) == status:
            code = named
    if status in (401, 404):
        return NotInJobError(status, code, message, field)
    if status == 429:
        return AgentBusyError(status, code, message, field)
    if 400 <= status <= 499:
        return EventRefusedError(status, code, message, field)
    return ApiError(status, code, message, field)
