"""Progress of long commands (`canon import`, `canon model diff` and `apply`) on standard error, drawn by tqdm.

A long operation reports through a plain callback, `(phase, done, total)`, and knows nothing of terminals;
`ProgressBar` is that callback for the command line: one bar per phase, counting in one unit (records, but for
the phases `UNITS` names), with its rate and the time left, like
`writing:  42%|████▏     | 17094/40699 [00:03<00:04, 5321.77 records/s]`. When standard error is not a
terminal it draws nothing, so what a script reads stays clean.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, NoReturn, TextIO

if TYPE_CHECKING:
    from tqdm import tqdm

__all__ = ["UNITS", "ProgressBar"]

UNITS: Mapping[str, str] = {"rendering": "models"}
"""phase -> what it counts, where that is not records (`canon model diff` renders two models' artifacts)."""


_BAR = "{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_noinv_fmt}]"
_COUNT = "{desc}: {n_fmt}{unit} [{elapsed}, {rate_noinv_fmt}]"  # a total of 0: unknown, no bar
# the rate always per second (tqdm's default turns a slow one into "1.40s/ models")


class ProgressBar:
    """The `(phase, done, total)` callback that draws a bar per phase on `stream` (standard error): on a terminal,
    or always (`enabled=True`), or never (`enabled=False`). A total of 0 means unknown: a count without a bar."""

    def __init__(self, stream: TextIO | None = None, *, enabled: bool | None = None) -> None:
        self.stream = stream or sys.stderr
        self._disable = None if enabled is None else not enabled  # tqdm's None: drawn only on a terminal
        self._bar: tqdm[NoReturn] | None = None  # a bar over no iterable, which tqdm types so
        self._phase = ""

    def __call__(self, phase: str, done: int, total: int) -> None:
        if self._bar is None or phase != self._phase:
            from tqdm import tqdm  # here: importing it takes 0.1 s, which a command that reports nothing never pays

            self.close()
            self._phase = phase
            self._bar = tqdm(desc=phase, total=total or None, unit=f" {UNITS.get(phase, 'records')}",
                             file=self.stream, disable=self._disable, bar_format=_BAR if total else _COUNT,
                             dynamic_ncols=True, mininterval=0.1)  # fmt: skip
        bar = self._bar
        if total and bar.total != total:
            bar.total = total
        bar.update(done - bar.n)

    def close(self) -> None:
        """End the current phase's bar (its last state stays on the screen)."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None
