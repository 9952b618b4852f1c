"""What the feed sends through: an operation's `Outlet`, and the socket under it as the
hub writes ready-made frames to it (`SocketOutlet`), both built by the server.

The hub knows no server: the server hands it the frame encoding at start
(`FrameEncoder`) and each operation's socket behind `SocketOutlet`
(`gql.server.frames.RawSocket` on the gateway's own WebSocket protocol).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Awaitable, Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Protocol

from graphql import FieldNode, GraphQLError, Node, VariableNode, get_operation_ast, parse, visit
from graphql.language.visitor import SKIP, Visitor, VisitorAction

FrameEncoder = Callable[[Iterable[str]], bytes]
"""The frames of text messages, one unmasked text frame each, as the server writes them."""


class Transport(Protocol):
    """Where a socket's frames are written: one write each, no wait."""

    def write(self, data: bytes) -> None: ...

    def get_write_buffer_size(self) -> int: ...


class SocketOutlet(Protocol):
    """One WebSocket as the hub writes frames to it, outside the server's own send."""

    def ready(self) -> bool:
        """Whether a frame may be written directly now."""
        ...

    def drained(self) -> bool:
        """Whether everything written to it so far has gone to the socket."""
        ...

    @property
    def transport(self) -> Transport:
        """The transport frames are written to; only once `ready` said so."""
        ...

    def watch(self, key: Hashable, callback: Callable[[], None]) -> bool:
        """Call `callback` once, at the server's next own write to it or its close
        (False, and nothing watched, when the socket cannot tell)."""
        ...

    def unwatch(self, key: Hashable) -> None: ...

    def write(self, frames: bytes) -> None:
        """Write `frames` after anything the server gathered before; only once `ready`."""
        ...


@dataclass(frozen=True)
class Outlet:
    """One running operation's way to send a result payload that is already encoded: the
    live feed renders an event once for every subscriber running the same operation, and
    each socket only splices its operation id in front."""

    query: str
    variables: dict[str, object] | None
    operation_name: str | None
    encode: Callable[[object], str]
    """The transport's JSON encoder, for payloads sent through `send`."""
    head: str
    """The operation's message up to its payload: `{"id":"1","type":"next","payload":`."""
    send_text: Callable[[str], Awaitable[None]]
    open: Callable[[], bool]
    raw: SocketOutlet | None = None
    """The socket, for the feed's group writes (None: not on this server)."""

    @property
    def share(self) -> Hashable:
        """Operations with equal keys render every event alike under equal rights.

        Variables used only in the arguments of the root field (a resume's `after`)
        decide which events the stream yields, not how one renders, so they are left
        out: subscribers resuming from different cursors share renderings once live.
        """
        root_only = _root_argument_variables(self.query, self.operation_name)
        rendering = {k: v for k, v in (self.variables or {}).items() if k not in root_only}
        return (self.query, self.operation_name, json.dumps(rendering, sort_keys=True))

    async def send(self, payload: str) -> None:
        """Send `payload` (an encoded result: `{"data":...}`) as this operation's message."""
        if self.open():
            await self.send_text(self.message(payload))

    def message(self, payload: str) -> str:
        """The operation's message carrying `payload`."""
        return self.head + payload + "}"


class _VariableUses(Visitor):
    def __init__(self) -> None:
        super().__init__()
        self.uses: Counter[str] = Counter()

    def enter_variable_definition(self, *_: object) -> VisitorAction:
        return SKIP  # a declaration, not a use

    def enter_variable(self, node: VariableNode, *_: object) -> None:
        self.uses[node.name.value] += 1


def _uses(node: Node) -> Counter[str]:
    visitor = _VariableUses()
    visit(node, visitor)
    return visitor.uses


def _root_argument_variables(query: str, operation_name: str | None) -> frozenset[str]:
    """The variables used nowhere but in the arguments of the operation's root fields."""
    try:
        document = parse(query)
    except GraphQLError:
        return frozenset()
    operation = get_operation_ast(document, operation_name)
    if operation is None:
        return frozenset()
    in_arguments: Counter[str] = Counter()
    for selection in operation.selection_set.selections:
        if isinstance(selection, FieldNode):
            for argument in selection.arguments or ():
                in_arguments.update(_uses(argument))
    everywhere = _uses(document)
    return frozenset(name for name, count in in_arguments.items() if everywhere[name] == count)
