"""The arguments by which a feed subscription follows what an agent works on."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gql.api.context import Context
from gql.api.types import GatherMode
from store.errors import InvalidInputError
from store.feed.filters import FeedFilter
from store.kinds.record.queries import gather_properties
from store.kinds.record.resolve import resolve_id

MAX_RECORD_IDS = 100

MATCH_HELP = (
    "Only events about records on this gather (edge properties `label:value`, "
    "combined by `mode`): a record's event arrives when the record was on the gather "
    "in the version before the change or after it, so you see records join it, change "
    "on it and leave it. Events of objects attached to a record (a correction) follow "
    "the record as it was then."
)
MODE_HELP = (
    "How `match` combines its edge properties: INTERSECT (records carrying every one) "
    "or UNION (any one); TIMELINE is UNION here, the feed's order being its own."
)
ACTORS_HELP = "Only events written by these agents (the events' `actor`)."
RECORD_IDS_HELP = (
    f"Only events about these records (exact ids or unique prefixes, at most "
    f"{MAX_RECORD_IDS}, resolved among the records you may read) and about what is "
    "asserted on them: connections, groups, adjustment chains, corrections and any "
    "event whose payload names one of them."
)


@dataclass(frozen=True)
class FeedArguments:
    """`match`, `mode` and `recordIds` as a subscription was given them."""

    match: Sequence[str] | None
    mode: GatherMode | None
    record_ids: Sequence[str] | None
    actors: Sequence[str] | None = None

    async def resolve(self, context: Context) -> FeedFilter:
        """The filter, checked: properties parsed, record ids resolved with the caller's
        rights (an id of a record it may not read is not found, as in every read)."""
        if self.match is not None:
            gather_properties(self.match)  # refuses an empty or too long match
        ids: list[str] | None = None
        if self.record_ids is not None:
            if not self.record_ids:
                raise InvalidInputError(
                    "recordIds needs at least one record id (or leave it out for every record)"
                )
            if len(self.record_ids) > MAX_RECORD_IDS:
                raise InvalidInputError(
                    f"recordIds takes at most {MAX_RECORD_IDS} record ids "
                    f"(got {len(self.record_ids)})",
                    allowed=MAX_RECORD_IDS,
                )
            async with context.read() as (db, lanes):
                ids = [await resolve_id(db, ident, lanes) for ident in self.record_ids]
        union = self.mode in (GatherMode.UNION, GatherMode.TIMELINE)
        return FeedFilter.of(self.match, union, ids, self.actors)
