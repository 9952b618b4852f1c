"""One lean WebSocket client following one `auditEvents` subscription, as the feed benches
run thousands of them: it records when each event arrives, counts duplicates, and resumes
from its last cursor when the gateway closes it as a slow consumer."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any, ClassVar

import orjson

from bench.lean_socket import LeanSocket


@dataclass
class Follower:
    """One subscription to `DOCUMENT`; each event is filed under `key(event)`."""

    DOCUMENT: ClassVar[str]

    url: str
    after: str
    received: dict[str, float] = field(default_factory=dict)  # key -> arrival time
    duplicates: int = 0
    resumes: int = 0
    ready: asyncio.Event = field(default_factory=asyncio.Event)

    def variables(self) -> dict[str, Any]:
        return {"after": self.after}

    def key(self, event: dict[str, Any]) -> str:
        raise NotImplementedError

    async def run(self) -> None:
        while True:
            await self._session()

    async def _session(self) -> None:
        """One connection, until the gateway ends the subscription or the socket."""
        loop = asyncio.get_running_loop()
        acknowledged: asyncio.Future[None] = loop.create_future()
        # Set when the gateway ends the subscription (a resume or a failure).
        ended: asyncio.Future[None] = loop.create_future()

        def on_text(raw: bytes) -> None:
            now = time.time()
            message = orjson.loads(raw)
            kind = message.get("type")
            if kind == "connection_ack":
                acknowledged.set_result(None)
            elif kind == "ping":
                socket.send_text('{"type":"pong"}')
            elif kind == "next":
                self._take(message["payload"], now, ended)
            elif not ended.done():
                ended.set_result(None)

        socket = await LeanSocket.connect(self.url, "graphql-transport-ws", on_text)
        try:
            socket.send_text(json.dumps({"type": "connection_init", "payload": {}}))
            await asyncio.wait_for(acknowledged, 120)
            subscribe = {"query": self.DOCUMENT, "variables": self.variables()}
            socket.send_text(json.dumps({"id": "1", "type": "subscribe", "payload": subscribe}))
            self.ready.set()
            await asyncio.wait([ended, socket.closed], return_when=asyncio.FIRST_COMPLETED)
            if ended.done():
                ended.result()  # a failure other than a slow-subscriber close raises
        finally:
            socket.close()

    def _take(self, payload: dict[str, Any], now: float, ended: asyncio.Future[None]) -> None:
        if payload.get("errors"):
            if ended.done():
                return
            # A slow-subscriber close: resume after the last cursor, as a client should;
            # the counts prove nothing was lost.
            resume = payload["errors"][0].get("extensions", {}).get("resumeAfter")
            if resume is None:
                ended.set_exception(RuntimeError(payload["errors"]))
                return
            self.after = resume
            self.resumes += 1
            ended.set_result(None)
            return
        event = payload["data"]["auditEvents"]
        key = self.key(event)
        if key in self.received:
            self.duplicates += 1
        self.received[key] = now
        self.after = event["cursor"]
