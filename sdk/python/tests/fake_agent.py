"""A stand-in for the agent's job-local API, for the SDK's tests: it judges what the SDK posts as
agent::LocalApi::PostEvents does (agent/local_api/local_api.cc, api/job_event_check.cc), in the same
order, with the same statuses and error bodies, and can be told to answer otherwise (429 with
Retry-After, 5xx) to test the SDK's side of those.

The real API, started alone, is used by test_real_agent.py; this one is what the tests use where
they need an answer the real one gives only in a state hard to reach (a full queue on demand, a
failing agent), and to look at every request as it arrived.
"""

from __future__ import annotations

import http.server
import json
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Optional

MAX_BODY_BYTES = 1024 * 1024
MAX_EVENTS_PER_POST = 1000
MAX_EVENT_BYTES = 64 * 1024
MAX_DEPTH = 32
_TYPE = re.compile(r"[A-Za-z0-9_.:/-]{1,64}")
# A path prefix (an agent behind a proxy that strips it) is allowed before the route.
_ROUTE = re.compile(r"(?:/[^/]+)*/v1/local/jobs/([^/]+)/events")

# The typed fields of the types the platform reads (api/job_event_check.cc): name -> kind.
NUMBER_OR_NULL, RATIO_OR_NULL, COUNT, NON_NEGATIVE, STRING, OBJECT, NUMBER_MAP = range(7)
STEP_RULES = {
    "step": NON_NEGATIVE, "steps": NUMBER_OR_NULL, "loss": NUMBER_OR_NULL,
    "tokens_per_s": NUMBER_OR_NULL, "samples_per_s": NUMBER_OR_NULL,
    "step_seconds": NUMBER_OR_NULL, "lr": NUMBER_OR_NULL, "grad_norm": NUMBER_OR_NULL,
    "data_wait_seconds": NUMBER_OR_NULL, "forward_seconds": NUMBER_OR_NULL,
    "backward_seconds": NUMBER_OR_NULL, "allreduce_seconds": NUMBER_OR_NULL,
    "optimizer_seconds": NUMBER_OR_NULL, "padding_ratio": NUMBER_OR_NULL,
    "packing_efficiency": NUMBER_OR_NULL, "mfu": NUMBER_OR_NULL, "world_size": NUMBER_OR_NULL,
    "grad_wire_bytes": COUNT, "grad_wire_bytes_fp32": COUNT, "env_steps": COUNT,
    "episodes": COUNT, "env_steps_per_s": NUMBER_OR_NULL, "mean_return": NUMBER_OR_NULL,
    "success_rate": RATIO_OR_NULL, "policy_loss": NUMBER_OR_NULL,
    "value_loss": NUMBER_OR_NULL, "entropy": NUMBER_OR_NULL, "approx_kl": NUMBER_OR_NULL,
    "clip_fraction": RATIO_OR_NULL, "rollout_seconds": NUMBER_OR_NULL,
    "update_seconds": NUMBER_OR_NULL, "trajectories_per_s": NUMBER_OR_NULL,
    "staleness": NUMBER_MAP, "staleness_mean": NUMBER_OR_NULL, "staleness_max": COUNT,
    "queue_depth": COUNT, "actor_idle_share": RATIO_OR_NULL,
    "learner_idle_share": RATIO_OR_NULL, "inference_batch": NUMBER_OR_NULL,
    "eval_success_rate": RATIO_OR_NULL, "eval_mean_return": NUMBER_OR_NULL,
    "eval_episodes": COUNT,
}
CHECKPOINT_RULES = {"step": COUNT, "path": STRING, "bytes": COUNT, "metrics": NUMBER_MAP}
CHECKPOINT_REQUIRED = ("step", "path")
_WANT = {
    NUMBER_OR_NULL: "a number", RATIO_OR_NULL: "a number in [0, 1] or null",
    COUNT: "an integer >= 0", NON_NEGATIVE: "a number >= 0", STRING: "a non-empty string",
    OBJECT: "an object", NUMBER_MAP: "an object of numbers",
}


