"""What the gateway notes about each request: its id, who asked what, how it ended.

One `RequestNote` per HTTP request or WebSocket connection, reachable from anywhere
the request runs through a context variable (`current`): `authorize` writes the
agent, the view and the compiled path the operation and its path, every error a
client receives takes its `requestId` from it (`request_id`) and the first error's
code is kept (`note_error`). `gql.front.Front` makes the note, and at the end writes
the one log line (`log_line`) and the metrics.
"""

from __future__ import annotations

import itertools
import logging
import os
import sys
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import IO

import orjson
from graphql import (
    DocumentNode,
    FieldNode,
    GraphQLSchema,
    OperationType,
)
from graphql.utilities import get_operation_ast

REQUEST_LOG = "edgeloom.requests"
log = logging.getLogger(REQUEST_LOG)

# A client-chosen operationName is logged, cut to this length.
MAX_NAME = 100
# The operation label of a document whose root fields are not all the schema's (it
# fails validation): never the client's own words, so metrics stay bounded.
UNKNOWN = "unknown"
MULTIPLE = "multiple"


@dataclass(slots=True)
class RequestNote:
    """One request, as its log line and its metrics tell it."""

    id: str
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


_NOTE: ContextVar[RequestNote | None] = ContextVar("edgeloom_request", default=None)
# Unique across the processes of one gateway and its restarts (random prefix), and
# cheap to make (a counter, not a random draw per request).
_PREFIX = os.urandom(4).hex()
_COUNTER = itertools.count(1)


def new_note(path: str, started: float) -> RequestNote:
    """The note of a request starting now; `current` returns it while it runs."""
    note = RequestNote(f"{_PREFIX}-{next(_COUNTER):x}", path, started)
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


_LABELS: dict[tuple[int, str, str | None], str] = {}


def label_of(schema: GraphQLSchema, query: str, name: str | None, document: DocumentNode) -> str:
    """`operation_label`, made once per document text and operation name."""
    key = (id(schema), query, name)
    try:
        return _LABELS[key]
    except KeyError:
        pass
    if len(_LABELS) >= 1024:
        _LABELS.clear()
    label = _LABELS[key] = operation_label(schema, document, name)
    return label


def operation_label(schema: GraphQLSchema, document: DocumentNode, name: str | None) -> str:
    """The root field an operation asks for, `MULTIPLE` for several, `UNKNOWN` for any
    the schema does not have (so a metric's labels are the schema's names only)."""
    operation = get_operation_ast(document, name)
    if operation is None:
        return UNKNOWN
    root = {
        OperationType.QUERY: schema.query_type,
        OperationType.MUTATION: schema.mutation_type,
        OperationType.SUBSCRIPTION: schema.subscription_type,
    }[operation.operation]
    fields = set()
    for selection in operation.selection_set.selections:
        if not isinstance(selection, FieldNode):
            return UNKNOWN  # a fragment at the root: rare, and not worth expanding here
        field = selection.name.value
        if field.startswith("__"):
            field = "introspection"
        elif root is None or field not in root.fields:
            return UNKNOWN
        fields.add(field)
    if len(fields) == 1:
        return fields.pop()
    return MULTIPLE if fields else UNKNOWN


def log_line(note: RequestNote, seconds: float) -> str:
    """The request's log line: never its variables, content or token."""
    return orjson.dumps(
        {
            "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
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
    ).decode()


class LineHandler(logging.Handler):
    """Writes each record's message as one line, gathered for a fifth of a second so
    that a busy gateway makes one write for many requests, not one each."""

    def __init__(self, stream: IO[str] | None = None, delay: float = 0.2) -> None:
        super().__init__()
        self.stream = stream or sys.stderr
        self.delay = delay
        self._lines: list[str] = []
        self._later: Callable[[], None] | None = None

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self._lines.append(self.format(record))
        except Exception:
            self.handleError(record)
            return
        if len(self._lines) > 1:
            return
        import asyncio

        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.flush()
            return
        loop.call_later(self.delay, self.flush)

    def flush(self) -> None:
        lines, self._lines = self._lines, []
        if lines:
            self.stream.write("\n".join(lines) + "\n")
            self.stream.flush()


def configure_request_log(stream: IO[str] | None = None) -> None:
    """Send the request log, one JSON object a line, to `stream` (stderr), at info.

    Once per process (each worker of `serve --workers` calls it); the lines go out
    bare, without the level and logger name the other logs carry.
    """
    if any(isinstance(h, LineHandler) for h in log.handlers):
        return
    handler = LineHandler(stream)
    handler.setFormatter(logging.Formatter("%(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False
