"""GraphQL-over-HTTP callers: one keep-alive connection per concurrent client.

Two kinds. `lean` writes HTTP/1.1 on an asyncio stream and reads the reply by its
Content-Length: on a 2-core machine the load generator shares the cores with the
gateway and PostgreSQL, so it should cost about as little CPU per call as the
asyncpg client it is compared with. `httpx` uses httpx.AsyncClient (keep-alive), the
client most Python callers would use; it costs the gateway's figures some CPU.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any, Protocol

import httpx

IDLE_REOPEN_S = 3.0


class GraphQLError(RuntimeError):
    pass


class Caller(Protocol):
    async def call(self, query: str, variables: dict[str, Any]) -> dict[str, Any]: ...

    async def close(self) -> None: ...


def request_body(query: str, variables: dict[str, Any]) -> bytes:
    """The JSON body a LeanCaller sends (the HTTP floor looks its statement up by it)."""
    return json.dumps({"query": query, "variables": variables}).encode()


def _data(body: bytes) -> dict[str, Any]:
    reply = json.loads(body)
    if reply.get("errors"):
        raise GraphQLError(str(reply["errors"])[:500])
    data: dict[str, Any] = reply["data"]
    return data


class _Replies(asyncio.Protocol):
    """The reading side of a LeanCaller: each whole reply (head, body) resolves the waiter."""

    def __init__(self) -> None:
        self.transport: Any = None  # uvloop's transports are not asyncio.Transport subclasses
        self.buffer = bytearray()
        self.waiter: asyncio.Future[tuple[bytes, bytes]] | None = None
        self.lost = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(ConnectionError("the gateway closed the connection"))

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        end = self.buffer.find(b"\r\n\r\n")
        if end < 0 or self.waiter is None or self.waiter.done():
            return
        head = bytes(self.buffer[:end])
        length = _content_length(head)
        if length is None:
            self.waiter.set_exception(GraphQLError(f"reply without content-length: {head[:200]!r}"))
            return
        total = end + 4 + length
        if len(self.buffer) >= total:
            body = bytes(self.buffer[end + 4 : total])
            del self.buffer[:total]
            self.waiter.set_result((head, body))


def _content_length(head: bytes) -> int | None:
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value)
    return None


class LeanCaller:
    """One HTTP/1.1 keep-alive connection; one call at a time. An asyncio Protocol that
    hands over each whole reply at once, as asyncpg's does, rather than stream reads."""

    def __init__(self, host: str, port: int, path: str = "/graphql") -> None:
        self.host, self.port, self.path = host, port, path
        self.replies: _Replies | None = None
        self.used = 0.0
        self.head = (
            f"POST {path} HTTP/1.1\r\nhost: {host}:{port}\r\n"
            "content-type: application/json\r\naccept: application/json\r\n"
        ).encode()

    async def _open(self) -> _Replies:
        if self.replies is not None and (
            self.replies.lost or time.monotonic() - self.used > IDLE_REOPEN_S
        ):
            # uvicorn closes keep-alive connections idle for 5 s; do not race it.
            await self.close()
        self.used = time.monotonic()
        if self.replies is None:
            loop = asyncio.get_running_loop()
            _, self.replies = await loop.create_connection(_Replies, self.host, self.port)
        return self.replies

    async def call(self, query: str, variables: dict[str, Any]) -> dict[str, Any]:
        payload = request_body(query, variables)
        replies = await self._open()
        waiter = replies.waiter = asyncio.get_running_loop().create_future()
        replies.transport.write(self.head + b"content-length: %d\r\n\r\n" % len(payload) + payload)
        head, body = await waiter
        status_line = head.split(b"\r\n", 1)[0].decode("latin-1")
        if " 200 " not in status_line:
            raise GraphQLError(f"{status_line}: {body[:300]!r}")
        return _data(body)

    async def close(self) -> None:
        if self.replies is not None:
            self.replies.transport.close()
            self.replies = None


class HttpxCaller:
    """A share of one httpx.AsyncClient whose pool holds a connection per caller."""

    def __init__(self, client: httpx.AsyncClient, url: str) -> None:
        self.client, self.url = client, url

    async def call(self, query: str, variables: dict[str, Any]) -> dict[str, Any]:
        response = await self.client.post(self.url, json={"query": query, "variables": variables})
        if response.status_code != 200:
            raise GraphQLError(f"HTTP {response.status_code}: {response.text[:300]}")
        return _data(response.content)

    async def close(self) -> None:
        return None


class Callers:
    """`n` callers of kind `lean` or `httpx`, spread over the gateways' `ports` (replicas);
    close() ends them all."""

    def __init__(self, kind: str, host: str, ports: list[int], n: int) -> None:
        self._client: httpx.AsyncClient | None = None
        self.items: list[Caller]
        if kind == "lean":
            self.items = [LeanCaller(host, ports[i % len(ports)]) for i in range(n)]
        elif kind == "httpx":
            self._client = httpx.AsyncClient(
                timeout=120,
                limits=httpx.Limits(max_connections=n, max_keepalive_connections=n),
            )
            urls = [f"http://{host}:{port}/graphql" for port in ports]
            self.items = [HttpxCaller(self._client, urls[i % len(urls)]) for i in range(n)]
        else:
            raise ValueError(f"client kind must be lean or httpx (got {kind!r})")

    async def close(self) -> None:
        for item in self.items:
            await item.close()
        if self._client is not None:
            await self._client.aclose()
