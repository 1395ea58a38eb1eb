"""Retention: what `canon store compact` removes from a store's audit log and change log, and what stays.

`Retention` is the `[retention]` settings: audit records older than `audit_days` go; a change goes when it is older
than `changes_days` (if set) and outside the newest `changes_keep_revisions` (if set). The newest change always
stays (the store's revision is its change log's newest). After compaction the change log starts at `Compaction.
oldest`; `check_since` refuses a read from before it (`GoneError`), so `get_changes` never answers a partial feed
as if it were whole.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from core.values.errors import GoneError

__all__ = ["Compaction", "Retention", "check_since", "compaction_floor", "cutoff"]


@dataclass(frozen=True)
class Retention:
    audit_days: int | None = None
    changes_keep_revisions: int | None = None
    changes_days: int | None = None

    @property
    def compacts_changes(self) -> bool:
        return self.changes_keep_revisions is not None or self.changes_days is not None


@dataclass(frozen=True)
class Compaction:
    """What a compaction removed, and the oldest revision the change log holds after it."""

    changes_removed: int
    audit_removed: int
    oldest: int  # `get_changes` from a revision before `oldest - 1` is `gone`


def cutoff(days: int, now: datetime | None = None) -> str:
    """The time `days` days before `now`, as the store writes times (ISO 8601, milliseconds, `Z`)."""
    moment = (now or datetime.now(UTC)) - timedelta(days=days)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def compaction_floor(
    retention: Retention, newest: int, newest_before: Callable[[str], int], now: datetime | None = None
) -> int:
    """The newest revision `retention` lets the change log drop, never the newest of all (0: none).

    `newest`: the store's revision; `newest_before(at)`: the newest revision committed before the time `at`. Both
    stores compact by this one rule and differ only in the SQL that answers those two questions.
    """
    if not retention.compacts_changes or newest == 0:
        return 0
    bounds = [newest - 1]
    if retention.changes_keep_revisions is not None:
        bounds.append(newest - retention.changes_keep_revisions)
    if retention.changes_days is not None:
        bounds.append(newest_before(cutoff(retention.changes_days, now)))
    return max(0, min(bounds))


def check_since(since: int, floor: int) -> None:
    """Refuse reading the changes after `since` when the log was compacted through `floor` (0: never)."""
    if since < floor:
        raise GoneError(since=since, oldest=floor + 1)
