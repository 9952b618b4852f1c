"""The lean way of a compiled read over HTTP: `POST` or `GET /graphql` answered from the
ASGI messages, without Starlette's request and response objects or the middleware stack.

Whatever it does not answer (an error of any kind, a refused caller, a write, a document
the compiled path does not cover, a host not served, a body too large to take here, a
gateway with read replicas) it hands to the gateway's layers as it came, with the note it
made and the body it read: those answer it as if this path had not looked. What it
answers carries the same status, header lines and body bytes as theirs would, the same
log line and metrics (tests/gql/test_lean.py compares them).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from starlette.datastructures import QueryParams
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from gql.api.auth import authorize
from gql.api.compiled_writes import Write
from gql.api.limits import RequestLimitError
from gql.api.observe import RequestNote, new_note
from gql.api.session import Services, Session
from gql.server.client_watch import ClientWatch
from gql.server.compiled_endpoint import DECLINED, CompiledPath, Payload, get_payload, post_payload
from gql.server.front import Front
from gql.server.headers import with_security_headers
from gql.server.hosts import Hosts
from gql.server.over_http import accepted, answer_headers
from store.reads.replicas import Freshness

# A compiled read's body is a few hundred bytes; a larger one (up to the body limit) goes
# the ordinary way, which reads it only once the caller is authorised.
MAX_BODY = 64 * 1024


class Lean:
    """Answers the compiled reads it can; hands every other request to `front`."""

    def __init__(
        self,
        compiled: CompiledPath,
        front: Front,
        hosts: Hosts,
        anonymous_agent: str | None,
        request_timeout: float,
        stopped: Callable[[], Response],
    ) -> None:
        self.compiled = compiled
        self.front = front
        self.hosts = hosts
        self.anonymous_agent = anonymous_agent
        self.request_timeout = request_timeout
        self.stopped = stopped
        self.answered = 0  # for the tests

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        note = new_note(scope["path"], time.perf_counter())
        method = scope["method"]
        # The first line of each name, as Starlette's `Headers.get` reads it.
        headers = dict(reversed(scope["headers"]))
        state = scope.get("state")
        services: Services | None = None if state is None else state.get("services")
        if (
            services is None
            or method not in ("POST", "GET")
            # With standbys a read's session follows the LSN a client sent back.
            or (services.replicas is not None and services.replicas.enabled)
            or self.hosts.problem(_text(headers.get(b"host")), _text(headers.get(b"origin")))
            is not None
        ):
            await self.front.run(scope, receive, send, note)
            return
        body = b""
        if method == "POST":
            length = headers.get(b"content-length")
            if (
                length is None
                or not length.isdigit()
                or int(length) > MAX_BODY
                or b"application/json" not in headers.get(b"content-type", b"")
            ):
                await self.front.run(scope, receive, send, note)
                return
            while True:
                message = await receive()
                if message["type"] != "http.request":  # the client left
                    self.front.end(note)
                    return
                body += message.get("body", b"")
                if not message.get("more_body", False):
                    break
        try:
            answered = await self._answer(scope, receive, send, note, services, headers, body)
        except BaseException:
            if not note.status:
                note.status = 500
            self.front.end(note)
            raise
        if answered:
            self.front.end(note)
        else:
            read = _replay(body, receive) if scope["method"] == "POST" else receive
            await self.front.run(scope, read, send, note)

    async def _answer(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        note: RequestNote,
        services: Services,
        headers: dict[bytes, bytes],
        body: bytes,
    ) -> bool:
        """Whether the request was answered (or its client left); False: hand it on."""
        # One timer for the caller's authorisation and the answer: the body is read, so
        # what the request receives now tells whether the client left.
        with ClientWatch(receive, self.request_timeout) as watch:
            sent = await self._read(scope, services, headers, body)
        if watch.left:
            return True
        if watch.stopped:
            refusal = self.stopped()
            note.status = refusal.status_code

            async def secured(message: Message) -> None:
                if message["type"] == "http.response.start":
                    message = with_security_headers(message)
                await send(message)

            await refusal(scope, receive, secured)
            return True
        if sent is None:
            return False
        note.status = 200
        media = accepted(_text(headers.get(b"accept")) or "")
        await send(
            {"type": "http.response.start", "status": 200, "headers": answer_headers(sent, media)}
        )
        await send({"type": "http.response.body", "body": sent})
        self.compiled.answered += 1
        self.answered += 1
        return True

    async def _read(
        self, scope: Scope, services: Services, headers: dict[bytes, bytes], body: bytes
    ) -> bytes | None:
        """The answer's body, or None: declined (what the ordinary way needs is kept)."""
        state = scope["state"]
        caller = await authorize(
            _text(headers.get(b"authorization")), services, self.anonymous_agent
        )
        if caller.agent is None:
            state["caller"] = caller  # the view refuses it without asking again
            return None
        session = state["session"] = Session(services, caller, freshness=Freshness())
        try:
            payload: Payload | None = (
                post_payload(_text(headers.get(b"content-type")) or "", body)
                if scope["method"] == "POST"
                else get_payload(QueryParams(scope["query_string"]))
            )
        except RequestLimitError:
            return None  # the view refuses it
        if payload is None:
            state[DECLINED] = True
            return None
        query, variables, name = payload
        cached = self.compiled.lookup(query, variables, name)
        if cached is None:
            state[DECLINED] = True
            return None
        if isinstance(cached.compiled, Write):
            return None  # the view's compiled path runs it, as it always has
        answer = await self.compiled.read(session, cached, name, variables)
        if answer is None:
            state[DECLINED] = True
            return None
        return answer.encode() if isinstance(answer, str) else answer


def _text(value: bytes | None) -> str | None:
    """A header's value as Starlette gives it."""
    return None if value is None else value.decode("latin-1")


def _replay(body: bytes, receive: Receive) -> Receive:
    """`receive` that gives the body read first, then what the client sends next."""
    given = False

    async def again() -> Message:
        nonlocal given
        if given:
            return await receive()
        given = True
        return {"type": "http.request", "body": body, "more_body": False}

    return again
