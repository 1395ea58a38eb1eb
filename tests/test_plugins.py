"""canon's extension points (`core.ops.plugins`): a distribution installed beside canon adds a store backend, tools
and an authenticator through its entry points, and canon uses them; what cannot be used is refused, naming it.

Each test installs a real distribution: a package and its `.dist-info` (METADATA, `entry_points.txt`) written into a
folder put on `sys.path`, which `importlib.metadata` reads as it reads canon's own.
"""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Iterator, Mapping
from pathlib import Path

import anyio
import pytest

from core.ops import plugins
from core.ops.config import Config
from core.ops.plugins import PluginError
from core.seam.instance import Instance, open_instance
from core.seam.surfaces import discover
from core.store import backend_for, open_existing_store, store_exists
from core.tools import installed
from core.values.errors import StoreError
from core.values.principal import ANONYMOUS
from tests.generators.conftest import asgi

SHOUT = {
    "execution": "worker",
    "name": "shout_words",
    "title": "Shout words",
    "description": "Say the given words back in capitals, and who asked: a tool from a distribution outside canon. "
    'Example: shout_words({"words": "hello"}) → {"shout": "HELLO", "caller": "anonymous"}.',
    "annotations": {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True, "openWorldHint": False},
    "permission": "read",
    "advanced": False,
    "surface": {"rest": {"method": "GET", "path": "/shout"}},
    "inputSchema": {"type": "object", "properties": {"words": {"type": "string", "minLength": 1}},
                    "required": ["words"], "additionalProperties": False},
    "outputSchema": {"type": "object", "properties": {"shout": {"type": "string"}, "caller": {"type": "string"}},
                     "required": ["shout", "caller"], "additionalProperties": False},
}  # fmt: skip

EXTRA = f'''
"""canon-extra: a store scheme, a tool and an authenticator for canon."""

import json
from pathlib import Path

from core.dispatch.dispatcher import handler, handlers_in
from core.store.sqlite import SQLiteStore
from core.tools import Toolset
from core.values.principal import Principal

OPENED = []  # every location this backend opened, to show canon came through it


def _path(location):
    return Path(str(location).removeprefix("extra://"))


class Backend:
    """extra://PATH: a SQLite file at PATH, opened through this distribution."""

    def open(self, location, model, *, principal):
        OPENED.append(str(location))
        return SQLiteStore.open(_path(location), model, principal=principal)

    def open_existing(self, location, *, read_only):
        OPENED.append(str(location))
        return SQLiteStore.open_existing(_path(location), read_only=read_only)

    def open_empty(self, location, model):
        OPENED.append(str(location))
        return SQLiteStore.open_empty(_path(location), model)

    def exists(self, location):
        return _path(location).exists()

    def discard(self, location):
        _path(location).unlink(missing_ok=True)


backend = Backend()


@handler("shout_words")
def shout_words(ctx, arguments):
    return {{"shout": arguments["words"].upper(), "caller": ctx.principal.name}}


toolset = Toolset((json.loads({json.dumps(json.dumps(SHOUT))}),), handlers_in([{{"shout_words": shout_words}}]))


class Passwords:
    """Bearer tokens `extra-NAME`: the reader NAME of this distribution's own sign-on."""

    async def verify(self, token):
        return Principal("extra:" + token[6:], frozenset({{"reader"}})) if token.startswith("extra-") else None


def authenticator(config, tokens):
    return Passwords()
'''


def install(site: Path, name: str, entry_points: Mapping[str, Mapping[str, str]],
            modules: Mapping[str, str] | None = None) -> None:  # fmt: skip
    """Write the distribution `name` (its modules and its dist-info) into the folder `site`."""
    site.mkdir(exist_ok=True)
    for module, source in (modules or {}).items():
        (site / f"{module}.py").write_text(textwrap.dedent(source), encoding="utf-8")
    info = site / f"{name.replace('-', '_')}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n", encoding="utf-8")
    groups = [
        f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in points.items()) for group, points in entry_points.items()
    ]
    (info / "entry_points.txt").write_text("\n".join(groups), encoding="utf-8")


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A folder on `sys.path` for the test's distributions; their modules are forgotten afterwards."""
    folder = tmp_path / "site"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    before = set(sys.modules)
    yield folder
    for name in set(sys.modules) - before:
        if name.startswith(("canon_extra", "canon_broken")):
            del sys.modules[name]


