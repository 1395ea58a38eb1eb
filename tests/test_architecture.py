"""The dependency rules of the layout (ADR 0024, ADR 0045), one test each, each shown able to fail.

The floors, the ground first: `core/values/` (the leaf vocabulary), `core/lang/` (the model and its language),
`core/ops/` (configuration, tokens, logs, metrics), `core/store/` (the store and its backends, the views),
`core/index/` (the graph index and search), `core/dispatch/` (registry, access, dispatcher, walk workers),
`core/tools/` (the handlers), `core/seam/` (the instance, its snapshot, the change feed, the Surface protocol, the
model planner),
`core/web/` (HTTP's vocabulary), then the host `core/http/` beside the surfaces `core/mcp/` and `generators/`, and
on top the application `core/app/` (CLI, `canon generate`).

1. Each framework lives in its rooms: the MCP SDK only in core/mcp; uvicorn and starlette's server pieces (the
   layers around every route, `starlette.middleware`, and the static files the host serves) only in core/http;
   FastAPI only in generators/rest; strawberry and graphql-core only in generators/graphql; jinja2 only in
   generators/llms and generators/pages; starlette's app, request and response pieces in any surface; no framework
   in the domain.
2. Core never imports generators (surfaces arrive through the `canon.surfaces` entry points).
3. The host imports no surface: core/http imports neither core/mcp nor generators.
4. No surface imports a host module: generators and core/mcp use HTTP's vocabulary through `core.web`'s public
   names (`core.web.__all__`) and the caller's principal through `core.seam.surfaces`; a generator never core/mcp.
5. No import runs upward: a module imports only from its own floor and the floors below (`LAYERS`); every
   module of core/ and generators/ stands on a floor (one beside the floors would escape the rule).
6. No surface imports another: a generator package imports its own modules and `generators.naming` only.
7. Authorisation is `core.dispatch.access`'s alone: no surface (generators, core/mcp, core/http) imports
   `core.dispatch.access` or the `Sight` type, or asks `sees`; a surface passes the caller's principal to the
   dispatcher.

The walker reads every import, inside functions too, resolves relative imports, and counts
`importlib.import_module("...")` with a literal name. `KNOWN` names what issue 15's redesign still has to move,
one entry per module and rule; an entry that is no longer needed fails too, so the change that fixes it deletes it.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import core.dispatch.access
import core.web

REPO = Path(__file__).resolve().parent.parent

ROOMS: dict[str, tuple[str, ...]] = {  # an imported module (and its submodules) -> the only rooms that may import it
    "mcp": ("core/mcp/",),
    "mcp_types": ("core/mcp/",),
    "uvicorn": ("core/http/",),
    "starlette.middleware": ("core/http/",),
    "starlette.staticfiles": ("core/http/",),
    "starlette": ("core/web/", "core/http/", "core/mcp/", "generators/"),
    "fastapi": ("generators/rest/",),
    "strawberry": ("generators/graphql/",),
    "graphql": ("generators/graphql/",),
    "cross_web": ("generators/graphql/",),
    "jinja2": ("generators/llms/", "generators/pages/"),
    "httpx": (),
    "httpx2": (),
}
"""Most specific first: a module is judged by the first entry it falls under."""

SURFACES = ("generators/", "core/mcp/", "core/http/")
ACCESS = {"Sight", "sees", *core.dispatch.access.__all__}  # the names of deciding who sees what

KNOWN: dict[tuple[str, str], str] = {
    ("generators/graphql/schema.py", "access"): "GraphQL subscriptions shape each change event for its caller with "
    "core.dispatch.access's own `change_for` (the feed already filtered the events with `sees_change`): it calls "
    "the one rule, it does not restate it. Delivering shaped entries from the feed would remove this entry",
}
"""(module, what it may still import or use) -> why, and which change removes it."""


# -- the walker --------------------------------------------------------------------------------------------------------
def _package(relative: str) -> list[str]:
    """The package a module's relative imports start from (a package's `__init__` is in the package itself)."""
    return relative.removesuffix(".py").split("/")[:-1]


def _targets(relative: str, source: str) -> set[str]:
    """Every module or name a module imports, dotted (`from a.b import c` is `a.b.c`), wherever the import sits."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source, filename=relative)):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            package = _package(relative)
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            found |= {f"{module}.{alias.name}" for alias in node.names}
        elif (isinstance(node, ast.Call) and _called(node.func) in ("import_module", "__import__") and node.args
              and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):  # fmt: skip
            found.add(node.args[0].value)
    return found


