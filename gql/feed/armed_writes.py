"""Writing a batch to an armed set: the group's frames, one write to each member's
transport from the fan-out loop, with no other per-member work (docs/feed_hub.md)."""

from __future__ import annotations

from gql.feed.arming import Arming
from gql.feed.batch import Batch
from gql.feed.direct import render, whole
from gql.feed.options import Counts
from gql.feed.outlet import FrameEncoder
from gql.feed.subscriber import Armed, Flight, Subscriber, drop_if_empty
from gql.feed.turns import Turns

# Writes from an armed set between two reads of the clock.
_WRITES_PER_CLOCK = 64


class ArmedWrites:
    """Writes batches to armed sets, leaving to the ordinary path whom it cannot."""

    def __init__(
        self, arming: Arming, frames: FrameEncoder | None, counts: Counts, turns: Turns
    ) -> None:
        # None: no group writes (nothing is armed then).
        self.arming = arming
        self.frames = frames
        self.counts = counts
        self.turns = turns

    async def write(self, armed: Armed, batch: Batch, in_force: int | None) -> list[Subscriber]:
        """Write `batch` to the members of `armed`: the group's frames, one write each.
        Returns the members left to the ordinary path for it (disarmed before their
        write, or all of them when the batch cannot be written this way)."""
        frames = self.frames
        if frames is None or armed.version != in_force or not armed.covers(batch):
            return self.arming.disarm_all(armed)
        flight = armed.flight = Flight(list(armed.entries.values()))
        try:
            sending = whole(armed.direct, batch, frames)
            if sending is None:
                await render(armed.direct, batch)
                sending = whole(armed.direct, batch, frames)
                if flight.left:  # disarmed while the rendering was made
                    flight.reorder(list(armed.entries.values()))
            if sending is None:  # an event to execute for each alone
                self.arming.disarm_all(armed)
                return flight.left
            self.counts.deliveries += len(flight.order)
            if not sending.count:
                return flight.left
            flight.cursor = sending.cursor
            wrote = await self._write(armed, flight, sending.frames)
            self.counts.group_writes += wrote
            self.counts.armed_writes += wrote
            self.counts.sent_directly += wrote * sending.count
            armed.writes += 1
            armed.cursor = flight.cursor
            return flight.left
        finally:
            armed.flight = None
            drop_if_empty(armed)

    async def _write(self, armed: Armed, flight: Flight, frames: bytes) -> int:
        """Write `frames` to each member in `flight.order`, letting the loop turn between
        slices; one disarmed meanwhile is skipped. Returns how many writes were made."""
        order = flight.order
        wrote = 0
        for n in range(0, len(order), _WRITES_PER_CLOCK):
            if n and self.turns.over():
                flight.reached, left = n, len(flight.left)
                await self.turns.turn()
                if len(flight.left) != left:  # some were disarmed meanwhile
                    flight.reorder(order[:n] + [e for e in order[n:] if e[0].armed is armed])
            for at, (subscriber, transport) in enumerate(order[n : n + _WRITES_PER_CLOCK], n):
                try:
                    transport.write(frames)
                except RuntimeError:  # lost under it: its task is told and ends
                    flight.reached = at
                    self.arming.disarm(subscriber)
                    continue
                wrote += 1
                if transport.get_write_buffer_size():  # pushing back: the ordinary path sees
                    flight.reached = at + 1
                    self.arming.disarm(subscriber)
        return wrote