@pytest.fixture
def extra(site: Path) -> Path:
    install(site, "canon-extra", {
        "canon.stores": {"extra": "canon_extra:backend"},
        "canon.tools": {"extra": "canon_extra:toolset"},
        "canon.authenticators": {"extra": "canon_extra:authenticator"},
    }, {"canon_extra": EXTRA})  # fmt: skip
    return site


def test_canons_own_extension_points_are_entry_points_of_the_groups() -> None:
    assert set(plugins.GROUPS) == {"canon.surfaces", "canon.stores", "canon.tools", "canon.authenticators"}
    assert plugins.names(plugins.STORES) == ["file", "postgres", "postgresql"]
    assert plugins.names(plugins.TOOLS) == ["canon"]
    assert plugins.names(plugins.AUTHENTICATORS) == ["oauth", "tokens"]
    assert {s.name for s in discover()} >= {"mcp", "rest", "graphql", "llms", "pages"}
    assert type(backend_for("canon.db")).__name__ == "SQLiteBackend"
    assert type(backend_for("postgresql://canon@localhost/canon")).__name__ == "PostgresBackend"


def test_an_installed_distributions_store_scheme_tool_and_authenticator_are_used(extra: Path, tmp_path: Path) -> None:
    import canon_extra  # pyright: ignore[reportMissingImports]

    location = f"extra://{tmp_path / 'extra.db'}"
    instance: Instance = open_instance(Config(store=location, tokens=tmp_path / "tokens.json", walk_workers=0))
    try:
        assert [location] == canon_extra.OPENED  # the store came through the distribution's backend
        assert (tmp_path / "extra.db").is_file()
        assert "shout_words" in [t.name for t in instance.registry.tools]
        called = instance.dispatcher.call_tool(ANONYMOUS, "test", "shout_words", {"words": "hello"})
        assert (called.value, called.error) == ({"shout": "HELLO", "caller": "anonymous"}, None)

        async def over_rest() -> tuple[int, object, int]:
            with anyio.fail_after(60):
                async with asgi(instance) as http:
                    signed = await http.get("/api/shout", params={"words": "hi"},
                                            headers={"Authorization": "Bearer extra-alice"})  # fmt: skip
                    refused = await http.get("/api/shout", params={"words": "hi"},
                                             headers={"Authorization": "Bearer nobody-knows-me"})  # fmt: skip
            return signed.status_code, signed.json(), refused.status_code

        status, body, refused = anyio.run(over_rest)
        assert (status, body) == (200, {"shout": "HI", "caller": "extra:alice"})  # the distribution's sign-on
        assert refused == 401  # a token no authenticator knows: refused, never a silent downgrade to anonymous
    finally:
        instance.close()
    assert store_exists(location)
    reopened = open_existing_store(location, read_only=True)  # the module's other doors go through it too
    try:
        assert reopened.node("team-payments") is not None  # the sample data a new store is seeded with
    finally:
        reopened.close()
    assert [location, location] == canon_extra.OPENED


def test_an_entry_point_that_fails_to_load_is_refused_naming_the_group_the_entry_point_and_what_failed(
    site: Path, tmp_path: Path
) -> None:
    install(site, "canon-broken", {"canon.stores": {"broken": "canon_broken_missing:backend"}})

    with pytest.raises(PluginError) as refused:
        backend_for("broken://somewhere")
    message = str(refused.value)
    assert message.startswith("canon.stores: entry point broken = canon_broken_missing:backend")
    assert "distribution canon-broken 1.0" in message
    assert "ModuleNotFoundError: No module named 'canon_broken_missing'" in message
    assert type(backend_for(tmp_path / "canon.db")).__name__ == "SQLiteBackend"  # the others stay unloaded, usable