def _called(func: ast.expr) -> str:
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _names(source: str) -> set[str]:
    """Every name and attribute a module uses."""
    tree = ast.parse(source)
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | {
        n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)
    }


def _under(target: str, module: str) -> bool:
    return target == module or target.startswith(module + ".")


# -- the rules: (module path, what it imports, the names it uses) -> (what breaks a rule, why) -------------------------
Rule = Callable[[str, set[str], set[str]], Iterator[tuple[str, str]]]


def frameworks_stay_in_their_rooms(module: str, targets: set[str], names: set[str]) -> Iterator[tuple[str, str]]:
    for target in sorted(targets):
        framework = next((f for f in ROOMS if _under(target, f)), None)
        if framework is not None and not module.startswith(ROOMS[framework]):
            yield framework, f"imports {target}; only {list(ROOMS[framework]) or 'no module'} may"


def core_never_imports_generators(module: str, targets: set[str], names: set[str]) -> Iterator[tuple[str, str]]:
    if module.startswith("core/"):
        yield from (("generators", f"imports {t}") for t in sorted(targets) if _under(t, "generators"))


def the_host_imports_no_surface(module: str, targets: set[str], names: set[str]) -> Iterator[tuple[str, str]]:
    if module.startswith("core/http/"):
        for target in sorted(targets):
            surface = next((s for s in ("core.mcp", "generators") if _under(target, s)), None)
            if surface is not None:
                yield surface, f"imports {target}; the host knows surfaces only through core.seam.surfaces"


def surfaces_use_no_host_module(module: str, targets: set[str], names: set[str]) -> Iterator[tuple[str, str]]:
    if not module.startswith(("generators/", "core/mcp/")):
        return
    for target in sorted(targets):
        if _under(target, "core.http"):
            yield "core.http", f"imports {target}; a surface uses HTTP's vocabulary from core.web, never the host"
        elif module.startswith("generators/") and _under(target, "core.mcp"):
            yield "core.mcp", f"imports {target}; a generator never uses the MCP surface"
        elif _under(target, "core.web") and target != "core.web" and target.split(".")[2] not in core.web.__all__:
            yield "core.web", f"imports {target}; a surface may use only core.web's {core.web.__all__}"


LAYERS: tuple[tuple[str, ...], ...] = (
    ("core/__init__.py",),
    ("core/values/",),
    ("core/lang/",),
    ("core/ops/",),
    ("core/store/",),
    ("core/index/",),
    ("core/dispatch/",),
    ("core/tools/",),
    ("core/seam/",),
    ("core/web/",),
    ("core/http/", "core/mcp/", "generators/"),
    ("core/app/",),
)
"""The floors of the house, the ground first: a module imports only from its own floor and the floors below."""


def _floor(path: str) -> int | None:
    return next((i for i, rooms in enumerate(LAYERS) if path.startswith(rooms)), None)


def _path_of(target: str) -> str | None:
    """The file or package folder a dotted import names, or None when it is not canon's."""
    parts = target.split(".")
    for end in range(len(parts), 0, -1):
        base = REPO.joinpath(*parts[:end])
        if base.with_suffix(".py").is_file():
            return str(base.with_suffix(".py").relative_to(REPO))
        if (base / "__init__.py").is_file():
            return str((base / "__init__.py").relative_to(REPO)) if end == 1 else f"{base.relative_to(REPO)}/"
    return None


