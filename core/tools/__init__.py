"""The tools' handlers, and the toolsets that add more.

A handler is bound to its tool where it is written: `@handler("get_node")` (`core.dispatch.dispatcher`). The built-in
handlers are the bound functions of every module of this package, found by walking it, so a new handler module
needs no line here. A `Toolset` is tools as a unit: definitions in the `schema/tools/` file format and their
handlers. canon's own are one (`BUILT_IN`, the `canon` entry point of the `canon.tools` group); a distribution
outside canon adds its own with an entry point of that group (`installed` reads them all, `core.ops.plugins`); a
tools folder beside a deployment is one too (`Toolset.from_folder`, passed to `core.seam.instance.open_instance`).
How to add a tool: docs/development/adding-a-tool.md; a tool package: docs/development/plugins.md.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
import pkgutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from core.dispatch.dispatcher import Handler, handlers_in
from core.dispatch.registry import built_in_definitions
from core.ops import plugins

__all__ = ["BUILT_IN", "HANDLERS", "Toolset", "installed"]

HANDLERS: Mapping[str, Handler] = handlers_in(
    vars(importlib.import_module(f"{__name__}.{module.name}")) for module in pkgutil.iter_modules(__path__)
)
"""The built-in handlers, by tool name."""


@dataclass(frozen=True)
class Toolset:
    """Tools beyond the built-in ones: their definitions (the `schema/tools/` format) and handlers by tool name."""

    definitions: tuple[Mapping[str, Any], ...] = ()
    handlers: Mapping[str, Handler] = field(default_factory=dict[str, Handler])
    origin: str = "a toolset"
    """Where these tools come from, for messages: an entry point and its distribution, or a folder."""

    @classmethod
    def from_folder(cls, folder: Path) -> Toolset:
        """The tools of a folder: every `*.json` file is a definition, every `*.py` file a module whose
        `@handler` functions answer them."""
        files = sorted(folder.iterdir())
        definitions = tuple(json.loads(f.read_text(encoding="utf-8")) for f in files if f.suffix == ".json")
        modules = [_load(f) for f in files if f.suffix == ".py"]
        return cls(definitions, handlers_in(vars(m) for m in modules), f"the tools folder {folder}")

    def names(self) -> set[str]:
        """Every tool name these define or bind a handler to."""
        return {str(d.get("name")) for d in self.definitions} | set(self.handlers)

    def all_handlers(self) -> dict[str, Handler]:
        """The installed handlers (`installed`) and these; a tool name bound twice is an error naming both."""
        return dict(installed(self).handlers)


BUILT_IN = Toolset(tuple(built_in_definitions()), HANDLERS, "canon's own tools")
"""canon's own tools: what the `canon` entry point of `canon.tools` names."""


def installed(extra: Toolset | None = None) -> Toolset:
    """Every installed toolset (the `canon.tools` entry points, canon's own first) and `extra`, as one.

    A tool name that two of them define or bind is refused, naming both; an entry point whose value is not a
    `Toolset`, or that fails to load, is refused by `core.ops.plugins`, naming it."""
    loaded = plugins.load(plugins.TOOLS, lambda obj: isinstance(obj, Toolset), "a core.tools.Toolset", order=("canon",))
    toolsets: list[Toolset] = [p.obj for p in loaded]
    if extra is not None and (extra.definitions or extra.handlers):
        toolsets.append(extra)

    def origin(index: int) -> str:  # read only for a message: an entry point's distribution is read from its files
        return f"{plugins.TOOLS} entry point {loaded[index].origin}" if index < len(loaded) else toolsets[index].origin

    owner: dict[str, int] = {}
    for index, toolset in enumerate(toolsets):
        for name in sorted(toolset.names()):
            first = owner.setdefault(name, index)
            if first != index:
                raise plugins.PluginError(f"the tool {name!r} comes twice: from {origin(first)} and from "
                                          f"{origin(index)}; give one another name or uninstall it")  # fmt: skip
    definitions = tuple(d for t in toolsets for d in t.definitions)
    handlers = {name: h for t in toolsets for name, h in t.handlers.items()}
    return Toolset(definitions, handlers, "the installed tools")


def _load(file: Path) -> ModuleType:
    """Import a handler module from a file, under a name of its own (a tools folder is not a package)."""
    name = f"canon_tools_{hashlib.sha256(str(file.resolve()).encode()).hexdigest()[:12]}_{file.stem}"
    spec = importlib.util.spec_from_file_location(name, file)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load the handler module {file}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # what dataclasses and pickling look a module up by
    spec.loader.exec_module(module)
    return module
