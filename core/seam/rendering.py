"""Every surface's artifacts for a registry: what `canon generate` writes and what a model plan compares.

`artifacts_of(registry, hosts)` asks every installed surface (`core.seam.surfaces`) for its artifacts, each through
the host `hosts` gives it, and adds the registry's manifest (owned by `MCP`): file name -> exact text, by owner.

`render(registry)` does it for a registry alone: each surface's host dispatches through the registry over the empty
graph of its model (`core.store.empty`), in memory, so a surface that reads the graph while it generates (llms.txt
lists public nodes) finds none, as on a new store; no file, store or instance is opened. `render_model(model)`
builds the model's registry first and keeps the last `KEPT` models' artifacts, since a plan compares the store's
model with a new one, often twice (a dry run and then the apply). The artifacts are a function of the model's
document and the surfaces: the same bytes on every run.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections import OrderedDict
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import Any

from core.dispatch.dispatcher import Dispatcher
from core.dispatch.examples import Examples
from core.dispatch.registry import Registry, build_registry
from core.index.graph import GraphIndex
from core.lang.model import Model, parse_model
from core.lang.schema_checks import SchemaChecks
from core.ops.config import Config, cache_folder
from core.seam.snapshot import Snapshot
from core.seam.surfaces import Surface, SurfaceHost, discover, settings_of
from core.store.empty import EmptyStore
from core.tools import installed
from core.values.principal import ANONYMOUS, Principal
from core.values.records import Change, Sight

__all__ = ["KEPT", "MANIFEST", "MCP", "Artifacts", "artifacts_of", "no_changes", "render", "render_model"]

MANIFEST = "manifest.json"
MCP = "mcp"  # the owner of the manifest: the registry's tools and resources as MCP lists them
KEPT = 16  # models whose artifacts `render_model` keeps in this process (about 0.5 MB each for the embedded
# model): a dry run and its apply render two (the store's model at the new version, and the new one), and a
# process that plans several models in turn (an admin trying candidates, the test suite) renders each once

Artifacts = dict[str, dict[str, str]]  # owner (`MCP` or a surface's name) -> file name -> exact text


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False) + "\n"


def artifacts_of(registry: Registry, hosts: Callable[[Surface], SurfaceHost], surfaces: list[Surface] | None = None,
                 check_time: Callable[[], None] | None = None) -> Artifacts:  # fmt: skip
    """The manifest of `registry` and every surface's artifacts, each surface given the host `hosts` makes for it.
    `check_time` is called before each surface (a call's deadline: what it raises stops the rendering)."""
    owners: Artifacts = {MCP: {MANIFEST: _json(registry.manifest())}}
    made = {MANIFEST}
    for surface in discover() if surfaces is None else surfaces:
        if check_time is not None:
            check_time()
        files = dict(surface.artifacts(hosts(surface)))
        if clash := made & set(files):
            raise ValueError(f"surface {surface.name!r} generates {', '.join(clash)}, which another made")
        made |= set(files)
        owners.setdefault(surface.name, {}).update(files)  # MCP's surface adds to the manifest's owner
    return owners


@contextlib.asynccontextmanager
async def no_changes(
    sight: Sight | None, uri: str | None = None, *, max_buffer: int = 0
) -> AsyncGenerator[AsyncIterator[Change]]:
    """A change feed's `watch` that hears nothing: what a host gets that only renders artifacts."""

    async def nothing() -> AsyncIterator[Change]:
        return
        yield  # an async generator that ends at once

    yield nothing()


def _anonymous(request: object) -> Principal:
    return ANONYMOUS


def _no_token(token: str) -> Principal | None:
    return None


def render(registry: Registry, surfaces: list[Surface] | None = None,
           check_time: Callable[[], None] | None = None) -> Artifacts:  # fmt: skip
    """Every artifact of `registry` alone, over the empty graph of its model (see the module docstring)."""
    store = EmptyStore(registry.model)
    dispatcher = Dispatcher(registry, store, GraphIndex.build(store), installed().handlers)
    snapshot, settings = Snapshot(registry, dispatcher), settings_of(Config())

    def current() -> Snapshot:
        return snapshot

    def host(surface: Surface) -> SurfaceHost:
        return SurfaceHost(snapshot, settings, _anonymous, _no_token, no_changes, store.revision, surface.name,
                           current)  # fmt: skip

    return artifacts_of(registry, host, surfaces, check_time)


# (model document, ids of the surfaces or None: every installed one) -> (those surfaces, held so that no other
# object takes their ids while the entry is kept; the artifacts by owner)
_kept: OrderedDict[tuple[str, tuple[int, ...] | None], tuple[object, Artifacts]] = OrderedDict()
_kept_lock = threading.Lock()


def render_model(model: Model, surfaces: list[Surface] | None = None,
                 check_time: Callable[[], None] | None = None) -> Artifacts:  # fmt: skip
    """`render` of `model`'s registry (the installed tools, `core.tools.installed`; its schemas checked once,
    remembered between runs in the cache folder, `core.lang.schema_checks`), kept for the last `KEPT` models. Each
    caller gets its own copy."""
    key = (model.canonical_json, None if surfaces is None else tuple(id(s) for s in surfaces))
    with _kept_lock:
        kept = _kept.get(key)
        if kept is not None:
            _kept.move_to_end(key)
            return {owner: dict(files) for owner, files in kept[1].items()}
    # the registry's schema checks are most of the cost of a large model: each one is in time, or none runs
    checks = SchemaChecks(cache_folder(), check_time=check_time)
    # the document as the store records it (canonical JSON: sorted keys), so the store's model and a model file
    # with its properties in another order render the same
    canonical = parse_model(json.loads(model.canonical_json), source=model.source, checks=checks)
    registry = build_registry(
        canonical, (), Examples.of_model(canonical), checks=checks, definitions=installed().definitions
    )
    made = render(registry, surfaces, check_time)
    with _kept_lock:
        _kept[key] = (tuple(surfaces or ()), made)
        while len(_kept) > KEPT:
            _kept.popitem(last=False)
    return {owner: dict(files) for owner, files in made.items()}
