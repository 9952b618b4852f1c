"""Subscription resolvers: the live audit feed, filtered by the caller's rights as they are."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncGenerator, Sequence
from contextlib import aclosing

import strawberry

from gql.auth import BAD_TOKEN, socket_authorization
from gql.context import Context
from gql.errors import MASKED_MESSAGE, UnauthenticatedError
from gql.feed_hub import Closed, FeedHub, FeedUnavailableError
from gql.types import AuditEvent, Info
from policies.errors import PolicyError
from store import feed, policy_store
from store.errors import InvalidInputError, NoPolicyError, StoreError
from store.events import check_kinds

log = logging.getLogger("edgeloom.feed")


class SubscriberTooSlowError(StoreError):
    """A subscriber fell so far behind the feed that it was closed."""

    code = "CONFLICT"

    def __init__(self, last_cursor: str | None, queued: int) -> None:
        resume = (
            f'subscribe again with after: "{last_cursor}" (the last event delivered) '
            "to resume without a gap"
            if last_cursor is not None
            else "subscribe again with after set to the last cursor you processed"
        )
        super().__init__(
            f"this subscription fell more than {queued} batches behind the live feed "
            f"and was closed; {resume}"
        )
        self.last_cursor = last_cursor

    def extensions(self) -> dict[str, object]:
        return {"reason": "SLOW_SUBSCRIBER", "resumeAfter": self.last_cursor}


class FeedStoppedError(StoreError):
    """The gateway is shutting down."""

    def __init__(self, last_cursor: str | None) -> None:
        super().__init__(
            "the gateway is shutting down; subscribe again (on any replica) with after: "
            f'"{last_cursor}"'
            if last_cursor is not None
            else "the gateway is shutting down; subscribe again"
        )
        self.last_cursor = last_cursor

    def extensions(self) -> dict[str, object]:
        return {"resumeAfter": self.last_cursor}


class FeedFailedError(StoreError):
    """An unexpected failure while serving a subscription (logged, not shown)."""

    code = "INTERNAL_SERVER_ERROR"

    def __init__(self) -> None:
        super().__init__(MASKED_MESSAGE)


class _Rights:
    """What the subscriber may read, under the policy and the token as they are now."""

    def __init__(self, context: Context, hub: FeedHub) -> None:
        self.context = context
        self.hub = hub
        self.agent = context.agent_name()
        self._version = -1
        self._lanes: frozenset[str] = frozenset()
        self._token_checked = time.monotonic()

    async def lanes(self) -> frozenset[str]:
        services = self.context.services
        in_force = await policy_store.current(services.pool, services.policies)
        if in_force is None:
            raise NoPolicyError()
        if in_force.version != self._version:
            # An agent the new policy no longer declares is refused here (UNAUTHENTICATED).
            profile = in_force.policy.agent(self.agent)
            self._lanes = frozenset(profile.readable_lanes(in_force.policy))
            self._version = in_force.version
        return self._lanes

    async def lane_list(self) -> Sequence[str]:
        return sorted(await self.lanes())

    async def check_token(self, force: bool = False) -> None:
        """Refuse from now on if the socket's token has been revoked."""
        now = time.monotonic()
        if not force and now - self._token_checked < self.hub.options.token_recheck_seconds:
            return
        self._token_checked = now
        raw = socket_authorization(self.context.connection_params)
        if raw is None:
            return  # a development gateway's anonymous agent holds no token
        secret = raw.strip().partition(" ")[2].strip()
        if await self.hub.token_agent(secret) != self.agent:
            raise UnauthenticatedError(BAD_TOKEN)


@strawberry.type
class Subscription:
    @strawberry.subscription(
        description=(
            "Every audit event you may read, in feed order: first the events after the "
            'cursor `after` (an event\'s `cursor`, or "0" for the start of the feed) '
            "replayed from the table, then live ones, with no gap and no duplicate. "
            "`lanes` and `kinds` narrow it; events without a lane (policy changes) "
            "reach every subscriber that asks for their kind. Rights are those in force "
            "when each event is delivered."
        )
    )
    async def audit_events(
        self,
        info: Info,
        after: str | None = None,
        lanes: list[str] | None = None,
        kinds: list[str] | None = None,
    ) -> AsyncGenerator[AuditEvent, None]:
        stream = _audit_events(info.context, after, lanes, kinds)
        async with aclosing(stream):
            try:
                async for event in stream:
                    yield event
            except (PolicyError, StoreError, UnauthenticatedError):
                raise
            except Exception as exc:
                # Only refusals reach the client as they are; anything else is logged and
                # masked, like a failure in a query (a subscription's errors carry no path).
                log.error("auditEvents subscription failed", exc_info=exc)
                raise FeedFailedError() from exc


async def _audit_events(
    context: Context, after: str | None, lanes: list[str] | None, kinds: list[str] | None
) -> AsyncGenerator[AuditEvent, None]:
    hub = context.services.feed
    if hub is None:
        raise FeedUnavailableError()
    rights = _Rights(context, hub)
    wanted_kinds = check_kinds(kinds)
    readable = await rights.lanes()
    if lanes is not None:
        unreadable = [lane for lane in lanes if lane not in readable]
        if unreadable:
            raise InvalidInputError(
                f"lane(s) {unreadable} are not readable by agent '{rights.agent}'; "
                f"readable lanes: {sorted(readable)}",
                allowed=sorted(readable),
            )
    position = None if after is None else await feed.check_cursor(context.engine, after)
    last = after
    async with hub.subscribe(lanes, wanted_kinds) as subscriber:
        seen: feed.Snapshot | None = None
        start = position or 0
        if position is not None:
            # Taken after subscribing: what it cannot see will arrive live.
            seen = await feed.take_snapshot(context.engine)
            async for page in feed.replay(
                context.engine, position, seen, rights.lane_list, wanted_kinds
            ):
                await rights.check_token()
                for item in page:
                    if subscriber.wants(item):
                        context.begin_operation()
                        yield AuditEvent.from_domain(item.event)
                        last = str(item.seq)
        while True:
            batch = await subscriber.next(hub.options.token_recheck_seconds)
            await rights.check_token()
            if batch is None:
                continue
            if batch is Closed.TOO_SLOW:
                raise SubscriberTooSlowError(last, hub.options.queue_batches)
            if batch is Closed.STOPPING:
                raise FeedStoppedError(last)
            assert not isinstance(batch, Closed)
            readable = await rights.lanes()
            for item in batch:
                event = item.event
                if seen is not None and (event.seq <= start or seen.visible(item.txid)):
                    continue  # before the cursor, or already replayed
                if event.lane is not None and event.lane not in readable:
                    continue
                # Each event is resolved afresh (its versions, its records' lanes).
                context.begin_operation()
                yield AuditEvent.from_domain(event)
                last = str(event.seq)
