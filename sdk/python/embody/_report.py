"""report(): step events that cost the training loop almost nothing, delivered in the background.

A call checks its arguments, builds the event and appends it to a bounded queue: a few
microseconds, nothing that waits on the network. A daemon thread sends what is queued as one post
every ``flush_interval_s`` (0.2 s, as embody-engine's reporter does) or as soon as a full batch
(1,000 events, the agent's limit per post) is waiting, and once more when the process exits.

What becomes of each answer:
  - 202: delivered.
  - 429 (the agent's queue is full): the same batch again after the agent's Retry-After; events
    reported meanwhile wait behind it, the oldest dropped once 10,000 wait (step events are
    samples: later ones supersede them, and the agent drops old ones the same way).
  - 400: the agent refused the post whole and names the bad event (``events[i]...``). That event
    is dropped and kept as an EventRefusedError, the rest of the batch is sent again, and the
    error is raised by the next report() or flush() on any thread: an event is refused long after
    the call that made it returned, and the next call is the first place a program can hear of
    it. Later refusals before that one is raised are counted in its message.
  - 401 / 404 (the token or job is not the agent's): nothing can ever be delivered; the queue is
    dropped and every later call raises NotInJobError.
  - the agent unreachable, or 5xx: the batch is tried three times more (0.2, 0.4, 0.8 s apart),
    then dropped with a warning at most once a minute. Training never stops for a missing chart,
    which is also how the engine behaves.
At exit the thread gets up to 10 s to deliver what is left; a refusal still pending then is
written to stderr, since nothing is left to raise it to.

Only rank 0 reports, as embody-engine does: every rank's loss would chart the same step N times.
Other ranks' calls check their arguments and return.
"""

from __future__ import annotations

import atexit
import collections
import math
import os
import re
import sys
import threading
import time
import warnings
from typing import Any, Optional

from embody import _env
from embody._api import (MAX_BODY_BYTES, MAX_EVENTS_PER_POST, LocalApiClient, encode_event,
                         events_body)
from embody._errors import AgentUnavailableError, ApiError, EventRefusedError, NotInJobError

MAX_QUEUE = 10_000
FLUSH_INTERVAL_S = 0.2
EXIT_FLUSH_S = 10.0
_UNREACHABLE_RETRIES_S = (0.2, 0.4, 0.8)
_WARN_EVERY_S = 60.0

# "events[3]" or "events[3].loss": the event of a refused post the agent names.
_EVENT_INDEX = re.compile(r"events\[(\d+)\]")


class NotInJobWarning(UserWarning):
    """Reported outside a job: nothing is sent (set EMBODY_STRICT=1 to make it an error)."""


def _number(name: str, value: Any) -> Optional[float | int]:
    """A metric's value as JSON can carry it: an int or float, NaN and infinities as null (the
    contract: "a NaN arrives as null"). Anything else is refused before it is queued."""
    kind = type(value)
    if kind is float:
        return value if math.isfinite(value) else None
    if kind is int or value is None:
        return value
    if kind is bool:
        raise TypeError(f"metric {name!r} is a bool; report a number (int({name}))")
    # numpy scalars and other real numbers; a 0-d tensor is refused on purpose: .item() waits
    # for the device, a cost the caller should see and choose.
    import numbers
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        f = float(value)
        return f if math.isfinite(f) else None
    hint = " (call .item() on a tensor)" if hasattr(value, "item") else ""
    raise TypeError(f"metric {name!r} must be a number, got {kind.__name__}{hint}")


def as_step(step: Any) -> int:
    """A step number as the agent takes it: an integer >= 0 (bool refused: True is no step)."""
    if type(step) is not int:
        import numbers
        if type(step) is bool or not isinstance(step, numbers.Integral):
            raise TypeError(f"step must be an int, got {type(step).__name__}")
        step = int(step)
    if step < 0:
        raise ValueError(f"step must be >= 0, got {step}")
    return step


def step_event(step: Optional[int], metrics: dict[str, Any]) -> dict[str, Any]:
    """The ``step`` event of report(step, **metrics); raises TypeError/ValueError on bad input."""
    event: dict[str, Any] = {"type": "step"}
    if step is not None:
        event["step"] = as_step(step)
    for name, value in metrics.items():
        if name == "type":
            raise ValueError("'type' is not a metric name: it names the event")
        event[name] = _number(name, value)
    return event


