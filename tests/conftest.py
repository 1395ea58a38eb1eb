"""Shared fixtures: the embedded model, real stores and seeded instances.

* stores: a SQLite file in a temporary directory, or (in a module marked `both_backends`, whose store tests then
  run on each backend) a new database on a PostgreSQL server the session starts (`tests/postgres_server.py`);
* `seed_template`: one seeded store per session; tests open copies of it (seeding takes about a second);
* `instance` (a store of the test's own), `shared_instance` (module scope, for tests that only read); `open_copy`
  for a store of a test's own made by hand.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.dispatch.registry import Permission, ToolDefinition, build_registry
from core.lang.model import Model, default_seed_path, load_model
from core.ops.config import Config, load_config
from core.seam.instance import Instance, open_instance
from core.store import Store, open_store
from core.store.interchange import import_path
from core.tools import Toolset
from tests.postgres_server import Server

REPO = Path(__file__).resolve().parent.parent
_HYPOTHESIS_HOME: list[Path] = []


def pytest_configure(config: pytest.Config) -> None:
    """Hypothesis (under the fuzz tests) keeps caches even without an example database: not in the work tree."""
    from hypothesis.configuration import set_hypothesis_home_dir

    _HYPOTHESIS_HOME.append(Path(tempfile.mkdtemp(prefix="canon-hypothesis-")))
    set_hypothesis_home_dir(_HYPOTHESIS_HOME[-1])


def pytest_unconfigure(config: pytest.Config) -> None:
    for home in _HYPOTHESIS_HOME:
        shutil.rmtree(home, ignore_errors=True)


@functools.cache
def _built_in_tools() -> tuple[ToolDefinition, ...]:
    return build_registry(load_model()).tools


def tool_names(*permissions: Permission, advanced: bool | None = None) -> list[str]:
    """The built-in tools' names in registry order (what tools/list shows), derived and never pinned: those of
    `permissions` (every tool when none is named), and only the advanced ones or only the others when `advanced`
    says so."""
    return [t.name for t in _built_in_tools()
            if (not permissions or t.permission in permissions) and advanced in (None, t.advanced)]  # fmt: skip


@contextlib.contextmanager
def walking_in_a_worker(store: str | Path) -> Iterator[Instance]:
    """An instance on `store` whose walks run in a walk worker process (core.dispatch.walkers), started before the
    block;
    when the block ends, the worker must have answered at least one walk (so the walks did not run in process)."""
    opened = open_instance(Config(store=store, walk_workers=1))
    try:
        assert opened.walkers is not None
        assert opened.walkers.ready(60), "the walk worker did not start"
        yield opened
        assert opened.walkers.answered > 0
    finally:
        opened.close()


@pytest.fixture(scope="session")
def model() -> Model:
    return load_model()


BACKENDS = ("sqlite", "postgresql")


# The files that take longest (`scripts/test --durations=0`, summed per file; the REST fuzz file's cases share one
# node id, so time it alone), run first: `scripts/test` deals whole files to its workers in collection order, and a
# long file dealt last keeps one worker busy after the others are done.
SLOW_FIRST = (
    "tests/mcp/fastpath/test_plain_path.py",
    "tests/generators/rest/test_fuzz.py",
    "tests/test_cli_model.py",
    "tests/test_cli.py",
    "tests/core/test_model_diff_reality.py",
    "tests/mcp/test_access_wire.py",
    "tests/core/test_model_apply.py",
    "tests/mcp/test_http_process.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The files of `SLOW_FIRST` first, in that order; every other file after them as collected (a stable sort:
    within a file, the order is unchanged)."""
    rank = {name: place for place, name in enumerate(SLOW_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(SLOW_FIRST)))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """In a module (or test) marked `both_backends`, every test that uses a store runs on each backend, but for
    one marked `sqlite_only` (with the reason: something only the SQLite store does)."""
    definition = metafunc.definition
    both = definition.get_closest_marker("both_backends") and not definition.get_closest_marker("sqlite_only")
    if both and "backend" in metafunc.fixturenames:
        metafunc.parametrize("backend", BACKENDS, indirect=True, scope="module")


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[Server]:
    """One PostgreSQL server per test process (started on first use, stopped at the end)."""
    server = Server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def backend(request: pytest.FixtureRequest) -> str:
    """The store backend of the test: "sqlite", or each in turn in a module marked `both_backends` (module by
    module, so a module's shared store is made once per backend)."""
    return str(getattr(request, "param", "sqlite"))


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "canon.db"


@pytest.fixture
def store_location(backend: str, store_path: Path, request: pytest.FixtureRequest) -> Iterator[str | Path]:
    """Where the test's store is: `store_path`, or a new database on the test PostgreSQL server."""
    if backend == "sqlite":
        yield store_path
        return
    server: Server = request.getfixturevalue("postgres_server")
    url = server.new_database()
    yield url
    server.drop_database(url)


@pytest.fixture(scope="module")
def module_store_location(
    backend: str, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[str | Path]:
    """As `store_location`, for a store a module's tests share."""
    if backend == "sqlite":
        yield tmp_path_factory.mktemp("store") / "canon.db"
        return
    server: Server = request.getfixturevalue("postgres_server")
    url = server.new_database()
    yield url
    server.drop_database(url)


@pytest.fixture
def store(store_location: str | Path, model: Model) -> Iterator[Store]:
    """An empty store on the embedded model (not seeded)."""
    opened = open_store(store_location, model)
    yield opened
    opened.close()


@pytest.fixture
def seeded_store(store: Store) -> Store:
    """A store holding the embedded model's seed data."""
    import_path(store, default_seed_path(), principal="test:seed")
    return store


def run_canon(
    *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run the `canon` CLI in a child process, as a user would, without inheriting canon settings."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("CANON_")}
    return subprocess.run(
        [sys.executable, "-m", "core.app.cli", *args],
        cwd=cwd,
        env={**clean, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def copy_store(source: Path, target: Path) -> Path:
    for suffix in ("", "-wal", "-shm"):
        part = Path(f"{source}{suffix}")
        if part.exists():
            shutil.copyfile(part, f"{target}{suffix}")
    return target


@pytest.fixture(scope="session")
def seed_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store file seeded with the embedded sample data, made once per session; never opened by tests."""
    path = tmp_path_factory.mktemp("seed") / "canon.db"
    open_instance(Config(store=path)).close()
    return path


FASTPATH_VAR = "CANON_MCP_FASTPATH"
FASTPATH = load_config(env={k: v for k, v in os.environ.items() if k == FASTPATH_VAR}).mcp_fastpath
"""Whether the instances and servers the tests start answer `/mcp` through canon's fast path (`core.mcp.fastpath`)."""


def open_copy(template: Path, folder: Path, tools: Toolset | None = None) -> Instance:
    """An instance on a copy of the seeded store in `folder`, with `tools` added to the built-in ones."""
    folder.mkdir(parents=True, exist_ok=True)
    return open_instance(Config(store=copy_store(template, folder / "canon.db"), mcp_fastpath=FASTPATH), tools=tools)


@pytest.fixture
def instance(seed_template: Path, tmp_path: Path) -> Iterator[Instance]:
    """A store of the test's own (tests write), with its index and dispatcher."""
    opened = open_copy(seed_template, tmp_path / "store")
    yield opened
    opened.close()


@pytest.fixture(scope="module")
def shared_instance(seed_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Instance]:
    """A seeded instance shared by the tests of one module; those tests must not write."""
    opened = open_copy(seed_template, tmp_path_factory.mktemp("shared"))
    yield opened
    opened.close()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
