"""Reference artifacts: what every surface generates for a model, written to disk and checked for drift.

`generate(model)` opens a throw-away store on the model, seeded with the sample data when it is the embedded one (the
reference llms.txt lists the sample's public nodes), asks every installed surface for its artifacts
(`core.seam.rendering.artifacts_of`), and adds the registry's manifest. The result is a mapping of file name to exact
text, the same bytes on every run for the same model and surfaces. `canon generate` writes it to `docs/reference/`;
`canon generate --check` compares it with what is there, so a definition changed without regenerating fails CI with
a diff. (A model plan compares artifacts of registries alone, over no data: `core.seam.rendering.render_model`.)
"""

from __future__ import annotations

import difflib
import tempfile
from collections.abc import Mapping
from pathlib import Path

from core.lang.schema_checks import SchemaChecks
from core.ops.config import Config, cache_folder
from core.seam.instance import open_instance
from core.seam.rendering import MANIFEST, MCP, Artifacts, artifacts_of, no_changes
from core.seam.surfaces import Surface, SurfaceHost, host_for
from core.values.principal import ANONYMOUS, Principal

__all__ = ["MANIFEST", "MCP", "check", "generate", "generate_by_owner", "write"]


def _anonymous(request: object) -> Principal:
    return ANONYMOUS


def generate(model: Path | None = None, surfaces: list[Surface] | None = None) -> dict[str, str]:
    """Every reference artifact for `model` (None: the embedded one), by file name, in a stable order."""
    files: dict[str, str] = {}
    for owned in generate_by_owner(model, surfaces).values():
        files.update(owned)
    return dict(sorted(files.items()))


def generate_by_owner(model: Path | None = None, surfaces: list[Surface] | None = None) -> Artifacts:
    """`generate`, grouped by who generated each file: `MCP` (the registry's manifest) and each surface's name."""
    with tempfile.TemporaryDirectory(prefix="canon-generate-") as folder:
        # cache: schemas that passed their check at an earlier run are not checked again (core.lang.schema_checks)
        config = Config(store=Path(folder) / "reference.db", model=model, tokens=Path(folder) / "tokens.json",
                        cache=cache_folder())  # fmt: skip
        instance = open_instance(config, principal="system:generate", checks=SchemaChecks(config.cache))
        try:

            def host(surface: Surface) -> SurfaceHost:
                return host_for(instance, surface.name, principal_of=_anonymous, watch=no_changes)

            return artifacts_of(instance.registry, host, surfaces)
        finally:
            instance.close()


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