class Reporter:
    """The queue and the thread that sends it. One per process (see ``sink()``)."""

    def __init__(self, client: LocalApiClient, flush_interval_s: float = FLUSH_INTERVAL_S,
                 max_queue: int = MAX_QUEUE) -> None:
        self._client = client
        self._interval = flush_interval_s
        self._max_queue = max_queue
        self._cv = threading.Condition(threading.Lock())
        self._queue: collections.deque[dict[str, Any]] = collections.deque()
        # flush() waits for as many events to be done as had been queued when it was called;
        # events leave the queue oldest first, so those are the ones it waits for.
        self._queued = 0  # events ever queued
        self._finished = 0  # events ever taken off the queue and done with (sent or dropped)
        self._flush_asked = False
        self._stop = False
        self._exit_deadline = math.inf
        self._pending: Optional[EventRefusedError] = None
        self._more_refused = 0
        self._fatal: Optional[NotInJobError] = None
        self._thread: Optional[threading.Thread] = None
        self.dropped = 0  # events lost: no room, unreachable agent, refused
        self.sent = 0
        self._last_warning = -math.inf

    # -- the caller's side ------------------------------------------------------------------

    def post(self, event: dict[str, Any]) -> None:
        """Queues an event; raises the refusal a previous post earned, if any."""
        if self._pending is not None or self._fatal is not None:
            self._raise_pending()
        with self._cv:
            if self._thread is None:
                self._start()
            self._queue.append(event)
            self._queued += 1
            if len(self._queue) > self._max_queue:
                self._queue.popleft()
                self._finished += 1
                self.dropped += 1
            if len(self._queue) == MAX_EVENTS_PER_POST:
                self._cv.notify_all()

    def flush(self, timeout_s: Optional[float] = 30.0, raise_pending: bool = True) -> bool:
        """Waits until every event queued before the call is done with (delivered or dropped).
        Raises a pending refusal (unless ``raise_pending`` is False: the next call raises it).
        False when ``timeout_s`` passed first (the agent kept answering 429)."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        with self._cv:
            target = self._queued
            self._flush_asked = True
            self._cv.notify_all()
            while self._finished < target and self._fatal is None and self._thread is not None:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    break
                self._cv.wait(left)
            done = self._finished >= target
        if raise_pending:
            self._raise_pending()
        return done

    def close(self, timeout_s: float = EXIT_FLUSH_S) -> None:
        """Delivers what is queued (within ``timeout_s``, Retry-After waits included) and stops
        the thread. Idempotent."""
        with self._cv:
            self._stop = True
            self._exit_deadline = min(self._exit_deadline, time.monotonic() + timeout_s)
            self._cv.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join(max(0.0, self._exit_deadline - time.monotonic()) + 1.0)
        with self._cv:
            left = self._queued - self._finished
        if left:
            sys.stderr.write(f"embody: {left} reported events were not delivered before exit\n")
        if self._pending is not None:
            sys.stderr.write(f"embody: an event was refused: {self._pending}\n")

    def _raise_pending(self) -> None:
        with self._cv:
            if self._fatal is not None:
                raise self._fatal
            error, more = self._pending, self._more_refused
            self._pending, self._more_refused = None, 0
        if error is not None:
            if more:
                error.args = (f"{error.args[0]} (and {more} more events refused since)",)
            raise error

    # -- the thread's side --------------------------------------------------------------------

    def _start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="embody-report", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            with self._cv:
                self._cv.wait_for(lambda: self._stop or self._flush_asked or
                                  len(self._queue) >= MAX_EVENTS_PER_POST, self._interval)
                self._flush_asked = False
                if self._fatal is not None:
                    self.dropped += len(self._queue)
                    self._finished += len(self._queue)
                    self._queue.clear()
                # Taken under the lock, encoded outside it: report() never waits on json.
                n = min(len(self._queue), MAX_EVENTS_PER_POST)
                batch = [self._queue.popleft() for _ in range(n)]
                stopping = self._stop and not self._queue
            if batch:
                try:
                    self._send_all(batch)
                except Exception as e:  # a bug here must not leave flush() waiting forever
                    self.dropped += len(batch)
                    self._warn(f"embody: reporting failed, {len(batch)} events dropped: {e!r}")
            with self._cv:
                self._finished += len(batch)
                self._cv.notify_all()
            if stopping and not batch:
                return

    def _send_all(self, events: list[dict[str, Any]]) -> None:
        """Sends ``events`` in posts of at most the agent's body size. Never raises."""
        body: list[tuple[dict[str, Any], bytes]] = []
        size = 16  # {"events":[]}
        for event in events:
            try:
                encoded = encode_event(event)
            except (TypeError, ValueError) as e:  # report() builds none of these; kept safe
                self.dropped += 1
                self._refused(EventRefusedError(400, "invalid_argument",
                                                f"an event that is not JSON: {e}", event=event))
                continue
            if body and size + len(encoded) + 1 > MAX_BODY_BYTES:
                self._send(body)
                body, size = [], 16
            body.append((event, encoded))
            size += len(encoded) + 1
        if body:
            self._send(body)

    def _send(self, batch: list[tuple[dict[str, Any], bytes]]) -> None:
        """Delivers ``batch``, or the part of it the agent takes. Never raises."""
        failures = 0
        while batch:
            error: Optional[ApiError | AgentUnavailableError]
            try:
                reply = self._client.post(events_body([encoded for _, encoded in batch]))
                error = reply.error
            except AgentUnavailableError as e:
                reply, error = None, e
            if error is None:
                self.sent += len(batch)
                return
            if reply is not None and reply.status == 429:
                if self._sleep(reply.retry_after_s):
                    continue
                break  # exiting, and the wait would pass the exit deadline
            if isinstance(error, NotInJobError):
                with self._cv:
                    self._fatal = error
                    self._cv.notify_all()
                break
            if isinstance(error, EventRefusedError):
                match = _EVENT_INDEX.match(error.field)
                index = int(match.group(1)) if match else -1
                if 0 <= index < len(batch):
                    error.event = batch[index][0]
                    self._refused(error)
                    del batch[index]
                    self.dropped += 1
                    continue
                self._refused(error)  # the body as a whole: nothing of it can go
                break
            # Unreachable, or 5xx: a few tries, then the batch is given up.
            if failures < len(_UNREACHABLE_RETRIES_S) and self._sleep(
                    _UNREACHABLE_RETRIES_S[failures]):
                failures += 1
                continue
            self._warn(f"embody: cannot deliver {len(batch)} reported events, dropped: {error}")
            break
        self.dropped += len(batch)

    def _sleep(self, seconds: float) -> bool:
        """Waits ``seconds``; False, at once, when the process is exiting and the wait would end
        past the exit deadline (the caller then gives up)."""
        end = time.monotonic() + seconds
        with self._cv:
            while True:
                if self._stop and end > self._exit_deadline:
                    return False
                left = end - time.monotonic()
                if left <= 0:
                    return True
                self._cv.wait(left)

    def _refused(self, error: EventRefusedError) -> None:
        with self._cv:
            if self._pending is None:
                self._pending = error
            else:
                self._more_refused += 1

    def _warn(self, message: str) -> None:
        now = time.monotonic()
        if now - self._last_warning >= _WARN_EVERY_S:
            self._last_warning = now
            sys.stderr.write(message + "\n")