def no_import_runs_up(module: str, targets: set[str], names: set[str]) -> Iterator[tuple[str, str]]:
    floor = _floor(module)
    if floor is None:
        return
    for target in sorted(targets):
        path = _path_of(target) if _under(target, "core") or _under(target, "generators") else None
        up = _floor(path) if path is not None else None
        if up is not None and up > floor:
            yield f"up:{path}", f"imports {target} (floor {up}) from floor {floor}: no import runs upward"


def no_surface_imports_another(module: str, targets: set[str], names: set[str]) -> Iterator[tuple[str, str]]:
    if not module.startswith("generators/"):
        return
    parts = module.split("/")
    own = f"generators.{parts[1]}" if len(parts) > 2 else None
    for target in sorted(targets):
        shared = _under(target, "generators.naming") or (own is not None and _under(target, own))
        if _under(target, "generators") and not shared:
            yield "generators", f"imports {target}; surfaces share only generators.naming"


def only_core_access_decides_who_sees_what(module: str, targets: set[str],
                                           names: set[str]) -> Iterator[tuple[str, str]]:  # fmt: skip
    if not module.startswith(SURFACES):
        return
    imported = sorted(t for t in targets if _under(t, "core.dispatch.access") or t == "core.values.records.Sight")
    used = sorted(names & ACCESS)
    if imported or used:
        yield (
            "access",
            f"imports {imported} and uses {used}: who sees what is core.dispatch.access's rule (via dispatch)",
        )


RULES: list[Rule] = [
    frameworks_stay_in_their_rooms,
    core_never_imports_generators,
    the_host_imports_no_surface,
    surfaces_use_no_host_module,
    no_import_runs_up,
    no_surface_imports_another,
    only_core_access_decides_who_sees_what,
]


def _breaks(rule: Rule, module: str, source: str) -> dict[tuple[str, str], str]:
    return {(module, key): why for key, why in rule(module, _targets(module, source), _names(source))}


MODULES = sorted(str(p.relative_to(REPO)) for package in ("core", "generators") for p in (REPO / package).rglob("*.py"))
SOURCES = {module: (REPO / module).read_text(encoding="utf-8") for module in MODULES}
FACTS = {module: (_targets(module, SOURCES[module]), _names(SOURCES[module])) for module in MODULES}


def _all_breaks(rule: Rule) -> dict[tuple[str, str], str]:
    return {(module, key): why for module in MODULES for key, why in rule(module, *FACTS[module])}


# -- the rules hold ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.__name__)
def test_every_module_keeps_the_rule(rule: Rule) -> None:
    broken = {key: why for key, why in _all_breaks(rule).items() if key not in KNOWN}
    assert not broken, "\n".join(f"{module}: {why}" for (module, _), why in broken.items())


def test_every_known_exception_is_still_needed() -> None:
    found = {key for rule in RULES for key in _all_breaks(rule)}
    stale = sorted(set(KNOWN) - found)
    assert not stale, f"no longer needed: delete {stale} from KNOWN"


def off_the_floors(modules: list[str]) -> list[str]:
    """The modules `LAYERS` places on no floor: the upward-import rule could not see what they import or who
    imports them."""
    return [m for m in modules if _floor(m) is None]


def test_every_module_stands_on_a_floor() -> None:
    assert not off_the_floors(MODULES), "place each on a floor of LAYERS (a package of its layer)"


def test_a_module_beside_the_floors_is_caught() -> None:
    assert off_the_floors(["core/dispatch/pinning.py", "core/pinning.py", "generators/pages/app.py",
                           "core/proposals.py"]) == ["core/pinning.py", "core/proposals.py"]  # fmt: skip


