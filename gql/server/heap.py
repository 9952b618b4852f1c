"""Tuning the cyclic garbage collector once the gateway has started."""

from __future__ import annotations

import gc

# Objects allocated between two collections of the youngest generation (CPython's
# default is 700): a 500-record ingestMany allocates hundreds of thousands of objects,
# almost all freed by reference counting, and with the default the collector ran
# thousands of times per call, each time also ageing what the call still held.
GC_YOUNG_THRESHOLD = 50_000


def settle_heap() -> None:
    """Once started: everything built so far (schema, caches, compiled statements)
    lives as long as the process, so the cyclic collector stops traversing it
    (`gc.freeze`), and young collections run less often (bench/README.md has what the
    collector cost before)."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(GC_YOUNG_THRESHOLD, middle, old)
