"""A model snapshot: one model and everything canon builds from it, immutable, replaced whole on a model change.

    Snapshot(registry, dispatcher)        the registry (tool and resource definitions, the model's derived
                                          schemas, compiled validators) and the dispatcher calling through it

`core.seam.instance.Instance` holds the current snapshot and replaces it with one assignment when the model changes
(another process recorded a new one). A call reads the snapshot once, when it starts, and finishes on it: a model
change never mixes two registries into one call. What a surface builds for one model (its app, the MCP tool
list in its wire form) is kept with the snapshot it was built for (`PerSnapshot`) and built again for the next
one; it is never keyed on an object's `id()`, which a freed snapshot's successor may reuse.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from core.dispatch.dispatcher import Dispatcher
from core.dispatch.registry import Registry
from core.lang.model import Model

__all__ = ["PerSnapshot", "Snapshot"]

T = TypeVar("T")


@dataclass(frozen=True, eq=False)
class Snapshot:
    """One model's registry and the dispatcher over it. Compared by identity: two snapshots are two models."""

    registry: Registry
    dispatcher: Dispatcher

    def __post_init__(self) -> None:
        if self.dispatcher.registry is not self.registry:
            raise ValueError("a snapshot's dispatcher must call through the snapshot's own registry")

    @property
    def model(self) -> Model:
        return self.registry.model

    def evolve(self, registry: Registry) -> Snapshot:
        """The snapshot of another model: `registry`, and a dispatcher like this one's (the same store, index,
        handlers, audit and turns for walks) calling through it. This snapshot is left as it is."""
        return Snapshot(registry, self.dispatcher.evolve(registry))


class PerSnapshot(Generic[T]):
    """Something derived from a snapshot, built once for it and again for the next one.

    It holds the snapshot it was built for, so "same model?" is an identity test on a live object (never an
    `id()` that a later object may reuse). Two threads asking for a new snapshot at once may both build; one
    result is kept, both are correct.
    """

    def __init__(self, build: Callable[[Snapshot], T]) -> None:
        self._build = build
        self._held: tuple[Snapshot, T] | None = None

    def __call__(self, snapshot: Snapshot) -> T:
        held = self._held
        if held is None or held[0] is not snapshot:
            held = (snapshot, self._build(snapshot))
            self._held = held  # one assignment: the pair is never seen half-replaced
        return held[1]
