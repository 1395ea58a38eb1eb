"""The tools' handlers, and the toolsets that add more.

A handler is bound to its tool where it is written: `@handler("get_node")` (`core.dispatch.dispatcher`). The built-in
handlers are the bound functions of every module of this package, found by walking it, so a new handler module
needs no line here. A `Toolset` is more tools from outside canon's own folders: definitions in the
`schema/tools/` file format and their handlers, usually a tools folder (`Toolset.from_folder`) passed to
`core.seam.instance.open_instance`. How to add a tool: docs/development/adding-a-tool.md.
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

__all__ = ["HANDLERS", "Toolset"]

HANDLERS: Mapping[str, Handler] = handlers_in(
    vars(importlib.import_module(f"{__name__}.{module.name}")) for module in pkgutil.iter_modules(__path__)
)
"""The built-in handlers, by tool name."""


@dataclass(frozen=True)
class Toolset:
    """Tools beyond the built-in ones: their definitions (the `schema/tools/` format) and handlers by tool name."""

    definitions: tuple[Mapping[str, Any], ...] = ()
    handlers: Mapping[str, Handler] = field(default_factory=dict[str, Handler])

    @classmethod
    def from_folder(cls, folder: Path) -> Toolset:
        """The tools of a folder: every `*.json` file is a definition, every `*.py` file a module whose
        `@handler` functions answer them."""
        files = sorted(folder.iterdir())
        definitions = tuple(json.loads(f.read_text(encoding="utf-8")) for f in files if f.suffix == ".json")
        modules = [_load(f) for f in files if f.suffix == ".py"]
        return cls(definitions, handlers_in(vars(m) for m in modules))

    def all_handlers(self) -> dict[str, Handler]:
        """The built-in handlers and these; a tool name bound in both is an error."""
        clash = sorted(HANDLERS.keys() & self.handlers.keys())
        if clash:
            raise ValueError(f"tools already built in: {clash}")
        return {**HANDLERS, **self.handlers}


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
