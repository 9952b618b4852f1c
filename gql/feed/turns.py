"""When the fan-out lets the event loop turn: after serving subscribers for a slice of
time, so that requests go on while an event spreads to many."""

from __future__ import annotations

import asyncio
import time


class Turns:
    """The fan-out's clock: the end of its current slice, and how many it served."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._served = 0
        self._until = 0.0

    def begin(self) -> None:
        """Start a slice now."""
        self._until = time.perf_counter() + self.seconds

    def over(self) -> bool:
        """Whether the current slice has run out."""
        return time.perf_counter() >= self._until

    async def turn(self) -> None:
        """Let the event loop turn once, then start a new slice."""
        await asyncio.sleep(0)
        self.begin()

    async def served(self) -> None:
        """Count one subscriber served (sent to or woken), and turn once the slice ran
        out (the clock read every 8th)."""
        self._served += 1
        if not self._served % 8 and self.over():
            await self.turn()
