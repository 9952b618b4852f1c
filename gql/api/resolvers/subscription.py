"""Subscription resolvers: the live audit feed, filtered by the caller's rights as they are.

Live events are rendered once per group of subscribers running the same operation under
the same rights, and sent through each socket's `Outlet` (docs/feed_hub.md).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from functools import partial
from typing import Annotated

import strawberry
from strawberry.http.exceptions import WebSocketDisconnected
from strawberry.schema.base import BaseSchema
from strawberry.types.execution import PreExecutionError

from gql.api.compiled_events import plain_selection
from gql.api.context import Context
from gql.api.resolvers.feed_filters import (
    ACTORS_HELP,
    MATCH_HELP,
    MODE_HELP,
    RECORD_IDS_HELP,
    FeedArguments,
)
from gql.api.resolvers.feed_rights import (
    FeedFailedError,
    Rights,
    token_revoked,
)
from gql.api.resolvers.watch import (
    AFTER_HELP,
    INITIAL_HELP,
    WATCH_HELP,
    WATCH_MATCH_HELP,
    WatchChange,
    watch_changes,
)
from gql.api.session import Caller, Services, Session, UnauthenticatedError
from gql.api.types import AuditEvent, GatherMode, Info
from gql.feed.batch import Batch, Direct, Progress, Rendered
from gql.feed.hub import FeedUnavailableError
from gql.feed.outlet import Outlet
from policies.errors import PolicyError
from store.errors import InvalidInputError, StoreError, refusal_for
from store.feed import live as feed
from store.feed import replay as feed_replay
from store.kinds.policy.in_force import PolicyVersion
from store.ledger.events import check_kinds
from store.reads.replicas import Freshness
from store.reads.visibility import RULE

# Direct sends do not wait unless the socket pushes back; a long batch yields now
# and then so that one subscriber cannot hold the event loop.
SENDS_PER_YIELD = 64

log = logging.getLogger("edgeloom.feed")


@strawberry.type(
    description="Live streams over WebSocket (graphql-transport-ws) or as server-sent events "
    "(POST with Accept: text/event-stream)."
)
class Subscription:
    @strawberry.subscription(
        description=(
            "Every audit event you may read, in feed order: first the events after the "
            'cursor `after` (an event\'s `cursor`, or "0" for the start of the feed) '
            "replayed from the table, then live ones, with no gap and no duplicate. "
            "`lanes` and `kinds` narrow it; events without a lane (policy changes) "
            "reach every subscriber that asks for their kind. Rights are those in force "
            "when each event is delivered. `match` and `recordIds` narrow it to what you "
            "work on (both given: events meeting both); the replay from `after` applies "
            "them too."
        )
    )
    async def audit_events(
        self,
        info: Info,
        after: Annotated[
            str | None,
            strawberry.argument(
                description="Replay from the event after this cursor (an event's cursor; "
                '"0" is the start of the feed), then go live; omit it for live events only. '
                "A cursor that names no event is refused."
            ),
        ] = None,
        lanes: Annotated[
            list[str] | None,
            strawberry.argument(
                description="Only events of these lanes; a lane you cannot read is refused, "
                "naming those you can."
            ),
        ] = None,
        kinds: Annotated[
            list[str] | None,
            strawberry.argument(
                description="Only events of these kinds; an unknown kind is refused, naming "
                "the known ones."
            ),
        ] = None,
        match: Annotated[list[str] | None, strawberry.argument(description=MATCH_HELP)] = None,
        mode: Annotated[
            GatherMode | None, strawberry.argument(description=MODE_HELP)
        ] = GatherMode.INTERSECT,
        record_ids: Annotated[
            list[strawberry.ID] | None, strawberry.argument(description=RECORD_IDS_HELP)
        ] = None,
        actors: Annotated[list[str] | None, strawberry.argument(description=ACTORS_HELP)] = None,
    ) -> AsyncGenerator[AuditEvent, None]:
        if isinstance(info.context, _RenderContext):
            # Rendering for a group of subscribers: the events are given.
            for item in info.context.events:
                yield AuditEvent.from_domain(item.event)
            return
        wanted = FeedArguments(match, mode, record_ids, actors)
        stream = _audit_events(info.context, info.schema, after, lanes, kinds, wanted)
        async with aclosing(stream):
            try:
                async for event in stream:
                    yield event
            except (PolicyError, StoreError, UnauthenticatedError, WebSocketDisconnected):
                # A socket gone while sending directly ends the operation as a failed
                # send by strawberry's handler would.
                raise
            except Exception as exc:
                refusal = refusal_for(exc)  # a statement stopped at its time limit
                if refusal is not None:
                    raise refusal from exc
                # Only refusals reach the client as they are; anything else is logged and
                # masked, like a failure in a query (a subscription's errors carry no path).
                log.error("auditEvents subscription failed", exc_info=exc)
                raise FeedFailedError() from exc

    @strawberry.subscription(description=WATCH_HELP)
    async def watch(
        self,
        info: Info,
        match: Annotated[list[str], strawberry.argument(description=WATCH_MATCH_HELP)],
        mode: Annotated[
            GatherMode | None, strawberry.argument(description=MODE_HELP)
        ] = GatherMode.INTERSECT,
        initial: Annotated[bool | None, strawberry.argument(description=INITIAL_HELP)] = False,
        after: Annotated[str | None, strawberry.argument(description=AFTER_HELP)] = None,
    ) -> AsyncGenerator[WatchChange, None]:
        stream = watch_changes(info.context, match, mode, bool(initial), after)
        async with aclosing(stream):
            try:
                async for change in stream:
                    yield change
            except (PolicyError, StoreError, UnauthenticatedError, WebSocketDisconnected):
                raise
            except Exception as exc:
                refusal = refusal_for(exc)  # a statement stopped at its time limit
                if refusal is not None:
                    raise refusal from exc
                log.error("watch subscription failed", exc_info=exc)
                raise FeedFailedError() from exc


@dataclass
class _RenderContext(Context):
    """The context `_render` executes an operation in: given events, rights pinned.

    Loaders live for the whole batch: a record's versions are read once for all its
    events (the ledger only grows, so a version read later is the same version).
    """

    events: Sequence[feed.FeedEvent] = ()


async def _render(
    schema: BaseSchema,
    outlet: Outlet,
    services: Services,
    agent: str,
    policy: PolicyVersion,
    events: Sequence[feed.FeedEvent],
) -> Rendered:
    """Each event's result payload, encoded, as the operation executed for it gives it.

    An operation selecting only fields read straight off the event is answered from the
    event's values (`gql.api.compiled_events`); any other is executed (`_execute`).
    """
    plain = plain_selection(schema, outlet.query, outlet.operation_name)
    if plain is not None:
        try:
            return {item.seq: outlet.encode({"data": plain.data(item.event)}) for item in events}
        except ValueError:
            pass  # executing it gives an error: as any other operation
    return await _execute(schema, outlet, services, agent, policy, events)


async def _execute(
    schema: BaseSchema,
    outlet: Outlet,
    services: Services,
    agent: str,
    policy: PolicyVersion,
    events: Sequence[feed.FeedEvent],
) -> Rendered:
    """Each event's result payload, encoded, from strawberry's own execution of the
    operation (extensions, validation, resolvers), only with the events given instead
    of read; the payload is built as strawberry's protocol handlers build it. An event
    whose result carries errors or extensions, which may differ from one execution to
    the next, maps to None and is executed by each subscriber; so does every event when
    rendering fails.
    """
    context = _RenderContext(
        Session(services, Caller(agent), pinned=policy, freshness=Freshness(primary=True)),
        events=events,
    )
    rendered: dict[int, str | None] = {}
    try:
        stream = await schema.subscribe(
            outlet.query,
            variable_values=outlet.variables,
            context_value=context,
            operation_name=outlet.operation_name,
        )
        async with aclosing(stream):
            given = iter(events)
            async for result in stream:
                item = next(given, None)
                if item is None or isinstance(result, PreExecutionError):
                    break
                shared = not result.errors and not result.extensions
                rendered[item.seq] = outlet.encode({"data": result.data}) if shared else None
    except Exception:
        log.exception("rendering feed events failed; each subscriber executes them instead")
        return {}
    return rendered


async def _audit_events(
    context: Context,
    schema: BaseSchema,
    after: str | None,
    lanes: list[str] | None,
    kinds: list[str] | None,
    arguments: FeedArguments,
) -> AsyncGenerator[AuditEvent, None]:
    hub = context.services.feed
    if hub is None:
        raise FeedUnavailableError()
    outlet = context.outlet if hub.options.share_renderings else None
    rights = Rights(context, hub)
    wanted_kinds = check_kinds(kinds)
    readable = await rights.lanes()
    if lanes is not None:
        unreadable = [lane for lane in lanes if not RULE.may_read(lane, readable)]
        if unreadable:
            raise InvalidInputError(
                f"lane(s) {unreadable} are not readable by agent '{rights.agent}'; "
                f"readable lanes: {sorted(readable)}",
                allowed=sorted(readable),
            )
    wanted = await arguments.resolve(context)
    position = None if after is None else await feed_replay.check_cursor(context.engine, after)
    progress = Progress(last=after, start=position or 0)
    share = None if outlet is None else outlet.share
    async with hub.subscribe(lanes, wanted_kinds, share, rights.bearer, wanted) as subscriber:
        if position is not None:
            # Taken after subscribing: what it cannot see will arrive live.
            progress.seen = await feed_replay.take_snapshot(context.engine)
            async for page in feed_replay.replay(
                context.engine,
                position,
                progress.seen,
                rights.lane_list,
                wanted_kinds,
                wanted=wanted,
            ):
                await rights.check_token()
                for item in page:
                    if subscriber.revoked:  # found by the hub (a notified revocation)
                        raise token_revoked(context)
                    if subscriber.wants(item):
                        context.begin_operation()
                        yield AuditEvent.from_domain(item.event)
                        progress.last = item.cursor
        while True:
            # Waiting with nothing queued, it may be served by the hub (gql.feed.batch.Direct).
            subscriber.direct = _direct(rights, schema, outlet, context.services, progress)
            batch = await rights.next(subscriber)
            subscriber.direct = None
            if subscriber.pending is not None:
                pending, subscriber.pending = subscriber.pending, None
                await pending  # what the hub began sending comes first
            due = await rights.due(batch, subscriber, progress)
            if not due:
                continue
            assert isinstance(batch, Batch)
            rendered: Rendered = {}
            if outlet is not None and rights.policy is not None:
                source = batch.renders
                render = partial(
                    _render,
                    schema,
                    outlet,
                    context.services,
                    rights.agent,
                    rights.policy,
                    source.allowed(rights.readable),
                )
                rendered = await source.rendered(rights.key, render)
            sent = 0
            for item in due:
                payload = rendered.get(item.seq)
                if payload is not None and outlet is not None:
                    await outlet.send(payload)
                    sent += 1
                    if sent % SENDS_PER_YIELD == 0:
                        await asyncio.sleep(0)
                else:
                    # Executed for this subscriber alone, afresh (its versions, its lanes).
                    context.begin_operation()
                    yield AuditEvent.from_domain(item.event)
                progress.last = item.cursor


def _direct(
    rights: Rights,
    schema: BaseSchema,
    outlet: Outlet | None,
    services: Services,
    progress: Progress,
) -> Direct | None:
    """How the hub may serve this subscriber while it waits, under its rights as they
    were last decided; None when it has no outlet (each event is executed for it)."""
    if outlet is None or rights.policy is None:
        return None
    return Direct(
        version=rights.policy.version,
        lanes=rights.readable,
        rights=rights.key,
        render=partial(_render, schema, outlet, services, rights.agent, rights.policy),
        send=outlet.send,
        progress=progress,
        head=outlet.head,
        raw=outlet.raw,
        open=outlet.open,
    )
