"""The gateway's outermost layer: every request's note, security headers, log line and
metrics, in one pure-ASGI middleware.

One layer, not one per concern: each layer wraps `send` in a closure of its own and
adds a call per message to every response, which the smallest answers feel
(bench/journal/2026-12-03-request-log-and-metrics.md).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gql.api.observe import RequestNote, new_note, write_line
from gql.server.headers import with_security_headers

Done = Callable[[RequestNote, float], None]


class Front:
    """Makes each HTTP request's and WebSocket's `RequestNote`, adds the security
    headers to every HTTP response, and when the request ends, logs its line (at info)
    and hands it to `done` (the metrics)."""

    def __init__(self, app: ASGIApp, done: Done | None = None) -> None:
        self.app = app
        self.done = done

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "lifespan":
            await self.app(scope, receive, send)
            return
        await self.run(scope, receive, send, new_note(scope["path"], time.perf_counter()))

    async def run(self, scope: Scope, receive: Receive, send: Send, note: RequestNote) -> None:
        """`__call__` for a request whose note is made (the lean path's, which it declined)."""
        kind = scope["type"]
        if kind == "http":

            async def sent(message: Message) -> None:
                if message["type"] == "http.response.start":
                    note.status = message["status"]
                    message = with_security_headers(message)
                await send(message)

        else:

            async def sent(message: Message) -> None:
                kind = message["type"]
                if kind == "websocket.accept":
                    note.status = 101
                elif kind == "websocket.http.response.start":
                    note.status = message["status"]
                elif kind == "websocket.close" and not note.status:
                    note.status = 403  # closed before it was accepted
                await send(message)

        try:
            await self.app(scope, receive, sent)
        except BaseException:
            if not note.status:
                note.status = 500  # what the server answers for it
            raise
        finally:
            self.end(note)

    def end(self, note: RequestNote) -> None:
        """A request answered (or given up): its log line and metrics."""
        seconds = time.perf_counter() - note.started
        write_line(note, seconds)
        if self.done is not None:
            self.done(note, seconds)
