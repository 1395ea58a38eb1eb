"""Shared fixtures: the embedded model, real SQLite stores in a temporary directory, and seeded instances.

* `seed_template`: one seeded store per session; tests open copies of it (seeding takes about a second).
* `instance` (a store of the test's own), `shared_instance` (module scope, for tests that only read); `open_copy`
  for a store of a test's own made by hand.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.config import Config
from core.instance import Instance, open_instance
from core.interchange import import_path
from core.model import Model, default_seed_path, load_model
from core.store.sqlite import SQLiteStore

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


@pytest.fixture(scope="session")
def model() -> Model:
    return load_model()


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "canon.db"


@pytest.fixture
def store(store_path: Path, model: Model) -> Iterator[SQLiteStore]:
    """An empty store on the embedded model (not seeded)."""
    opened = SQLiteStore.open(store_path, model)
    yield opened
    opened.close()


@pytest.fixture
def seeded_store(store: SQLiteStore) -> SQLiteStore:
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


def open_copy(template: Path, folder: Path) -> Instance:
    folder.mkdir(parents=True, exist_ok=True)
    return open_instance(Config(store=copy_store(template, folder / "canon.db")))


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
