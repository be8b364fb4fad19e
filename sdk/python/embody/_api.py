"""The client of the job-local API: one POST of events, with the agent's answers made exceptions.

    POST {EMBODY_AGENT_URL}/v1/local/jobs/{EMBODY_JOB_ID}/events
    Authorization: Bearer {EMBODY_JOB_TOKEN}
    {"events": [{...}, ...]}

The agent answers 202 ``{"accepted": N}``, or refuses the post whole (agent/local_api/local_api.h): 400 a bad
body or event (the message names ``events[i]`` and the field), 401 a wrong token, 404 a job not
running there, 429 with ``Retry-After`` when its event queue has no room. Nothing of a refused
post is kept, so sending it again (or its good events) never duplicates anything.

Only the standard library: every job's python3 imports this without installing anything. urllib
is used without proxies: the agent is on this machine, and a proxy variable set for the internet
must not carry a job's token anywhere else. ``post`` makes one attempt; ``post_until`` retries 429
(after the agent's Retry-After) and unreachable agents until a deadline, for the calls that must
know the agent took their events (checkpoints).
"""

from __future__ import annotations

import http.client
import json
import math
import ssl
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any, Optional, Sequence

from embody._env import JobEnv
from embody._errors import AgentBusyError, AgentUnavailableError, ApiError, error_from_response

# The agent's bounds (agent/local_api/local_api.h, api/job_event_check.h).
MAX_BODY_BYTES = 1024 * 1024
MAX_EVENTS_PER_POST = 1000
MAX_EVENT_BYTES = 64 * 1024

# A Retry-After the SDK will not wait past in one go (the agent says 5 s).
_MAX_RETRY_AFTER_S = 60.0


@dataclass
class Reply:
    """One attempt's outcome: ``error`` is None on 202; ``retry_after_s`` is set on 429."""

    status: int
    error: Optional[ApiError] = None
    retry_after_s: float = 0.0


def encode_event(event: dict[str, Any]) -> bytes:
    """Compact JSON of one event, as the agent measures it. Raises ValueError on NaN or an
    infinity (JSON has none: the agent would refuse the whole post as unreadable)."""
    return json.dumps(event, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False).encode("utf-8")


def events_body(encoded: Sequence[bytes]) -> bytes:
    return b'{"events":[' + b",".join(encoded) + b"]}"


def _retry_after(value: Optional[str]) -> float:
    """Seconds of a Retry-After header: an integer, as the agent sends; 1 s for anything else
    (an HTTP date from some proxy), so a client never spins."""
    try:
        seconds = float(value) if value is not None else 1.0
    except ValueError:
        return 1.0
    if not math.isfinite(seconds) or seconds < 0:
        return 1.0
    return min(seconds, _MAX_RETRY_AFTER_S)


class LocalApiClient:
    """Posts events of one job to its agent. Thread-safe (each post is its own request)."""

    def __init__(self, env: JobEnv, timeout_s: float = 5.0) -> None:
        self.env = env
        self.url = f"{env.agent_url.rstrip('/')}/v1/local/jobs/{env.job_id}/events"
        self.timeout_s = timeout_s
        handlers: list[urllib.request.BaseHandler] = [urllib.request.ProxyHandler({})]
        if env.agent_url.startswith("https://"):
            # The agent's certificate names 127.0.0.1 in its subjectAltName and chains to the CA
            # file the agent hands its jobs (docs/contracts.md, --ca-file).
            context = ssl.create_default_context(cafile=env.ca_file or None)
            handlers.append(urllib.request.HTTPSHandler(context=context))
        self._opener = urllib.request.build_opener(*handlers)

    def post(self, body: bytes) -> Reply:
        """One attempt. Raises AgentUnavailableError when the agent cannot be reached at all."""
        request = urllib.request.Request(
            self.url, data=body, method="POST",
            headers={"Authorization": f"Bearer {self.env.token}",
                     "Content-Type": "application/json"})
        try:
            with self._opener.open(request, timeout=self.timeout_s) as response:
                response.read()
                return Reply(response.status)
        except urllib.error.HTTPError as e:
            payload = e.read() if e.fp is not None else b""
            reply = Reply(e.code, error_from_response(e.code, payload))
            if e.code == 429:
                reply.retry_after_s = _retry_after(e.headers.get("Retry-After"))
            return reply
        except (urllib.error.URLError, OSError, http.client.HTTPException, ValueError) as e:
            # HTTPException: a reply that is not HTTP (the connection cut mid-answer);
            # ValueError: a URL http.client cannot use (a port that is not a number).
            reason = getattr(e, "reason", e)
            raise AgentUnavailableError(f"cannot reach the agent at {self.url}: {reason}") from None

    def post_until(self, body: bytes, deadline: float) -> None:
        """Posts until the agent takes the events, waiting out 429s (Retry-After) and retrying an
        unreachable agent or a 5xx with backoff, until ``deadline`` (time.monotonic()).

        Raises the refusal (EventRefusedError, NotInJobError) at once: trying again would get the
        same answer. Raises AgentBusyError or AgentUnavailableError when the deadline passes.
        """
        backoff = 0.1
        while True:
            wait: float
            try:
                reply = self.post(body)
            except AgentUnavailableError as e:
                last: Exception = e
                wait = backoff
                backoff = min(backoff * 2, 2.0)
            else:
                if reply.error is None:
                    return
                if reply.status == 429:
                    last, wait = reply.error, reply.retry_after_s
                elif reply.status >= 500:
                    last, wait = reply.error, backoff
                    backoff = min(backoff * 2, 2.0)
                else:
                    raise reply.error
            if time.monotonic() + wait > deadline:
                if isinstance(last, ApiError) and last.status == 429:
                    raise AgentBusyError(last.status, last.code,
                                         f"{last.message} (still full at the deadline)",
                                         last.field)
                if isinstance(last, AgentUnavailableError):
                    raise last
                raise AgentUnavailableError(f"the agent answered {last}") from None
            time.sleep(wait)
