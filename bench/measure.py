"""Timing helpers: closed-loop throughput, sequential latency, medians, the result table,
and progress on stderr (tables go to stdout)."""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any


def say(text: str) -> None:
    """A progress line on stderr."""
    print(text, file=sys.stderr, flush=True)


@dataclass
class Rate:
    calls: int
    records: int
    seconds: float

    @property
    def records_per_s(self) -> float:
        return self.records / self.seconds if self.seconds else 0.0

    @property
    def calls_per_s(self) -> float:
        return self.calls / self.seconds if self.seconds else 0.0


async def throughput(workers: int, duration: float, op: Callable[[int], Awaitable[int]]) -> Rate:
    """`workers` closed loops, each calling op(worker) until `duration` has passed.

    op returns how many records the call wrote. Calls in flight at the deadline
    finish and count; the time is taken when the last one has finished.
    """
    calls = 0
    records = 0
    start = time.perf_counter()
    deadline = start + duration

    async def loop(worker: int) -> None:
        nonlocal calls, records
        while time.perf_counter() < deadline:
            written = await op(worker)  # not `records += await ...`: that reads before awaiting
            records += written
            calls += 1

    await asyncio.gather(*(loop(w) for w in range(workers)))
    return Rate(calls, records, time.perf_counter() - start)


async def latencies(items: Sequence[Any], op: Callable[[Any], Awaitable[Any]]) -> list[float]:
    """Seconds per call, one call at a time."""
    out: list[float] = []
    for item in items:
        t0 = time.perf_counter()
        await op(item)
        out.append(time.perf_counter() - t0)
    return out


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = (len(ordered) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


class Progress:
    """A one-line progress report for long loads (records/s and ETA)."""

    def __init__(self, total: int, label: str) -> None:
        self.total, self.label = total, label
        self.start = time.monotonic()
        self.last = 0.0
        self.tty = sys.stderr.isatty()

    def update(self, done: int, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self.last < (1.0 if self.tty else 10.0):
            return
        self.last = now
        elapsed = now - self.start
        rate = done / elapsed if elapsed > 0 else 0.0
        eta = (self.total - done) / rate if rate > 0 else float("inf")
        eta_text = f"{int(eta // 60)}m{int(eta % 60):02d}s" if eta != float("inf") else "?"
        line = (
            f"{self.label}: {done:,}/{self.total:,} records, {rate:,.0f} rec/s, "
            f"elapsed {elapsed:,.0f}s, ETA {eta_text}"
        )
        print(("\r" + line) if self.tty else line, end="" if self.tty else "\n", file=sys.stderr)
        sys.stderr.flush()

    def finish(self, done: int) -> float:
        self.update(done, force=True)
        if self.tty:
            print(file=sys.stderr)
        return time.monotonic() - self.start


@dataclass
class Row:
    metric: str
    gateway: float
    raw: float | None
    ratio: float | None
    target: str
    passed: bool | None
    unit: str = ""


def table(rows: Sequence[Row], left: str = "gateway", right: str = "raw") -> str:
    width = max([46, *(len(r.metric) for r in rows)])
    head = f"{'metric':<{width}} {left:>10} {right:>12} {'ratio':>7} {'target':>8}  result"
    lines = [head, "-" * len(head)]
    for r in rows:
        raw = "" if r.raw is None else f"{r.raw:12.1f}" if r.raw >= 100 else f"{r.raw:12.2f}"
        gw = f"{r.gateway:10.1f}" if r.gateway >= 100 else f"{r.gateway:10.2f}"
        verdict = "" if r.passed is None else ("PASS" if r.passed else "FAIL")
        ratio = "" if r.ratio is None else f"{r.ratio:7.2f}"
        lines.append(f"{r.metric:<{width}} {gw:>10} {raw:>12} {ratio:>7} {r.target:>8}  {verdict}")
    return "\n".join(lines)
