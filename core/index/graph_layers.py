"""The graph index's maps as layers: a large base dict shared with readers, and the changes made since.

The index keeps three maps, id -> node attributes, successors and predecessors, each a `Layer`. While no reader
holds a view of the base, the writer changes the base dicts in place, as networkx would. While a reader walks it,
the writer leaves the base alone and records each change in the layer's delta instead, copying an entry (one
node's attributes or adjacency dict, a few items) before its first change, so what a reader holds never changes
under it. A view of a layer with changes is an `Overlay`: a read-only mapping that looks an id up in the delta
first. See docs/decisions/0017-readers-walk-published-views.md.

A base may also be read-only: the arrays of a mapped index file (`core.index.mapped`, ADR 0061). Such a layer is
never changed in place, folded or copied: every change goes to the delta, until the index maps a newer file.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["Layer", "Overlay", "pairs"]

Entry = dict[str, Any]
_ABSENT: Any = object()


def pairs(adjacency: Mapping[str, Any], id: str) -> list[tuple[str, str]]:
    """(neighbour, edge type) of every edge at `id` in an adjacency map (id -> neighbour -> {edge type: data}),
    neighbour by neighbour: what a walk steps along. A map that can answer it without making the neighbour dicts
    (an overlay, a mapped file's arrays: `core.index.mapped`) does; KeyError for an absent `id`."""
    if type(adjacency) is dict:
        entry: Mapping[str, Any] = adjacency[id]
    else:
        read = getattr(adjacency, "pairs", None)
        if read is not None:
            return read(id)
        entry = adjacency[id]
    return [(t, k) for t, keys in entry.items() for k in keys]


class Overlay(Mapping[str, Entry]):
    """A frozen map: `delta` (None for a removed id) over `base`. Neither is changed while it is in use."""

    __slots__ = ("_base", "_delta", "_size")

    def __init__(self, base: Mapping[str, Entry], delta: dict[str, Entry | None], size: int) -> None:
        self._base, self._delta, self._size = base, delta, size

    def __getitem__(self, key: str) -> Entry:
        found = self._delta.get(key, _ABSENT)
        if found is _ABSENT:
            return self._base[key]
        if found is None:
            raise KeyError(key)
        return found

    def get(self, key: str, default: Any = None) -> Any:
        found = self._delta.get(key, _ABSENT)
        if found is _ABSENT:
            return self._base.get(key, default)
        return default if found is None else found

    def __contains__(self, key: object) -> bool:
        found = self._delta.get(key, _ABSENT)  # pyright: ignore[reportCallIssue, reportArgumentType]
        return key in self._base if found is _ABSENT else found is not None

    def pairs(self, key: str) -> list[tuple[str, str]]:
        found = self._delta.get(key, _ABSENT)
        if found is _ABSENT:
            return pairs(self._base, key)
        if found is None:
            raise KeyError(key)
        return [(t, k) for t, keys in found.items() for k in keys]

    def __iter__(self) -> Iterator[str]:
        delta = self._delta
        yield from (key for key in self._base if key not in delta)
        yield from (key for key, entry in delta.items() if entry is not None)

    def __len__(self) -> int:
        return self._size


class Layer:
    """One map of the index as its writer sees it: `base`, changed in place only while `in_place`, else `delta`.
    A base that is not a dict (a mapped file's) is read-only: `writable` is False and it is never changed."""

    def __init__(self, base: Mapping[str, Entry]) -> None:
        self.base: Any = base
        self.writable = isinstance(base, dict)
        self.delta: dict[str, Entry | None] = {}
        self.fresh: set[str] = set()  # ids whose delta entry no published view holds yet: safe to change
        self.size = len(base)
        self.in_place = False

    def get(self, id: str) -> Entry | None:
        found = self.delta.get(id, _ABSENT)
        return self.base.get(id) if found is _ABSENT else found

    def own(self, id: str) -> Entry:
        """The entry of a present `id`, to change: the base's own while in place, else a private copy."""
        if self.in_place:
            return self.base[id]
        if id in self.fresh:
            entry = self.delta[id]
            assert entry is not None
            return entry
        current = self.get(id)
        assert current is not None
        entry = self.delta[id] = dict(current)
        self.fresh.add(id)
        return entry

    def put(self, id: str, entry: Entry) -> None:
        """Add `id` (absent until now) with `entry`."""
        self.size += 1
        if self.in_place:
            self.base[id] = entry
        else:
            self.delta[id] = entry
            self.fresh.add(id)

    def drop(self, id: str) -> None:
        """Remove a present `id`."""
        self.size -= 1
        if self.in_place:
            del self.base[id]
        else:
            self.delta[id] = None
            self.fresh.discard(id)

    def published(self) -> Mapping[str, Entry]:
        """The map as it is now, for readers; nothing they get is changed afterwards (the next change copies)."""
        self.fresh.clear()
        if not self.delta:
            return self.base
        return Overlay(self.base, dict(self.delta), self.size)

    def fold(self) -> None:
        """Move the delta into the base, in place: only while no reader holds a view of the base (and only a
        writable one)."""
        assert self.writable, "a read-only base is never changed"
        for id, entry in self.delta.items():
            if entry is None:
                self.base.pop(id, None)
            else:
                self.base[id] = entry
        self.delta.clear()
        self.fresh.clear()

    def rebase(self) -> None:
        """A new base, the old one with the delta applied, leaving the old one to the readers still holding it."""
        assert self.writable, "a read-only base is never copied"
        self.base = dict(self.base)
        self.fold()
