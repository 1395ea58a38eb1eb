"""A progress bar for long commands, drawn on a terminal and silent elsewhere."""

from __future__ import annotations

import sys
import time
from typing import TextIO

__all__ = ["ProgressBar"]


class ProgressBar:
    """Redraws one line like `writing  42% [########............]  42,000/100,000`, at most 10 times a second."""

    def __init__(self, stream: TextIO | None = None, *, enabled: bool | None = None, width: int = 30) -> None:
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.width = width
        self._last = 0.0
        self._drawn = False

    def __call__(self, phase: str, done: int, total: int) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self._last < 0.1 and done != total:
            return
        self._last = now
        if total > 0:
            share = min(done / total, 1.0)
            bar = "#" * round(share * self.width)
            line = f"{phase:<8} {share:4.0%} [{bar:.<{self.width}}] {done:,}/{total:,}"
        else:
            line = f"{phase:<8} {done:,} records"
        self.stream.write("\r" + line.ljust(70))
        self.stream.flush()
        self._drawn = True

    def close(self) -> None:
        if self._drawn:
            self.stream.write("\n")
            self.stream.flush()
            self._drawn = False
