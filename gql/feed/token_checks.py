"""Checking the tokens the subscribers hold: once per token per interval however many
hold it, at once when a revocation is notified, waking only those whose token is gone."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncEngine

from gql.feed.arming import Arming
from gql.feed.subscriber import Subscriber
from store.operations import tokens

log = logging.getLogger("edgeloom.feed")


@dataclass
class _TokenCheck:
    agent: str | None
    at: float


class TokenChecks:
    """The process's one check of its subscribers' tokens."""

    def __init__(
        self,
        engine: AsyncEngine,
        recheck_seconds: float,
        subscribers: set[Subscriber],
        arming: Arming,
    ) -> None:
        self.engine = engine
        self.recheck_seconds = recheck_seconds
        self.subscribers = subscribers
        self.arming = arming
        self._tokens: dict[str, _TokenCheck] = {}
        # Set when a token was revoked somewhere (or notices may have been missed).
        self._notice = asyncio.Event()

    def revoked(self, token_id: str | None) -> None:
        """A token was revoked (None: the reader reconnected, and may have missed one)."""
        self._notice.set()

    async def run(self) -> None:
        """Twice per token recheck interval, check every token the subscribers hold
        (`agent`: one query per token per interval) and wake those whose token
        was revoked, so that even a quiet feed ends their operations; at once, and
        bypassing what was cached, when a revocation is notified."""
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._notice.wait(), self.recheck_seconds / 2)
            notified = self._notice.is_set()
            self._notice.clear()
            try:
                await self._revoke_stale(fresh=notified)
            except Exception:  # the database is away: try again next time
                if notified:  # soon again, not only at the next interval
                    self._notice.set()
                    await asyncio.sleep(self.recheck_seconds / 8)
                log.warning("checking subscribers' tokens failed", exc_info=True)

    async def _revoke_stale(self, fresh: bool = False) -> None:
        subscribers = [s for s in self.subscribers if s.bearer is not None and not s.revoked]
        secrets = {s.bearer.secret for s in subscribers if s.bearer is not None}
        if fresh:
            # One statement for every token held, and the cache the subscribers' own
            # checks read is brought up to date with it.
            agents = await tokens.agents_for(self.engine, secrets)
            now = time.monotonic()
            for secret, agent in agents.items():
                self._tokens[secret] = _TokenCheck(agent, now)
        else:
            agents = {secret: await self.agent(secret) for secret in secrets}
        for subscriber in subscribers:
            assert subscriber.bearer is not None
            if agents[subscriber.bearer.secret] != subscriber.bearer.agent:
                subscriber.revoked = True
                self.arming.disarm(subscriber)
                with contextlib.suppress(asyncio.QueueFull):  # then it is woken anyway
                    subscriber.queue.put_nowait(None)

    async def agent(self, secret: str) -> str | None:
        """The agent of a live token, checked at most once per recheck interval.

        Shared by every subscription of the process, so many subscribers holding one
        token cost one query per interval.
        """
        now = time.monotonic()
        known = self._tokens.get(secret)
        if known is not None and now - known.at < self.recheck_seconds:
            return known.agent
        agent = await tokens.agent_for(self.engine, secret)
        if len(self._tokens) > 10_000:
            self._tokens.clear()
        self._tokens[secret] = _TokenCheck(agent, now)
        return agent
