"""How the feed of one gateway process runs (`FeedOptions`), and what its hub counts."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FeedOptions:
    """How the feed of one gateway process runs."""

    poll_seconds: float = 0.05
    order_wait_seconds: float = 1.0
    # Batches (one per read that has events for the subscriber), not events: a
    # subscriber this far behind is closed and resumes from its last cursor.
    queue_batches: int = 256
    start_timeout_seconds: float = 10.0
    token_recheck_seconds: float = 2.0
    # Render each event once per group of subscribers running the same operation under
    # the same rights, and send them all the same message. Off, every subscriber's
    # events are executed on their own: the reference the shared rendering is held to.
    share_renderings: bool = True
    # How long the fan-out serves subscribers (sends to or wakes them) before it lets
    # the event loop turn, when an event reaches many, so that requests go on while it
    # spreads: a thousandth of a second delays a request no more than that, and costs a
    # turn of the loop per few dozen deliveries, not one per sixteen.
    turn_seconds: float = 0.001
    # Write a group's messages to each member's socket as frames built once per group,
    # from the fan-out loop (the server's frame encoding, handed to the hub at start). Off,
    # each message goes through the socket's ordinary send: the reference the group write
    # is held to.
    group_writes: bool = True


@dataclass
class Counts:
    """What the hub's parts did, for the metrics and the tests."""

    # Batches handed to subscribers, and subscribers closed as too slow (the metrics).
    deliveries: int = 0
    closed_slow: int = 0
    # Events sent by the hub itself (`Direct`), and the writes of group frames (each
    # one or more events to one socket).
    sent_directly: int = 0
    group_writes: int = 0
    # Of the group writes, those made to armed members (`Armed`).
    armed_writes: int = 0