def test_the_mcp_sdk_is_imported_somewhere_and_only_in_core_mcp_but_for_the_known_exceptions() -> None:
    importers = {m for m in MODULES if any(_under(t, "mcp") or _under(t, "mcp_types") for t in FACTS[m][0])}
    assert importers, "the MCP surface should import the SDK somewhere"
    assert {m for m in importers if not m.startswith("core/mcp/")} <= {m for m, _ in KNOWN}


# -- each rule can fail ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("rule", "module", "source"),
    [
        (frameworks_stay_in_their_rooms, "core/index/graph.py", "import starlette\n"),
        (frameworks_stay_in_their_rooms, "generators/rest/app.py", "import mcp_types\n"),
        (frameworks_stay_in_their_rooms, "core/mcp/server.py", "from uvicorn import Config\n"),
        (frameworks_stay_in_their_rooms, "generators/graphql/app.py", "from starlette.middleware import Middleware\n"),
        (frameworks_stay_in_their_rooms, "generators/llms/app.py", "from fastapi import FastAPI\n"),
        (frameworks_stay_in_their_rooms, "generators/rest/app.py", "import strawberry\n"),
        (frameworks_stay_in_their_rooms, "generators/rest/openapi.py", "from graphql import parse\n"),
        (frameworks_stay_in_their_rooms, "generators/graphql/types.py", "from jinja2 import Environment\n"),
        (core_never_imports_generators, "core/app/cli.py", "def f():\n    from generators.rest import app\n"),
        (the_host_imports_no_surface, "core/http/app.py", "from core.mcp.server import build_server\n"),
        (the_host_imports_no_surface, "core/http/app.py", "import generators.rest.app\n"),
        (
            surfaces_use_no_host_module,
            "generators/rest/app.py",
            "from core.web.problems import STATUS\n",
        ),
        (
            surfaces_use_no_host_module,
            "generators/llms/app.py",
            "from core.http import admission\n",
        ),
        (
            surfaces_use_no_host_module,
            "generators/graphql/app.py",
            "from core.mcp.events import EventFanout\n",
        ),
        (surfaces_use_no_host_module, "core/mcp/surface.py", "from core.http.auth import BearerGate\n"),
        (no_import_runs_up, "core/lang/model.py", "from core.store import Store\n"),
        (no_import_runs_up, "core/store/sql.py", "def f():\n    from core.dispatch.access import sees\n"),
        (no_import_runs_up, "core/values/records.py", "import core.lang.model\n"),
        (no_import_runs_up, "core/http/app.py", "from core.app.cli import main\n"),
        (no_surface_imports_another, "generators/llms/pages.py", "from generators.rest.openapi import route_of\n"),
        (no_surface_imports_another, "generators/naming.py", "from generators.graphql import types\n"),
        (only_core_access_decides_who_sees_what, "generators/rest/app.py", "from core.dispatch.access import sees\n"),
        (only_core_access_decides_who_sees_what, "core/mcp/server.py", "from core.values.records import Sight\n"),
        (only_core_access_decides_who_sees_what, "generators/llms/pages.py", "ok = sight.sees(node)\n"),
    ],
    ids=lambda value: getattr(value, "__name__", None) or (value if value.endswith(".py") else ""),
)
def test_a_module_that_breaks_the_rule_is_caught(rule: Rule, module: str, source: str) -> None:
    assert _breaks(rule, module, source)


@pytest.mark.parametrize(
    ("rule", "module", "source"),
    [
        (frameworks_stay_in_their_rooms, "generators/rest/app.py", "from starlette.responses import Response\n"),
        (frameworks_stay_in_their_rooms, "core/http/app.py", "from starlette.middleware import Middleware\n"),
        (
            surfaces_use_no_host_module,
            "generators/llms/app.py",
            "from core.web import send_problem\n",
        ),
        (no_surface_imports_another, "generators/llms/pages.py", "from generators.llms.markdown import label\n"),
        (no_surface_imports_another, "generators/graphql/schema.py", "from generators.naming import API\n"),
        (no_import_runs_up, "core/store/sql.py", "from core.lang.model import Model\n"),
        (no_import_runs_up, "core/mcp/server.py", "from core.seam.surfaces import principal_of_scope\n"),
        (no_import_runs_up, "core/app/cli.py", "from core.http.serve import serve\n"),
    ],
)
def test_a_module_that_keeps_the_rule_passes(rule: Rule, module: str, source: str) -> None:
    assert not _breaks(rule, module, source)