def _is_number(v: Any) -> bool:
    return type(v) in (int, float)


def _type_name(v: Any) -> str:
    # nlohmann's type_name()
    if v is None:
        return "null"
    if type(v) is bool:
        return "boolean"
    if _is_number(v):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    return "object"


def _ok(kind: int, v: Any) -> bool:
    if kind == NUMBER_OR_NULL:
        return v is None or _is_number(v)
    if kind == RATIO_OR_NULL:
        return v is None or (_is_number(v) and 0 <= v <= 1)
    if kind == COUNT:
        return type(v) is int and v >= 0
    if kind == NON_NEGATIVE:
        return _is_number(v) and v >= 0
    if kind == STRING:
        return isinstance(v, str) and v != ""
    if kind == OBJECT:
        return isinstance(v, dict)
    return isinstance(v, dict) and all(x is None or _is_number(x) for x in v.values())


def _depth_or_text(v: Any, depth: int, path: str) -> Optional[tuple[str, str, str]]:
    if depth > MAX_DEPTH:
        return "too_deep", f"nested deeper than {MAX_DEPTH} levels", path
    if isinstance(v, str) and "\x00" in v:
        return "bad_text", "a string that is not UTF-8 or holds NUL (\\u0000)", path
    if isinstance(v, dict):
        for k, x in v.items():
            if "\x00" in k:
                return "bad_text", "a key that is not UTF-8 or holds NUL (\\u0000)", path
            bad = _depth_or_text(x, depth + 1, f"{path}.{k}" if path else k)
            if bad:
                return bad
    if isinstance(v, list):
        for i, x in enumerate(v):
            bad = _depth_or_text(x, depth + 1, f"{path}[{i}]")
            if bad:
                return bad
    return None


def check_event(event: Any) -> Optional[tuple[str, str, str]]:
    """api::CheckJobEvent: None, or (reason, message, field)."""
    if not isinstance(event, dict):
        return "malformed", "an event must be a JSON object", ""
    t = event.get("type")
    if not isinstance(t, str) or t == "":
        return "malformed", "an event needs a string type", "type"
    if len(t) > 64:
        return "bad_type", "type must be at most 64 characters", "type"
    if not _TYPE.fullmatch(t):
        return "bad_type", "type must be made of A-Z a-z 0-9 _ . : / -", "type"
    bad = _depth_or_text(event, 1, "")
    if bad:
        return bad
    if len(json.dumps(event, separators=(",", ":"), ensure_ascii=False).encode()) > MAX_EVENT_BYTES:
        return "too_large", "an event must be at most 64 KiB as JSON", ""
    rules = STEP_RULES if t == "step" else CHECKPOINT_RULES if t == "checkpoint" else {}
    for name, kind in rules.items():
        if name not in event:
            if t == "checkpoint" and name in CHECKPOINT_REQUIRED:
                return "bad_field", f"missing {name}", name
            continue
        if not _ok(kind, event[name]):
            return ("bad_field", f"{name} must be {_WANT[kind]}, got {_type_name(event[name])}",
                    name)
    return None


def error_body(code: str, message: str, field: str = "") -> bytes:
    e = {"code": code, "message": message}
    if field:
        e["field"] = field
    return json.dumps({"error": e}).encode()


@dataclass
class Request:
    path: str
    authorization: Optional[str]
    body: bytes
    status: int
    time: float


