"""Shared fixtures: the embedded model, and real stores: a SQLite file in a temporary directory, or (in a module
marked `both_backends`, whose store tests then run on each backend) a new database on a PostgreSQL server the
session starts (`tests/postgres_server.py`)."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.interchange import import_path
from core.model import Model, default_seed_path, load_model
from core.registry import Permission, ToolDefinition, build_registry
from core.store import Store, open_store
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


@pytest.fixture(scope="session")
def model() -> Model:
    return load_model()


BACKENDS = ("sqlite", "postgresql")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """In a module marked `both_backends`, every test that uses a store runs on each backend."""
    if metafunc.definition.get_closest_marker("both_backends") and "backend" in metafunc.fixturenames:
        metafunc.parametrize("backend", BACKENDS, indirect=True)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[Server]:
    """One PostgreSQL server per test process (started on first use, stopped at the end)."""
    server = Server.start()
    yield server
    server.stop()


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> str:
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
        [sys.executable, "-m", "core.cli", *args],
        cwd=cwd,
        env={**clean, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
