"""Size limits checked before GraphQL parses or coerces anything.

A request's cost to the event loop grows with the values it carries: coercing
100,000 ingestMany inputs blocks every other request for seconds. These checks
are cheap (one walk of the decoded JSON, or a length) and come first.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from graphql import DocumentNode, FieldNode, GraphQLError, Node
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gql.api.errors import refusal_response
from policies.model import MAX_EMBEDDING_DIMENSIONS
from store.intake.sources import IN_PARTS

DEFAULT_MAX_BODY = 8 * 1024 * 1024
# ingestMany takes at most 1000 records, and no other list argument is longer but a
# vector (a list of numbers only), which may hold as many as a policy may declare.
MAX_LIST_ITEMS = 1000
MAX_VECTOR_ITEMS = MAX_EMBEDDING_DIMENSIONS
# Coercing one value costs a microsecond or two: this bounds it near a tenth of a second.
# A vector counts as one value here; its numbers count against MAX_VECTOR_NUMBERS.
MAX_VARIABLE_VALUES = 100_000
# Numbers in a request's vectors: a full ingestMany (1000 records) of 384 dimensions, or
# 260 records of 1536. Each is checked one by one, a few times cheaper on the compiled path
# (ingest, ingestMany and search are compiled) than through graphql-core: this bounds the
# event loop's time on them as MAX_VARIABLE_VALUES bounds the rest (bench/README.md,
# "Figures behind choices in the code").
MAX_VECTOR_NUMBERS = 400_000
_NUMBERS = (int, float)
WS_MESSAGE_TOO_BIG = 1009
# Field selections in one document, its fragments included: far above any document a
# client writes by hand or generates (GraphiQL's introspection selects under 100), and
# low enough that validating one stays a small fraction of a second.
DEFAULT_MAX_FIELDS = 1000


@dataclass
class RequestLimitError(Exception):
    """A request over a size limit, refused before GraphQL sees it."""

    message: str
    status: int = 413
    details: dict[str, object] = field(default_factory=dict)

    def __str__(self) -> str:
        return self.message


def check_variables(variables: object) -> None:
    """Refuses variables holding a list over MAX_LIST_ITEMS (a vector: over
    MAX_VECTOR_ITEMS numbers), over MAX_VARIABLE_VALUES values, or over MAX_VECTOR_NUMBERS
    numbers in vectors."""
    pending = [variables]
    seen = numbers = 0
    while pending:
        value = pending.pop()
        seen += 1
        if seen > MAX_VARIABLE_VALUES:
            raise RequestLimitError(
                f"the variables hold over {MAX_VARIABLE_VALUES:,} values; at most "
                f"{MAX_VARIABLE_VALUES:,} are allowed per request, so split the work into "
                "smaller calls",
                details={"maxValues": MAX_VARIABLE_VALUES},
            )
        if isinstance(value, list):
            if len(value) > MAX_LIST_ITEMS and not (
                len(value) <= MAX_VECTOR_ITEMS and _is_vector(value)
            ):
                raise RequestLimitError(
                    f"a list in the variables has {len(value):,} items; lists may hold at "
                    f"most {MAX_LIST_ITEMS} (ingestMany takes at most {MAX_LIST_ITEMS} records "
                    f"per call), a vector at most {MAX_VECTOR_ITEMS} numbers, so split the "
                    f"work into smaller calls (for intakeFolder: {IN_PARTS})",
                    details={"maxListItems": MAX_LIST_ITEMS, "maxVectorItems": MAX_VECTOR_ITEMS},
                )
            if value and _is_vector(value):
                numbers += len(value)
                if numbers > MAX_VECTOR_NUMBERS:
                    raise RequestLimitError(
                        f"the variables' vectors hold over {MAX_VECTOR_NUMBERS:,} numbers; at "
                        f"most {MAX_VECTOR_NUMBERS:,} are allowed per request (a full "
                        f"ingestMany of 384-dimension vectors), so send fewer records per call",
                        details={"maxVectorNumbers": MAX_VECTOR_NUMBERS},
                    )
                continue
            pending.extend(value)
        elif isinstance(value, dict):
            pending.extend(value.values())


def _is_vector(value: list[object]) -> bool:
    """Whether a list holds numbers only (JSON's true and false are not numbers)."""
    return all(type(item) in _NUMBERS for item in value)


def too_many_fields(document: DocumentNode, limit: int) -> GraphQLError | None:
    """The refusal of a document selecting over `limit` fields, or None; counting stops
    at the first one over, so a huge document costs no more than an allowed one."""
    left = limit
    pending: list[Node] = list(document.definitions)
    while pending:
        node = pending.pop()
        if isinstance(node, FieldNode):
            left -= 1
            if left < 0:
                return GraphQLError(
                    f"this document selects more than {limit:,} fields, the most one "
                    "document may select (its fragments included); select each field once "
                    "(repeated selections of a field return it once anyway) and split the "
                    "rest into several requests",
                    extensions={"code": "BAD_USER_INPUT", "maxFields": limit},
                )
        selections = getattr(node, "selection_set", None)
        if selections is not None:
            pending.extend(selections.selections)
    return None


class BodySizeLimit:
    """Refuses HTTP bodies and WebSocket messages over a size before anything reads them.

    A body over the size is answered 413; a WebSocket message over it closes the
    socket with 1009 (message too big) and is never decoded.
    """

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            await self._socket(scope, receive, send)
            return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._refuse(scope, receive, send)
            return
        seen = 0

        async def limited() -> Message:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.max_bytes:
                raise _TooLarge()
            return message

        try:
            await self.app(scope, limited, send)
        except _TooLarge:
            await self._refuse(scope, receive, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = refusal_response(
            413,
            f"request body is over {self.max_bytes} bytes; split the work into smaller "
            f"calls (ingestMany takes up to {MAX_LIST_ITEMS} records)",
            details={"maxBytes": self.max_bytes},
        )
        await response(scope, receive, send)

    async def _socket(self, scope: Scope, receive: Receive, send: Send) -> None:
        closed = False

        async def limited() -> Message:
            nonlocal closed
            message = await receive()
            if message["type"] == "websocket.receive" and self._too_big(message):
                closed = True
                await send(
                    {
                        "type": "websocket.close",
                        "code": WS_MESSAGE_TOO_BIG,
                        "reason": f"message over {self.max_bytes} bytes",
                    }
                )
                # The app sees the socket end, and never the message.
                return {"type": "websocket.disconnect", "code": WS_MESSAGE_TOO_BIG}
            return message

        async def guarded(message: Message) -> None:
            if not closed:
                await send(message)

        await self.app(scope, limited, guarded)

    def _too_big(self, message: Message) -> bool:
        data = message.get("bytes")
        if data is not None:
            return len(data) > self.max_bytes
        text = message.get("text") or ""
        # A character takes one to four bytes: encode only when the count could matter.
        if len(text) > self.max_bytes:
            return True
        return 4 * len(text) > self.max_bytes and len(text.encode("utf-8")) > self.max_bytes


class _TooLarge(Exception):
    pass
