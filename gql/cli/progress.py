"""A progress bar on standard error for long commands (export, import, intake)."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class ProgressBar:
    """Redraws in place on a terminal; elsewhere prints a line every tenth of the way,
    or nothing when `quiet_elsewhere` (a summary follows anyway)."""

    def __init__(
        self,
        label: str,
        stream: TextIO = sys.stderr,
        unit: str = "lines",
        quiet_elsewhere: bool = False,
    ) -> None:
        self.label = label
        self.stream = stream
        self.unit = unit
        self.quiet = quiet_elsewhere and not stream.isatty()
        self.started = time.monotonic()
        self.shown = -1

    def __call__(self, done: int, total: int) -> None:
        if self.quiet:
            return
        share = 1.0 if total <= 0 else min(done / total, 1.0)
        rate = done / max(time.monotonic() - self.started, 1e-6)
        eta = f", ETA {_duration((total - done) / rate)}" if 0 < done < total else ""
        text = (
            f"{self.label} [{'#' * int(share * 30):<30}] {share:6.1%} "
            f"{done:,}/{total:,} {self.unit}, {rate:,.0f}/s{eta}"
        )
        if self.stream.isatty():
            self.stream.write("\r" + text + "\x1b[K" + ("\n" if done >= total else ""))
        elif int(share * 10) != self.shown:
            self.shown = int(share * 10)
            self.stream.write(text + "\n")
        self.stream.flush()


def _duration(seconds: float) -> str:
    whole = int(seconds + 0.5)
    return f"{whole // 60}m{whole % 60:02d}s" if whole >= 60 else f"{whole}s"
