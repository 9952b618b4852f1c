"""A progress bar on standard error for long commands (export, import)."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class ProgressBar:
    """Redraws in place on a terminal; elsewhere prints a line every tenth of the way."""

    def __init__(self, label: str, stream: TextIO = sys.stderr) -> None:
        self.label = label
        self.stream = stream
        self.started = time.monotonic()
        self.shown = -1

    def __call__(self, done: int, total: int) -> None:
        share = 1.0 if total <= 0 else min(done / total, 1.0)
        rate = done / max(time.monotonic() - self.started, 1e-6)
        text = (
            f"{self.label} [{'#' * int(share * 30):<30}] {share:6.1%} "
            f"{done:,}/{total:,} lines, {rate:,.0f}/s"
        )
        if self.stream.isatty():
            self.stream.write("\r" + text + ("\n" if done >= total else ""))
        elif int(share * 10) != self.shown:
            self.shown = int(share * 10)
            self.stream.write(text + "\n")
        self.stream.flush()
