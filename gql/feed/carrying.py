"""The events of one read by the edge properties their records carried, and the
properties a gather's filter needs one of: a read visits only the groups its records'
properties name (docs/feed_hub.md: groups share one rendering)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from policies.properties import Property
from store.feed.filters import FeedFilter
from store.feed.live import FeedEvent


class Carrying:
    """The events of one read by the edge properties their records carried before or
    after the change: a gather's group looks only at the events carrying its first
    property (INTERSECT) or one of them (UNION), not at every event of the read."""

    def __init__(self, events: Sequence[FeedEvent]) -> None:
        self.events = events
        self._at: dict[Property, list[int]] = {}
        for n, event in enumerate(events):
            if event.held is not None:
                for prop in event.held.before | event.held.after:
                    self._at.setdefault(prop, []).append(n)

    def of(self, wanted: FeedFilter) -> Sequence[FeedEvent]:
        """The events `wanted` may admit, in feed order (all of them for a filter that
        is not a gather)."""
        props = filter_keys(wanted)
        if props is None:
            return self.events
        found = sorted({n for p in props for n in self._at.get(p, ())})
        return [self.events[n] for n in found]

    def carried(self) -> Iterable[Property]:
        """Every edge property a record of the read carried before or after."""
        return self._at.keys()


def filter_keys(wanted: FeedFilter) -> tuple[Property, ...] | None:
    """The edge properties one of which an event's record must carry, before or after,
    for `wanted` to admit it (None: it is not a gather, any event may do)."""
    if wanted.match is None:
        return None
    return wanted.match if wanted.union else wanted.match[:1]
