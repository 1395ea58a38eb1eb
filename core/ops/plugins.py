"""canon's extension points: the entry-point groups an installed distribution adds to, read here and nowhere else.

| group | an entry point's name | its value | read by |
|---|---|---|---|
| `canon.surfaces` | the surface's name | a `core.seam.surfaces.Surface` | `core.seam.surfaces.discover` |
| `canon.stores` | a URL scheme (`file`: a path) | a `core.store.Backend` | `core.store.backend_for` |
| `canon.tools` | the toolset's name | a `core.tools.Toolset` | `core.tools.installed` |
| `canon.authenticators` | its name | `(Config, TokenFile) -> Authenticator or None` | `core.http.auth.authenticators` |

canon's own surfaces, backends, tools and authenticators are entry points of these groups too (`pyproject.toml`),
so a distribution outside the project is read exactly as they are: install it and it is there
(docs/development/plugins.md). An entry point that fails to load, or whose value is not what its group takes, is
an error naming the group, the entry point, its distribution and what failed; two entry points of one group with
the same name (two backends for one scheme, two toolsets of one name) are refused, naming both. Nothing is
skipped quietly: a plugin that is installed is used, or canon does not start.

`load` and `named` import only what they are asked for: `named("canon.stores", "postgresql", ...)` imports the
PostgreSQL backend only when a location names it.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import Any

__all__ = ["AUTHENTICATORS", "GROUPS", "STORES", "SURFACES", "TOOLS", "Plugin", "PluginError", "load", "named", "names"]

SURFACES = "canon.surfaces"
STORES = "canon.stores"
TOOLS = "canon.tools"
AUTHENTICATORS = "canon.authenticators"
GROUPS: dict[str, str] = {
    SURFACES: "a surface: its name -> a core.seam.surfaces.Surface",
    STORES: "a store backend: a URL scheme ('file' for a path) -> a core.store.Backend",
    TOOLS: "tools: a toolset's name -> a core.tools.Toolset",
    AUTHENTICATORS: "an authenticator: its name -> a factory (Config, TokenFile) -> Authenticator or None",
}
"""Every extension point, by entry-point group, with what an entry point of it names and gives."""


class PluginError(RuntimeError):
    """An entry point of one of canon's groups that cannot be used: what failed, and where it came from."""


@dataclass(frozen=True)
class Plugin:
    """One loaded entry point: its group, the entry point itself, and the object it names."""

    group: str
    point: EntryPoint
    obj: Any

    @property
    def name(self) -> str:
        return self.point.name

    @property
    def origin(self) -> str:
        """Where it comes from, for messages: `name = module:attribute (distribution NAME VERSION)`; its
        distribution's metadata is read only when a message needs it."""
        return _origin(self.point)


def _distribution(point: EntryPoint) -> str:
    dist = point.dist
    return "unknown distribution" if dist is None else f"distribution {dist.name} {dist.version}"


def _origin(point: EntryPoint) -> str:
    return f"{point.name} = {point.value} ({_distribution(point)})"


@functools.lru_cache(maxsize=4)
def _installed(path: tuple[str, ...]) -> dict[str, tuple[EntryPoint, ...]]:
    """Every entry point of canon's groups among the distributions on `path` (`sys.path`): one scan of them all
    (reading each distribution's `entry_points.txt` is most of a lookup's cost), kept while `sys.path` is the same."""
    every = entry_points()
    return {group: tuple(every.select(group=group)) for group in GROUPS}


def _points(group: str) -> list[EntryPoint]:
    if group not in GROUPS:
        raise PluginError(f"{group!r} is not one of canon's entry-point groups: {', '.join(GROUPS)}")
    found = sorted(_installed(tuple(sys.path))[group], key=lambda p: (p.name, p.value))
    seen: dict[str, EntryPoint] = {}
    for point in found:
        first = seen.setdefault(point.name, point)
        if first is not point:
            raise PluginError(f"{group}: two entry points are named {point.name!r}: {_origin(first)} and "
                              f"{_origin(point)}; uninstall one of them")  # fmt: skip
    return found


def names(group: str) -> list[str]:
    """The names of a group's entry points, sorted, none of them loaded."""
    return [p.name for p in _points(group)]


def _load(group: str, point: EntryPoint, accepts: Callable[[Any], bool], what: str) -> Plugin:
    try:
        obj = point.load()
    except Exception as exc:
        raise PluginError(f"{group}: entry point {_origin(point)} failed to load: "
                          f"{type(exc).__name__}: {exc}") from exc  # fmt: skip
    if not accepts(obj):
        raise PluginError(
            f"{group}: entry point {_origin(point)} is not {what}: it is {type(obj).__name__} {obj!r:.80}"
        )
    return Plugin(group, point, obj)


def load(group: str, accepts: Callable[[Any], bool], what: str, *, order: Iterable[str] = ()) -> list[Plugin]:
    """Every entry point of `group`, loaded and checked by `accepts` (`what` says what it takes, for the error).

    Those named in `order` come first, in that order; the others follow by name."""
    first = list(order)
    points = sorted(_points(group), key=lambda p: (first.index(p.name) if p.name in first else len(first), p.name))
    return [_load(group, point, accepts, what) for point in points]


def named(group: str, name: str, accepts: Callable[[Any], bool], what: str) -> Plugin | None:
    """The entry point of `group` called `name`, loaded and checked (None if there is none); the others stay
    unloaded."""
    point = next((p for p in _points(group) if p.name == name), None)
    return None if point is None else _load(group, point, accepts, what)
