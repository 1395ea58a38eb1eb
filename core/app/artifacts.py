"""Reference artifacts: what every surface generates for a model, written to disk and checked for drift.

`generate(model)` opens a throw-away store on the model (seeded with the sample data when it is the embedded
one), asks every installed surface for its artifacts (`core.seam.surfaces`), and adds the registry's manifest. The
result is a mapping of file name to exact text, the same bytes on every run for the same model and surfaces.
`canon generate` writes it to `docs/reference/`; `canon generate --check` compares it with what is there, so a
definition changed without regenerating fails CI with a diff.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import tempfile
import threading
from collections import OrderedDict
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any

from core.lang.model import Model
from core.lang.schema_checks import SchemaChecks
from core.ops.config import Config, cache_folder
from core.seam.instance import open_instance
from core.seam.surfaces import Surface, discover, host_for
from core.values.principal import ANONYMOUS, Principal
from core.values.records import Change, Sight

__all__ = ["MANIFEST", "MCP", "check", "generate", "generate_by_owner", "generate_for", "write"]

MANIFEST = "manifest.json"
MCP = "mcp"  # the owner of the manifest: the registry's tools and resources as MCP lists them


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False) + "\n"


@contextlib.asynccontextmanager
async def _no_changes(
    sight: Sight | None, uri: str | None = None, *, max_buffer: int = 0
) -> AsyncGenerator[AsyncIterator[Change]]:
    async def nothing() -> AsyncIterator[Change]:
        return
        yield  # an async generator that ends at once

    yield nothing()


def _anonymous(request: object) -> Principal:
    return ANONYMOUS


def generate(model: Path | None = None, surfaces: list[Surface] | None = None) -> dict[str, str]:
    """Every reference artifact for `model` (None: the embedded one), by file name, in a stable order."""
    files: dict[str, str] = {}
    for owned in generate_by_owner(model, surfaces).values():
        files.update(owned)
    return dict(sorted(files.items()))


def generate_by_owner(
    model: Path | None = None, surfaces: list[Surface] | None = None, check_time: Callable[[], None] | None = None
) -> dict[str, dict[str, str]]:
    """`generate`, grouped by who generated each file: `MCP` (the registry's manifest) and each surface's name.
    `check_time` is called before each surface (a call's deadline: what it raises stops the generation)."""
    with tempfile.TemporaryDirectory(prefix="canon-generate-") as folder:
        # cache: schemas that passed their check at an earlier run are not checked again (core.lang.schema_checks)
        config = Config(store=Path(folder) / "reference.db", model=model, tokens=Path(folder) / "tokens.json",
                        cache=cache_folder())  # fmt: skip
        # the registry's schema checks are most of the cost of a large model: each one is in time, or none runs
        checks = SchemaChecks(config.cache, check_time=check_time)
        instance = open_instance(config, principal="system:generate", checks=checks)
        try:
            owners: dict[str, dict[str, str]] = {MCP: {MANIFEST: _json(instance.registry.manifest())}}
            made = {MANIFEST}
            for surface in discover() if surfaces is None else surfaces:
                if check_time is not None:
                    check_time()
                host = host_for(instance, surface.name, principal_of=_anonymous, watch=_no_changes)
                files = dict(surface.artifacts(host))
                if clash := made & set(files):
                    raise ValueError(f"surface {surface.name!r} generates {', '.join(clash)}, which another made")
                made |= set(files)
                owners.setdefault(surface.name, {}).update(files)  # MCP's surface adds to the manifest's owner
        finally:
            instance.close()
    return owners


GENERATED_KEPT = 4  # models whose artifacts `generate_for` keeps in this process
# (model document, ids of the surfaces or None: every installed one) -> (those surfaces, held so that no other
# object takes their ids while the entry is kept; the artifacts by owner)
_generated: OrderedDict[tuple[str, tuple[int, ...] | None], tuple[object, dict[str, dict[str, str]]]] = OrderedDict()
_generated_lock = threading.Lock()


def generate_for(
    model: Model, surfaces: list[Surface] | None = None, check_time: Callable[[], None] | None = None
) -> dict[str, dict[str, str]]:
    """`generate_by_owner` for a model held in memory (a store's, or one being compared), never seeded with sample
    data.

    The artifacts are a function of the model's document and the surfaces (the same bytes on every run), and a
    plan compares the store's model with a new one: so the last `GENERATED_KEPT` models' artifacts are kept in
    the process (a dry run and then the apply, or `canon model diff` and `apply`, build each model's once).
    `check_time`: as for `generate_by_owner`."""
    key = (model.canonical_json, None if surfaces is None else tuple(id(s) for s in surfaces))
    with _generated_lock:
        kept = _generated.get(key)
        if kept is not None:
            _generated.move_to_end(key)
            return {owner: dict(files) for owner, files in kept[1].items()}
    with tempfile.TemporaryDirectory(prefix="canon-model-") as folder:
        path = Path(folder) / "model.schema.json"
        path.write_text(model.canonical_json, encoding="utf-8")
        made = generate_by_owner(path, surfaces, check_time)
    with _generated_lock:
        _generated[key] = (tuple(surfaces or ()), made)
        while len(_generated) > GENERATED_KEPT:
            _generated.popitem(last=False)
    return {owner: dict(files) for owner, files in made.items()}


def write(files: Mapping[str, str], folder: Path) -> list[Path]:
    """Write the artifacts into `folder` (created if missing); return the files that changed."""
    folder.mkdir(parents=True, exist_ok=True)
    changed: list[Path] = []
    for name, text in files.items():
        path = folder / name
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8", newline="\n")
            changed.append(path)
    return changed


def check(files: Mapping[str, str], folder: Path) -> list[str]:
    """A unified diff per artifact that differs from (or is missing in) `folder`; empty when all are current."""
    diffs: list[str] = []
    for name, text in files.items():
        path = folder / name
        current = path.read_text(encoding="utf-8") if path.is_file() else ""
        if current != text:
            label = str(path) if path.is_file() else f"{path} (missing)"
            diff = difflib.unified_diff(current.splitlines(keepends=True), text.splitlines(keepends=True),
                                        fromfile=label, tofile=f"{name} (generated)")  # fmt: skip
            diffs.append("".join(diff))
    return diffs
