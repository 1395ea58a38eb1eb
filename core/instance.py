"""Opening canon: the model, the store and the graph index, from a configuration.

This is the composition root of the core: the only place that turns configuration into objects. A new store
on the embedded model is seeded with the embedded sample data, so `canon serve` on a fresh machine needs
nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from core.audit import AuditLog
from core.config import Config
from core.dispatch import Dispatcher
from core.examples import Examples
from core.graph import GraphIndex
from core.interchange import import_path
from core.model import Model, default_seed_path, load_model
from core.registry import Registry, build_registry
from core.store import Store, open_store
from core.tokens import TokenFile

__all__ = ["Instance", "open_instance"]

SEED_PRINCIPAL = "system:seed"


@dataclass
class Instance:
    config: Config
    model: Model
    store: Store
    index: GraphIndex | None = None

    @cached_property
    def registry(self) -> Registry:
        return build_registry(self.model, examples=Examples.of_store(self.model, self.store))

    @cached_property
    def audit(self) -> AuditLog:
        """The store's audit log, written by a background thread until `close()`."""
        return AuditLog(self.store.append_audit)

    @cached_property
    def tokens(self) -> TokenFile:
        return TokenFile(self.config.tokens)

    @cached_property
    def dispatcher(self) -> Dispatcher:
        """The one dispatch path over this instance (needs the index); every call it takes is audited."""
        from core.tools import HANDLERS

        if self.index is None:
            raise RuntimeError("this instance was opened without an index")
        return Dispatcher(self.registry, self.store, self.index, HANDLERS, audit=self.audit)

    def reload_model(self) -> bool:
        """Adopt the model recorded in the store if another process changed it; True if it changed.

        The store validates writes under it, and the registry (and the dispatcher's view of it) is rebuilt, so
        every surface serves the new model from its next request on.
        """
        stored = self.store.stored_model()
        if stored.digest == self.model.digest:
            return False
        self.store.use_model(stored)
        self.model = stored
        registry = build_registry(stored, examples=Examples.of_store(stored, self.store))
        self.__dict__["registry"] = registry  # replace the cached property
        if "dispatcher" in self.__dict__:
            self.dispatcher.registry = registry
        return True

    def close(self) -> None:
        """Flush the audit log and close the store."""
        try:
            if "audit" in self.__dict__:
                self.audit.close()
        finally:
            self.store.close()


def open_instance(config: Config, *, with_index: bool = True, principal: str = "system") -> Instance:
    """Open the configured model and store (creating and seeding a new store), and build the index."""
    model = load_model(config.model)
    is_new = not config.store.exists()
    store = open_store(config.store, model, principal=principal)
    try:
        if is_new and config.model is None and config.seed:
            import_path(store, default_seed_path(), principal=SEED_PRINCIPAL)
        index = GraphIndex.build(store) if with_index else None
    except BaseException:
        store.close()
        if is_new:  # a store that could not be seeded is not left behind half-made
            for suffix in ("", "-wal", "-shm"):
                Path(f"{config.store}{suffix}").unlink(missing_ok=True)
        raise
    return Instance(config, model, store, index)
