"""Arming a subscriber (its next writes go straight to its socket with its group's armed
set) and disarming it (served one by one again) when anything could make that wrong."""

from __future__ import annotations

from functools import partial

from gql.feed.direct import waiting
from gql.feed.subscriber import Armed, Group, Subscriber, drop_if_empty


class Arming:
    """Moves subscribers between their group's plain members and its armed sets."""

    def __init__(self, group_writes: bool) -> None:
        self.group_writes = group_writes

    def arm(self, group: Group, subscriber: Subscriber, in_force: int | None) -> None:
        """Arm a subscriber just written to when nothing stands in the way of the next
        write going straight to its socket, and watch its socket for what would."""
        direct = waiting(subscriber, in_force)
        if (
            direct is None
            or subscriber.armed is not None
            or not self.group_writes
            or not direct.open()
        ):
            return
        raw = direct.raw
        if raw is None or not raw.ready() or not raw.drained():
            return
        key = direct.frames_key
        armed = group.armed.get(key)
        if armed is not None and armed.version != direct.version:
            self.disarm_all(armed)
            armed = None
        if not raw.watch(subscriber, partial(self.disarm, subscriber)):
            return
        if armed is None:
            armed = group.armed[key] = Armed(group, direct.version, direct)
        progress = direct.progress
        if progress.seen is not None:
            armed.start = max(armed.start, progress.start)
            armed.xmax = max(armed.xmax, progress.seen.xmax)
        armed.members[subscriber] = (raw, progress, armed.writes)
        armed.entries[subscriber] = (subscriber, raw.transport)
        subscriber.armed = armed
        del group.plain[subscriber]

    def disarm(self, subscriber: Subscriber) -> None:
        """Serve `subscriber` one by one again, its progress brought up to what its armed
        set wrote to it."""
        armed = subscriber.armed
        if armed is None:
            return
        subscriber.armed = None
        raw, progress, armed_at = armed.members.pop(subscriber)
        del armed.entries[subscriber]
        raw.unwatch(subscriber)
        flight = armed.flight
        if flight is not None and flight.written(subscriber):
            progress.last = flight.cursor  # written this batch
        else:
            if flight is not None:
                flight.left.append(subscriber)
            if armed.writes > armed_at:  # written since it was armed
                progress.last = armed.cursor
        armed.group.plain[subscriber] = None
        if flight is None:
            drop_if_empty(armed)

    def disarm_all(self, armed: Armed) -> list[Subscriber]:
        """Disarm every member of `armed`; returns them."""
        members = list(armed.members)
        for member in members:
            self.disarm(member)
        return members
