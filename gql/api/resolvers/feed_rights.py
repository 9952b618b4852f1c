"""What every feed subscription shares: the caller's rights as they are now, and the
ways its stream ends (too slow, the gateway stopping, a failure)."""

from __future__ import annotations

import time
from collections.abc import Hashable, Sequence

from gql.api.auth import BAD_TOKEN, socket_authorization
from gql.api.context import Context
from gql.api.errors import MASKED_MESSAGE
from gql.api.session import UnauthenticatedError
from gql.feed.batch import Progress
from gql.feed.hub import FeedHub
from gql.feed.subscriber import Bearer, Closed, Item, Subscriber
from store.errors import NoPolicyError, StoreError
from store.feed.live import FeedEvent
from store.kinds.policy.in_force import PolicyVersion


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


class Rights:
    """What the subscriber may read, under the policy and the token as they are now."""

    def __init__(self, context: Context, hub: FeedHub) -> None:
        self.context = context
        self.hub = hub
        self.agent = context.agent_name()
        self._version = -1
        self._lanes: frozenset[str] = frozenset()
        self.policy: PolicyVersion | None = None
        self._token_checked = time.monotonic()
        raw = socket_authorization(context.connection_params)
        # A development gateway's anonymous agent holds no token.
        self.bearer = (
            None if raw is None else Bearer(raw.strip().partition(" ")[2].strip(), self.agent)
        )

    async def lanes(self) -> frozenset[str]:
        in_force = await self.hub.policy()
        if in_force is None:
            raise NoPolicyError()
        if in_force.version != self._version:
            # An agent the new policy no longer declares is refused here (UNAUTHENTICATED).
            profile = in_force.policy.agent(self.agent)
            self._lanes = frozenset(profile.readable_lanes(in_force.policy))
            self._version = in_force.version
            self.policy = in_force
        return self._lanes

    @property
    def readable(self) -> frozenset[str]:
        """The lanes as last decided by `lanes()`."""
        return self._lanes

    @property
    def key(self) -> Hashable:
        """What a rendering depends on besides the operation: reads are decided by the
        lanes the policy lets the caller read, nothing else about the caller."""
        return (self._version, self._lanes)

    async def lane_list(self) -> Sequence[str]:
        return sorted(await self.lanes())

    async def check_token(self, force: bool = False) -> None:
        """Refuse from now on if the socket's token has been revoked."""
        now = time.monotonic()
        if not force and now - self._token_checked < self.hub.options.token_recheck_seconds:
            return
        self._token_checked = now
        if self.bearer is not None and await self.hub.token_agent(self.bearer.secret) != self.agent:
            raise token_revoked(self.context)

    async def next(self, subscriber: Subscriber) -> Item | None:
        """What the hub hands `subscriber` next, waited for holding no connection: the
        operation's snapshot ends first, whether or not anything was sent from it (a
        later read opens a new one), so that waiting subscriptions, however many, leave
        the pool to the requests."""
        await self.context.end_reads()
        return await subscriber.next()

    async def due(
        self, item: Item | None, subscriber: Subscriber, progress: Progress
    ) -> Sequence[FeedEvent]:
        """Of what the hub handed `subscriber`, the events due to it under its rights now,
        after the checks every live operation makes: its token still good, and a close by
        the hub raised as the refusal that says where to resume."""
        if subscriber.revoked:  # found by the hub's own check of the token
            raise token_revoked(self.context)
        await self.check_token()
        if item is None:
            return ()
        if item is Closed.TOO_SLOW:
            raise SubscriberTooSlowError(progress.last, self.hub.options.queue_batches)
        if item is Closed.STOPPING:
            raise FeedStoppedError(progress.last)
        assert not isinstance(item, Closed)
        return progress.due(item, item.allowed(await self.lanes()))


def token_revoked(context: Context) -> UnauthenticatedError:
    """The refusal that ends a subscription whose token was revoked; its socket, which
    holds that token for every operation, is closed after it (as connection_init
    with a revoked token is)."""
    context.close_socket_after_operation(4403, "Forbidden: the token was revoked")
    return UnauthenticatedError(BAD_TOKEN)