def test_the_walker_sees_imports() -> None:
    """Guard against a walker that finds nothing and so lets everything pass."""
    found = FACTS["core/store/sqlite.py"][0]
    assert {"json", "sqlite3"} <= found
    assert any(_under(t, "core") for t in found)


def test_the_walker_sees_imports_inside_functions_relative_ones_and_import_module() -> None:
    source = (
        "import importlib\n"
        "def later():\n    import uvicorn\n    from . import problems\n    from ..store import sqlite\n"
        "class Lazy:\n    def load(self):\n        return importlib.import_module('mcp_types')\n"
    )
    assert {"uvicorn", "core.http.problems", "core.store.sqlite", "mcp_types"} <= _targets("core/http/app.py", source)
    assert "core.http.conditional.none_match" in _targets(
        "core/http/__init__.py", "from .conditional import none_match\n"
    )


# -- handlers read through one door (issue 27 item 1) ------------------------------------------------------------------
DOOR = ("store", "index")  # what a handler may not reach for: `CallContext.view` and `CallContext.commit` are its door


def handlers_read_through_the_view(module: str, source: str) -> Iterator[tuple[str, str]]:
    """A handler module (core/tools/) reads the graph through `ctx.view` and writes through `ctx.commit`: never
    `ctx.store` or `ctx.index` (`run.ctx.store` too), whatever the context object offers."""
    if not module.startswith("core/tools/"):
        return
    for node in ast.walk(ast.parse(source, filename=module)):
        if isinstance(node, ast.Attribute) and node.attr in DOOR and _is_ctx(node.value):
            yield f"ctx.{node.attr}", f"line {node.lineno} reads ctx.{node.attr}: a handler reads through ctx.view"


def _is_ctx(value: ast.expr) -> bool:
    return (isinstance(value, ast.Name) and value.id == "ctx") or (
        isinstance(value, ast.Attribute) and value.attr == "ctx"
    )


def test_every_handler_module_reads_through_the_view() -> None:
    handlers = [m for m in MODULES if m.startswith("core/tools/")]
    assert len(handlers) > 5  # the walk found the handler modules
    broken = {(m, key): why for m in handlers for key, why in handlers_read_through_the_view(m, SOURCES[m])}
    assert not broken, "\n".join(f"{module}: {why}" for (module, _), why in broken.items())


@pytest.mark.parametrize(
    "source",
    [
        "def h(ctx, args):\n    return ctx.store.node(args['id'])\n",
        "def h(ctx, args):\n    with ctx.index.reading() as v:\n        return v\n",
        "class R:\n    def ok(self):\n        return self.ctx.store.edge('a', 'b', 'c')\n",
    ],
)
def test_a_handler_that_reaches_around_the_view_is_caught(source: str) -> None:
    assert list(handlers_read_through_the_view("core/tools/nodes.py", source))


@pytest.mark.parametrize(
    ("module", "source"),
    [
        ("core/tools/nodes.py", "def h(ctx, args):\n    return ctx.view.node(args['id'])\n"),
        ("core/tools/writes.py", "def h(ctx, ops):\n    return ctx.commit(ops)\n"),
        ("core/dispatch/dispatcher.py", "def context(self):\n    return self.store, self.index\n"),
    ],
)
def test_a_handler_that_reads_through_the_view_passes(module: str, source: str) -> None:
    assert not list(handlers_read_through_the_view(module, source))