@pytest.mark.parametrize(
    ("group", "use", "what"),
    [
        ("canon.stores", lambda: backend_for("wrong://x"), "is not a core.store.Backend"),
        ("canon.tools", installed, "is not a core.tools.Toolset"),
        ("canon.surfaces", discover, "is not a canon surface"),
    ],
)
def test_an_entry_point_whose_value_its_group_cannot_take_is_refused(
    site: Path, group: str, use: object, what: str
) -> None:
    install(site, "canon-broken", {group: {"wrong": "canon_broken:VALUE"}}, {"canon_broken": "VALUE = 42\n"})

    with pytest.raises(PluginError) as refused:
        use()  # type: ignore[operator]
    assert (
        f"{group}: entry point wrong = canon_broken:VALUE (distribution canon-broken 1.0) {what}: it is int 42"
        == str(refused.value)
    )


def test_a_second_backend_for_a_scheme_is_refused_naming_both(site: Path, tmp_path: Path) -> None:
    install(site, "canon-broken", {"canon.stores": {"file": "canon_broken:backend"}}, {"canon_broken": "backend = 1\n"})

    with pytest.raises(PluginError) as refused:
        backend_for(tmp_path / "canon.db")
    message = str(refused.value)
    assert "canon.stores: two entry points are named 'file'" in message
    assert "file = core.store.sqlite:backend (distribution canon " in message
    assert "file = canon_broken:backend (distribution canon-broken 1.0)" in message


def test_a_tool_name_two_toolsets_define_is_refused_naming_both(site: Path) -> None:
    source = """
    from core.dispatch.dispatcher import handler, handlers_in
    from core.tools import Toolset

    @handler("get_node")
    def get_node(ctx, arguments):
        return {}

    toolset = Toolset((), handlers_in([{"get_node": get_node}]))
    """
    install(site, "canon-broken", {"canon.tools": {"again": "canon_broken:toolset"}}, {"canon_broken": source})

    with pytest.raises(PluginError) as refused:
        installed()
    message = str(refused.value)
    assert message.startswith(
        "the tool 'get_node' comes twice: from canon.tools entry point canon = core.tools:BUILT_IN"
    )
    assert "from canon.tools entry point again = canon_broken:toolset (distribution canon-broken 1.0)" in message


def test_a_location_whose_scheme_no_backend_serves_is_a_store_error_naming_the_installed_ones() -> None:
    with pytest.raises(StoreError) as refused:
        open_existing_store("redis://user:secret@cache/0")
    message = str(refused.value)
    assert "No store backend serves redis:// locations (redis://user:***@cache/0)" in message  # no password shown
    assert "installed (canon.stores entry points): file, postgres, postgresql." in message


@pytest.mark.parametrize(
    ("source", "what"),
    [
        ("def make(config, tokens):\n    raise RuntimeError('no directory server configured')\n",
         "failed to make its authenticator: RuntimeError: no directory server configured"),
        ("def make(config, tokens):\n    return 'yes'\n", "made str, not an Authenticator (no verify(token))"),
    ],
)  # fmt: skip
def test_an_authenticator_that_cannot_be_made_stops_start_up_naming_it(
    site: Path, tmp_path: Path, source: str, what: str
) -> None:
    install(
        site, "canon-broken", {"canon.authenticators": {"directory": "canon_broken:make"}}, {"canon_broken": source}
    )
    instance = open_instance(Config(store=tmp_path / "canon.db", tokens=tmp_path / "tokens.json", walk_workers=0))
    try:
        from core.http.app import build_app

        with pytest.raises(PluginError) as refused:
            build_app(instance)
        assert str(refused.value) == (
            f"canon.authenticators: entry point directory = canon_broken:make (distribution canon-broken 1.0) {what}"
        )
    finally:
        instance.close()


def test_every_group_is_documented_with_what_its_entry_points_give() -> None:
    page = (Path(__file__).resolve().parent.parent / "docs" / "development" / "plugins.md").read_text(encoding="utf-8")
    assert [group for group in plugins.GROUPS if f"| `{group}` |" not in page] == []
    assert [name for group in plugins.GROUPS for name in plugins.names(group) if f"`{name}`" not in page] == []