@dataclass
class FakeAgent:
    """Serves on 127.0.0.1:<any port> until stop(). ``jobs`` maps job id to its token."""

    jobs: dict[int, str] = field(default_factory=lambda: {7: "token-7"})
    requests: list[Request] = field(default_factory=list)
    accepted: list[dict[str, Any]] = field(default_factory=list)
    # Answers to give instead of judging, oldest first: (status, Retry-After or None, body).
    forced: list[tuple[int, Optional[int], bytes]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)
        agent = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                # For a test driving an agent in another process: what it has taken.
                with agent.lock:
                    reply = json.dumps({"accepted": len(agent.accepted)}).encode()
                self.send_response(200 if self.path == "/test/accepted" else 404)
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length)
                status, retry_after, reply = agent.answer(self.path,
                                                          self.headers.get("Authorization"), body)
                self.send_response(status)
                if retry_after is not None:
                    self.send_header("Retry-After", str(retry_after))
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        # stop() waits for serve_forever to notice the shutdown, which it checks once a poll
        # interval (0.5 s by default: half a second added to every case that starts an agent).
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       kwargs={"poll_interval": 0.01}, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def env(self, job_id: int = 7, token: Optional[str] = None) -> dict[str, str]:
        """The variables the agent gives a rank of job ``job_id``."""
        return {"EMBODY_AGENT_URL": self.url, "EMBODY_JOB_ID": str(job_id),
                "EMBODY_JOB_TOKEN": token if token is not None else self.jobs.get(job_id, "x")}

    def answer(self, path: str, authorization: Optional[str],
               body: bytes) -> tuple[int, Optional[int], bytes]:
        status, retry_after, reply, events = self._judge(path, authorization, body)
        with self.changed:
            self.requests.append(Request(path, authorization, body, status, time.monotonic()))
            self.accepted.extend(events)
            self.changed.notify_all()
        return status, retry_after, reply

    def _judge(self, path: str, authorization: Optional[str],
               body: bytes) -> tuple[int, Optional[int], bytes, list[dict[str, Any]]]:
        with self.lock:
            if self.forced:
                status, retry_after, reply = self.forced.pop(0)
                return status, retry_after, reply, []
        m = _ROUTE.fullmatch(path)
        if m is None:
            return 404, None, error_body("not_found", f"no route for {path}"), []
        job = int(m.group(1)) if m.group(1).isdigit() else -1
        if job not in self.jobs:
            return 404, None, error_body("not_found", f"job {job} is not running here"), []
        if authorization != f"Bearer {self.jobs[job]}":
            return 401, None, error_body("unauthenticated", "missing or wrong job token"), []
        if len(body) > MAX_BODY_BYTES:
            return 400, None, error_body("invalid_argument", "body too large"), []
        try:
            parsed = json.loads(body, parse_constant=_refuse_constant)
        except ValueError:
            parsed = None
        if not isinstance(parsed, dict):
            return 400, None, error_body("invalid_argument", "body must be a JSON object"), []
        events = parsed["events"] if "events" in parsed else [parsed]
        if not isinstance(events, list):
            return 400, None, error_body("invalid_argument", "events must be an array"), []
        if len(events) > MAX_EVENTS_PER_POST:
            return 400, None, error_body("invalid_argument", "too many events"), []
        for i, event in enumerate(events):
            bad = check_event(event)
            if bad:
                reason, message, at = bad
                where = f"events[{i}]"
                return (400, None, error_body("invalid_argument",
                                              f"{where}: {message} ({reason})",
                                              f"{where}.{at}" if at else where), [])
        return 202, None, json.dumps({"accepted": len(events)}).encode(), events

    def wait_for(self, predicate: Any, timeout_s: float = 10.0) -> bool:
        """Waits until predicate(self) holds (checked under the lock after each request)."""
        deadline = time.monotonic() + timeout_s
        with self.changed:
            while not predicate(self):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.changed.wait(left)
        return True


def _refuse_constant(name: str) -> Any:
    # nlohmann's parser knows no NaN or Infinity: a body holding one is not JSON to the agent.
    raise ValueError(name)



if __name__ == "__main__":
    # An agent in a process of its own, so that its work is not counted as the client's:
    # prints its URL, serves until stdin closes.
    import sys
    serving = FakeAgent()
    print(serving.url, flush=True)
    sys.stdin.read()
    serving.stop()
