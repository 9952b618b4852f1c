"""What the gateway notes about each request: its id, who asked what, how it ended.

One `RequestNote` per HTTP request or WebSocket connection, reachable from anywhere
the request runs through a context variable (`current`): `authorize` writes the
agent, the view and the compiled path the operation and its path, every error a
client receives takes its `requestId` from it (`request_id`) and the first error's
code is kept (`note_error`). `gql.server.front.Front` makes the note, and at the end writes
the one log line (`log_line`) and the metrics.
"""

from __future__ import annotations

import asyncio
import atexit
import itertools
import logging
import os
import sys
import time
from contextvars import ContextVar
from dataclasses import dataclass
from typing import IO

import orjson

REQUEST_LOG = "edgeloom.requests"
log = logging.getLogger(REQUEST_LOG)

# A client-chosen operationName is logged, cut to this length.
MAX_NAME = 100


@dataclass(slots=True)
class RequestNote:
    """One request, as its log line and its metrics tell it."""

    number: int
    path: str
    started: float
    agent: str | None = None
    # The root field the operation asks for (`MULTIPLE`, `UNKNOWN`), from the schema.
    operation: str | None = None
    operation_name: str | None = None
    # "compiled" or "ordinary" (strawberry); None: refused before either ran.
    route: str | None = None
    # The code of the first error the client receives.
    code: str | None = None
    status: int = 0

    @property
    def id(self) -> str:
        """The request's id (made when asked for: most requests never need it)."""
        return f"{_PREFIX}-{self.number:x}"


_NOTE: ContextVar[RequestNote | None] = ContextVar("edgeloom_request", default=None)
# Unique across the processes of one gateway and its restarts (random prefix), and
# cheap to make (a counter, not a random draw per request).
_PREFIX = os.urandom(4).hex()
_COUNTER = itertools.count(1)


def new_note(path: str, started: float) -> RequestNote:
    """The note of a request starting now; `current` returns it while it runs."""
    note = RequestNote(next(_COUNTER), path, started)
    _NOTE.set(note)
    return note


def current() -> RequestNote | None:
    return _NOTE.get()


def request_id() -> str | None:
    """The id of the request running, which every error it answers carries."""
    note = _NOTE.get()
    return None if note is None else note.id


def note_error(code: object) -> None:
    """The request answers an error with this code (the first one is logged)."""
    note = _NOTE.get()
    if note is not None and note.code is None and isinstance(code, str):
        note.code = code


def note_agent(agent: str | None) -> None:
    note = _NOTE.get()
    if note is not None and agent is not None:
        note.agent = agent


def note_operation(operation: str, name: str | None, route: str | None = None) -> None:
    note = _NOTE.get()
    if note is None:
        return
    if note.operation is None:
        note.operation = operation
        note.operation_name = None if name is None else name[:MAX_NAME]
    if route is not None:
        note.route = route


def note_route(route: str) -> None:
    note = _NOTE.get()
    if note is not None:
        note.route = route


_second = -1
_second_text = ""


def _stamp(now: float) -> str:
    """`now` (time.time()) in ISO 8601, UTC, to the millisecond; the date and time of day
    are formatted once a second (a datetime's isoformat per request costs more than the
    rest of the line)."""
    global _second, _second_text
    second = int(now)
    if second != _second:
        _second_text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        _second = second
    return f"{_second_text}.{int((now - second) * 1000):03d}Z"


def log_line(note: RequestNote, seconds: float, now: float | None = None) -> bytes:
    """The request's log line (ended at `now`, time.time()): never its variables, content
    or token."""
    return orjson.dumps(
        {
            "time": _stamp(time.time() if now is None else now),
            "requestId": note.id,
            "operation": note.operation,
            "operationName": note.operation_name,
            "agent": note.agent,
            "path": note.path,
            "route": note.route,
            "durationMs": round(seconds * 1000, 3),
            "status": note.status,
            "code": note.code,
        }
    )


# `serve` logs one in this many answered requests; every error and every slow one.
DEFAULT_EVERY = 100
DEFAULT_SLOW_SECONDS = 1.0


class LineSink:
    """Writes the request log's lines, gathered for a fifth of a second so that a busy
    gateway makes one write for many requests, not one each, and made then, off the
    requests' way. Lines reach it without the logging module, whose records cost
    several times the line itself.

    A request that failed (a status of 400 or more, or an error code) or took `slow`
    seconds or more is always logged; of the others one in `every`: on small reads the
    line costs several percent of the gateway's throughput, and the metrics count them all.
    """

    def __init__(
        self, stream: IO[bytes], delay: float = 0.2, every: int = 1, slow: float = 0.0
    ) -> None:
        self.stream = stream
        self.delay = delay
        self.every = max(every, 1)
        self.slow = slow
        self._passed = 0
        self._ended: list[tuple[RequestNote, float, float]] = []

    def add(self, note: RequestNote, seconds: float) -> None:
        if (
            self.every > 1
            and seconds < self.slow
            and note.code is None
            and 0 < note.status < 400  # 0: it never answered
        ):
            self._passed += 1
            if self._passed < self.every:
                return
            self._passed = 0
        self._ended.append((note, seconds, time.time()))
        if len(self._ended) > 1:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.flush()
            return
        loop.call_later(self.delay, self.flush)

    def flush(self) -> None:
        ended, self._ended = self._ended, []
        if ended:
            lines = [log_line(note, seconds, now) for note, seconds, now in ended]
            try:
                self.stream.write(b"\n".join(lines) + b"\n")
                self.stream.flush()
            except (OSError, ValueError):  # stderr closed: nowhere left to write
                pass


sink: LineSink | None = None
"""Where `edgeloom serve` sends the request log (stderr); None: to the logger
`edgeloom.requests` at info, like any log (tests read it there)."""


def write_line(note: RequestNote, seconds: float) -> None:
    """Log the request's line, to the sink or the logger."""
    if sink is not None:
        sink.add(note, seconds)
    elif log.isEnabledFor(logging.INFO):
        log.info(log_line(note, seconds).decode())


def configure_request_log(
    stream: IO[bytes] | None = None, every: int = 1, slow: float = DEFAULT_SLOW_SECONDS
) -> None:
    """Send the request log, one JSON object a line, to `stream` (stderr): every failed or
    slow request's line and one in `every` of the others (`LineSink`).

    Once per process (each worker of `serve --workers` calls it); the lines go out
    bare, without the level and logger name the other logs carry.
    """
    global sink
    if sink is None:
        sink = LineSink(stream or sys.stderr.buffer, every=every, slow=slow)
        atexit.register(sink.flush)
