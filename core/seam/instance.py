"""Opening canon: the model, the store and the graph index, from a configuration.

This is the composition root of the core: the only place that turns configuration into objects. A new store
on the embedded model is seeded with the embedded sample data, so `canon serve` on a fresh machine needs
nothing else. The model and everything built from it form one immutable `core.seam.snapshot.Snapshot`, which a model
change replaces in one assignment (`Instance.reload_model`).
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from core.dispatch.dispatcher import Dispatcher
from core.dispatch.examples import Examples
from core.dispatch.registry import Registry, build_registry
from core.dispatch.walkers import Walkers, workers_for
from core.index.graph import GraphIndex
from core.index.persisted import index_file, open_index, remap_index, save_index
from core.lang.model import Model, default_seed_path, load_model
from core.lang.model_migration import renames_types
from core.lang.schema_checks import SchemaChecks
from core.ops.config import Config
from core.ops.tokens import token_file
from core.seam.model_apply import Planner
from core.seam.snapshot import Snapshot
from core.store import Store, backend_for, open_existing_store, open_store, store_exists
from core.store.interchange import import_path
from core.tools import HANDLERS, Toolset, installed
from core.values.audit import AuditLog
from core.values.errors import ConfigError
from core.values.principal import ReviewPolicy

if TYPE_CHECKING:
    from core.ops.metrics import Metrics

__all__ = ["Instance", "open_instance"]

SEED_PRINCIPAL = "system:seed"
CLOSE_SAVE_LAG = 1_000  # revisions the index may be past its file at close without saving it (or a hundredth of it)
log = logging.getLogger("canon.model")


def review_policy(config: Config, model: Model) -> ReviewPolicy:
    """`[proposals]`'s review policy for `model`; a `review_types` entry naming none of its types is a
    `ConfigError` naming it (a later model without the type: the entry names nothing then)."""
    where = config.origins.get("review_types", "[proposals] review_types")
    for name in config.review_types:
        if name not in model.node_types and name not in model.edge_types:
            raise ConfigError(f"{where}: {name!r} is no node or edge type of the model {model.name}.", source=where,
                              key="proposals.review_types")  # fmt: skip
    return config.review_policy()


class Instance:
    """An opened canon: its configuration, store, graph index, tokens and audit log, and the current `Snapshot`
    (the model and everything built from it), which a model change replaces whole.

    Opened without an index (the CLI's store commands), it has a model and no snapshot: nothing is dispatched.
    """

    def __init__(self, config: Config, model: Model, store: Store, index: GraphIndex | None = None,
                 tools: Toolset | None = None, *, registry: Registry | None = None,
                 checks: SchemaChecks | None = None) -> None:  # fmt: skip
        """`tools`: tools beyond the built-in ones. `registry`: one already built for `model` and these tools
        (otherwise it is built here, when there is an index). `checks`: the checks remembered between starts
        (default: those of `config.cache`)."""
        self.config = config
        self.store = store
        self.index = index
        self.tools = installed(tools)  # every installed toolset (`canon.tools`) and `tools`
        self.tokens = token_file(config)
        self._model = model  # the model while there is no snapshot
        self._audit: AuditLog | None = None
        self._snapshot: Snapshot | None = None
        self._metrics: Metrics | None = None
        self._reloading = threading.Lock()
        self._checks = checks or SchemaChecks(config.cache)
        # where the graph index is saved between starts (core.index.persisted), and the revision saved there
        self.index_path = index_file(config.store, config.cache) if index is not None else None
        self._saved = None if index is None else index.loaded_at
        self._saving: threading.Thread | None = None
        self._closing = False  # a save at close does not move the index onto the file it wrote
        if index is not None and self.index_path is not None:  # a mapped base grown past its bound: a newer file
            index.on_grown = self._grown
        if index is not None:
            self._audit = AuditLog(store.append_audit)  # written by a background thread until `close()`
            examples = Examples.of_store(model, store)
            registry = registry or build_registry(
                model, (), examples, checks=self._checks, definitions=self.tools.definitions
            )
            # handed in: the walk workers' handler table, and what apply_model plans with (core.dispatch.planning)
            dispatcher = Dispatcher(registry, store, index, self.tools.handlers, audit=self._audit,
                                    walkers=self._walkers(config), planner=Planner(store),
                                    reviewers=config.reviewers(), policy=review_policy(config, model))  # fmt: skip
            self._snapshot = Snapshot(dispatcher.registry, dispatcher)
            if config.tracing:  # imported only then: a process that traces nothing loads no tracing code
                from core.ops.tracing import CallSpans

                dispatcher.audit_hooks.append(CallSpans())

    @staticmethod
    def _walkers(config: Config) -> Walkers | None:
        """The walk worker pool `[server] walk_workers` asks for (started on the first walk), or None."""
        count = workers_for(config.walk_workers)
        # the built-in handlers: what a worker imports by the same name (a tools folder's run in this process)
        return Walkers(config.store, count, HANDLERS, "core.tools:HANDLERS",
                       index_file(config.store, config.cache)) if count > 0 else None  # fmt: skip

    @property
    def walkers(self) -> Walkers | None:
        """The walk worker processes (core.dispatch.walkers), if walks run in them."""
        pool = None if self._snapshot is None else self._snapshot.dispatcher.walkers
        return pool if isinstance(pool, Walkers) else None  # the dispatcher knows it only as a `WalkPool`

    @property
    def snapshot(self) -> Snapshot:
        """The current model's snapshot. A call reads it once and finishes on it, whatever happens meanwhile."""
        if self._snapshot is None:
            raise RuntimeError("this instance was opened without an index")
        return self._snapshot

    @snapshot.setter
    def snapshot(self, snapshot: Snapshot) -> None:
        self._snapshot = snapshot  # the one assignment a model change makes

    @property
    def model(self) -> Model:
        return self._model if self._snapshot is None else self._snapshot.model

    @property
    def registry(self) -> Registry:
        return self.snapshot.registry

    @property
    def dispatcher(self) -> Dispatcher:
        """The current snapshot's dispatcher: the one dispatch path; every call it takes is audited."""
        return self.snapshot.dispatcher

    @property
    def audit(self) -> AuditLog:
        """The store's audit log (an instance with an index keeps one)."""
        if self._audit is None:
            raise RuntimeError("this instance was opened without an index")
        return self._audit

    def metrics(self) -> Metrics:
        """This process's metrics, made on first use (by the HTTP host, which serves them): calls counted from then
        on, and the store's revision, the index's lag behind it and the audit queue read at every scrape."""
        if self._metrics is None:
            from core.ops.metrics import Metrics

            metrics = Metrics()
            index, audit = self.index, self.audit
            assert index is not None
            metrics.gauge("canon_store_revision", "The store's latest revision.", self.store.revision)
            metrics.gauge("canon_index_revision", "The revision this process's graph index has caught up to.",
                          lambda: index.revision)  # fmt: skip
            metrics.gauge("canon_index_sync_lag_revisions", "Revisions committed (by any process) that this "
                          "process's index has not applied yet.",
                          lambda: max(0, self.store.revision() - index.revision))  # fmt: skip
            metrics.gauge("canon_audit_queue_depth", "Audit records queued for the writer thread.", audit.pending)
            walkers = self.walkers
            if walkers is not None:
                metrics.gauge("canon_walk_workers_ready", "Walk worker processes that have loaded their graph and "
                              "take walks (they start on the first walk).", lambda: walkers.ready_count)  # fmt: skip
            self.snapshot.dispatcher.audit_hooks.append(metrics.observe)
            self._metrics = metrics
        return self._metrics

    def reload_model(self) -> bool:
        """Adopt the model recorded in the store if another process changed it; True if it changed.

        The store validates writes under it, and the next snapshot (its registry and dispatcher) replaces the
        current one in one assignment, so every surface serves the new model from its next request on, while a
        call already running finishes on the snapshot it started with.
        """
        with self._reloading:  # one at a time: a later reload never lands before an earlier one
            stored = self.store.follow_model()
            if stored.digest == self.model.digest:
                return False
            old = self.model
            if self.index is not None and renames_types(self.model, stored):
                self.index.reload()  # the records moved to the new type names without a change each
            if self._snapshot is None:
                self._model = stored
            else:
                examples = Examples.of_store(stored, self.store)
                registry = build_registry(stored, (), examples, checks=self._checks, definitions=self.tools.definitions)
                self.snapshot = self._snapshot.evolve(registry)
            log.info("model %s %s -> %s %s: serving the model the store %s holds now", old.name, old.version,
                     stored.name, stored.version, self.store.location)  # fmt: skip
            return True

    def save_index(self, *, background: bool = False, lag: int = 1) -> None:
        """Save the graph index beside the store (`index_path`) if none was saved or it has moved `lag` revisions or
        more past the saved one, so the next start loads it (core.index.persisted); in a thread of its own if
        `background` (a save under way is waited for first). A save that fails is logged: the next start rebuilds
        the index, as it would without a file."""
        if self.index is None or self.index_path is None:
            return
        if self._saving is not None:
            self._saving.join()
        if self._saved is not None and self.index.revision - self._saved < lag:
            return
        if background:
            self._saving = threading.Thread(target=self._save, name="canon-index-save", daemon=True)
            self._saving.start()
        else:
            self._save()

    def _save(self) -> None:
        """Save the index, then move it onto the file saved (ADR 0061): the file's arrays, mapped, become its base,
        shared with the walk workers (which move onto it at their next walk), in place of this process's dicts or
        of the changes it kept over the previous file."""
        index, path = self.index, self.index_path
        assert index is not None
        assert path is not None
        try:
            saved = save_index(index, path)
        except Exception:  # a start without the file rebuilds the index: nothing is lost
            log.warning("could not save the graph index to %s; the next start rebuilds it", path, exc_info=True)
            return
        self._saved = saved.revision
        log.info("graph index saved to %s at revision %d", path, saved.revision)
        if not self._closing:
            remap_index(index, path)

    def _grown(self) -> None:
        """The changes kept over the mapped file passed their bound (`GraphIndex.on_grown`, called holding the
        index's writer lock): save a newer file in the background, unless a save is under way."""
        if self._saving is not None and self._saving.is_alive():
            return
        self._saving = threading.Thread(target=self._save, name="canon-index-save", daemon=True)
        self._saving.start()

    def close(self) -> None:
        """Stop the walk workers, flush the audit log, save the graph index if it moved well past its file (a stdio
        session that wrote a little does not rewrite a large file as it ends), close the store."""
        try:
            if self.walkers is not None:
                self.walkers.close()
            if self._audit is not None:
                self._audit.close()
            if self.index is not None:  # a few changes behind is cheap to replay at the next start; more, saved
                self._closing = True
                self.save_index(lag=max(CLOSE_SAVE_LAG, len(self.index) // 100))
        finally:
            self.store.close()


def open_instance(config: Config, *, with_index: bool = True, principal: str = "system",
                  tools: Toolset | None = None, checks: SchemaChecks | None = None) -> Instance:  # fmt: skip
    """Open the configured model and store (creating and seeding a new store), and build the index. `tools` adds
    tools to the built-in ones (`Toolset.from_folder`: docs/development/adding-a-tool.md). `checks`: the schema
    checks to run (default: those remembered in `config.cache`)."""
    checks = checks or SchemaChecks(config.cache)  # what passed its check at an earlier start is not checked again
    is_new = not store_exists(config.store)
    if config.model is None and not is_new:
        # no model configured: the embedded one makes new stores; an existing store serves the model it records
        # (a store made from an earlier canon's embedded model keeps it: only `apply_model` changes a store's model)
        store = open_existing_store(config.store)
    else:
        store = open_store(config.store, load_model(config.model, checks=checks), principal=principal)
    try:
        if is_new and config.model is None and config.seed:
            import_path(store, default_seed_path(), principal=SEED_PRINCIPAL)
        index = open_index(store, index_file(config.store, config.cache))[0] if with_index else None
    except BaseException:
        store.close()
        if is_new:  # a store that could not be seeded is not left behind
            backend_for(config.store).discard(config.store)
        raise
    # the store's model: the configured file's, or the one applied since if the file is an older model of the
    # store's history (`Store.superseded`); every process (`canon serve --workers`) opens through here
    instance = Instance(config, store.model, store, index, tools or Toolset(), checks=checks)
    if index is not None and index.loaded_at is None:  # built from the store: saved meanwhile, for the next start
        instance.save_index(background=True)
    return instance