# -- the process's reporter ------------------------------------------------------------------


class _Discard:
    """Where the reports of a process that sends none go: other ranks than 0, or no job."""

    def post(self, event: dict[str, Any]) -> None:
        pass


class _Refuse:
    """Outside a job with EMBODY_STRICT=1: every report is an error."""

    def __init__(self, error: NotInJobError) -> None:
        self.error = error

    def post(self, event: dict[str, Any]) -> None:
        raise self.error


_lock = threading.Lock()
_sink: Optional[Reporter | _Discard | _Refuse] = None


def sink() -> Reporter | _Discard | _Refuse:
    """Where this process's reports go, decided once (the environment of a job does not change):
    the reporter on rank 0 of a job; nowhere on other ranks, or outside a job after one
    warning; an error outside a job with EMBODY_STRICT=1. Raises NotInJobError for a job
    environment that is broken (EMBODY_AGENT_URL without a job id or token)."""
    global _sink
    with _lock:
        if _sink is not None:
            return _sink
        env = _env.job_env()
        if env is None and _env.strict():
            _sink = _Refuse(NotInJobError(
                0, "not_found",
                "not in an Embody job (EMBODY_AGENT_URL is not set) and EMBODY_STRICT=1"))
        elif env is None:
            warnings.warn("embody: not in an Embody job (EMBODY_AGENT_URL is not set); reports "
                          "are not sent", NotInJobWarning, stacklevel=3)
            _sink = _Discard()
        elif _env.rank() != 0:
            _sink = _Discard()
        else:
            _sink = Reporter(LocalApiClient(env))
        return _sink


def report(step: Optional[int] = None, **metrics: Any) -> None:
    """Reports one training step: ``embody.report(step=100, loss=0.31, lr=3e-4)``.

    Sent as a ``step`` event, charted by the dashboard and stored like embody-engine's. The
    fields the platform reads (docs/contracts.md) are ``loss``, ``lr``, ``grad_norm``,
    ``tokens_per_s``, ``samples_per_s``, ``step_seconds``, ...; any other numeric field is kept.

    Values must be numbers (int, float, numpy scalars) or None: anything else raises TypeError
    here, before anything is queued. NaN and infinities are sent as null. Returns at once;
    delivery is in the background (see the module's description), and an event the agent
    refused is raised as EventRefusedError by a later report() or flush(). Only rank 0's reports
    are sent.
    """
    event = step_event(step, metrics)
    (_sink or sink()).post(event)


def flush(timeout_s: Optional[float] = 30.0) -> bool:
    """Waits until every event reported so far is done with: delivered, or dropped (refused, or
    the agent unreachable through the retries). Raises a refusal still pending. False when
    ``timeout_s`` passed first (the agent kept answering 429). Where nothing is sent (outside a
    job, ranks other than 0), True at once."""
    s = _sink
    return s.flush(timeout_s) if isinstance(s, Reporter) else True


def _close_at_exit(timeout_s: float = EXIT_FLUSH_S) -> None:
    s = _sink
    if isinstance(s, Reporter):
        s.close(timeout_s)


def _reset() -> None:
    """Forgets the process's sink (in a child of fork, and for tests): the child has the
    parent's queue but not its thread, so it starts afresh."""
    global _sink, _lock
    _sink = None
    _lock = threading.Lock()


def _close_and_reset(timeout_s: float = EXIT_FLUSH_S) -> None:
    """For tests: delivers, stops and forgets the reporter."""
    _close_at_exit(timeout_s)
    _reset()


atexit.register(_close_at_exit)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset)
