"""Who subscribes: the subscribers of one process by group, the groups indexed by the edge
properties they follow, and the closing of a subscriber the hub stops feeding."""

from __future__ import annotations

from collections.abc import Hashable, Iterable

from gql.feed.arming import Arming
from gql.feed.carrying import Carrying, filter_keys
from gql.feed.options import Counts
from gql.feed.subscriber import Closed, Group, Subscriber
from policies.properties import Property


class Roster:
    """The subscribers and their groups: whom a read is offered to."""

    def __init__(self, arming: Arming, counts: Counts) -> None:
        self.arming = arming
        self.counts = counts
        self.subscribers: set[Subscriber] = set()
        # The subscribers of each group (`Subscriber.group_id`): a read looks at each group
        # once, and at the members of those it has events for.
        self.groups: dict[int, Group] = {}
        # The groups by the edge properties one of which a record must carry for them
        # (`filter_keys`), and those any event may concern: a read visits only the groups
        # its records' properties name, however many gathers are followed.
        self._keyed: dict[Property, dict[int, None]] = {}
        self._unkeyed: dict[int, None] = {}
        self._group_ids: dict[Hashable, int] = {}
        # Subscribers filtering on a gather: while there are any, the reader reads each
        # event's memberships with it.
        self.gathering = 0

    def join(self, subscriber: Subscriber) -> None:
        """Enter `subscriber` in its group, a new one if none is alike."""
        if not self.subscribers:
            self._group_ids.clear()  # no one holds a number: start afresh
        # A number per group, so a read finds each group's batch without hashing filters.
        subscriber.group_id = self._group_ids.setdefault(subscriber.group, len(self._group_ids))
        self.subscribers.add(subscriber)
        group = self.groups.get(subscriber.group_id)
        if group is None:
            group = self.groups[subscriber.group_id] = Group(subscriber)
            self._index(subscriber, add=True)
        group.plain[subscriber] = None
        self.gathering += subscriber.wanted.needs_memberships

    def leave(self, subscriber: Subscriber) -> None:
        """Take `subscriber` out for good (its operation ended)."""
        self.forget(subscriber)
        self.gathering -= subscriber.wanted.needs_memberships

    def forget(self, subscriber: Subscriber) -> None:
        """Offer `subscriber` nothing more."""
        if subscriber not in self.subscribers:
            return
        self.arming.disarm(subscriber)
        self.subscribers.discard(subscriber)
        group = self.groups[subscriber.group_id]
        del group.plain[subscriber]
        if group.empty:
            del self.groups[subscriber.group_id]
            self._index(group.like, add=False)

    def _index(self, like: Subscriber, add: bool) -> None:
        """Enter a new group in `_keyed` or `_unkeyed`, or take a gone one out."""
        keys = filter_keys(like.wanted)
        places = [self._unkeyed] if keys is None else [self._keyed.setdefault(p, {}) for p in keys]
        for ids in places:
            if add:
                ids[like.group_id] = None
            else:
                ids.pop(like.group_id, None)
        if not add and keys is not None:
            for p in keys:
                if not self._keyed.get(p, True):
                    del self._keyed[p]

    def offered(self, carrying: Carrying | None, unheld: bool) -> Iterable[Group]:
        """The groups a read may concern: every group, or when the read's events carry
        their records' properties, those following one of them and those following no
        gather."""
        if carrying is None or unheld:
            return list(self.groups.values())
        ids = dict.fromkeys(self._unkeyed)
        for prop in carrying.carried():
            ids.update(self._keyed.get(prop, ()))
        return [self.groups[i] for i in ids]

    @staticmethod
    def members(group: Group) -> list[Subscriber]:
        return [*group.plain, *(s for armed in group.armed.values() for s in armed.members)]

    def close(self, subscriber: Subscriber, why: Closed) -> None:
        """Stop feeding a subscriber and tell it why, in place of what it had queued.

        What it had not taken yet is dropped here, but not lost: it resumes from the
        last event it delivered and replays the rest from the table.
        """
        self.forget(subscriber)
        if why is Closed.TOO_SLOW:
            self.counts.closed_slow += 1
        while not subscriber.queue.empty():
            subscriber.queue.get_nowait()
        subscriber.queue.put_nowait(why)

    @property
    def armed(self) -> int:
        """How many subscribers are armed now."""
        return sum(len(a.members) for g in self.groups.values() for a in g.armed.values())
