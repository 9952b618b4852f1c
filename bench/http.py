"""GraphQL-over-HTTP callers: one keep-alive connection per concurrent client.

Two kinds. `lean` writes HTTP/1.1 on an asyncio stream and reads the reply by its
Content-Length: on a 2-core machine the load generator shares the cores with the
gateway and PostgreSQL, so it should cost about as little CPU per call as the
asyncpg client it is compared with. `httpx` uses httpx.AsyncClient (keep-alive), the
client most Python callers would use; it costs the gateway's figures some CPU.
"""

from __future__ import annotations

import asyncio
import contextlib
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


def _data(body: bytes) -> dict[str, Any]:
    reply = json.loads(body)
    if reply.get("errors"):
        raise GraphQLError(str(reply["errors"])[:500])
    data: dict[str, Any] = reply["data"]
    return data


class LeanCaller:
    """One HTTP/1.1 keep-alive connection; one call at a time."""

    def __init__(self, host: str, port: int, path: str = "/graphql") -> None:
        self.host, self.port, self.path = host, port, path
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.used = 0.0
        self.head = (
            f"POST {path} HTTP/1.1\r\nhost: {host}:{port}\r\n"
            "content-type: application/json\r\naccept: application/json\r\n"
        ).encode()

    async def _open(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if self.writer is not None and time.monotonic() - self.used > IDLE_REOPEN_S:
            # uvicorn closes keep-alive connections idle for 5 s; do not race it.
            await self.close()
        self.used = time.monotonic()
        if self.reader is None or self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(
                self.host, self.port, limit=1 << 24
            )
        return self.reader, self.writer

    async def call(self, query: str, variables: dict[str, Any]) -> dict[str, Any]:
        payload = json.dumps({"query": query, "variables": variables}).encode()
        reader, writer = await self._open()
        writer.write(self.head + b"content-length: %d\r\n\r\n" % len(payload) + payload)
        head = await reader.readuntil(b"\r\n\r\n")
        status_line, *lines = head.decode("latin-1").split("\r\n")
        length = None
        for line in lines:
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value)
        if length is None:
            raise GraphQLError(f"reply without content-length: {status_line}")
        body = await reader.readexactly(length)
        if " 200 " not in status_line:
            raise GraphQLError(f"{status_line}: {body[:300]!r}")
        return _data(body)

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            with contextlib.suppress(OSError):
                await self.writer.wait_closed()
            self.reader = self.writer = None


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
