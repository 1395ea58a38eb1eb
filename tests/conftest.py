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
import io
import os
import shutil
import subprocess
import sys
import tempfile
import threading
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
# node id, so time it alone), run first, longest first: `scripts/test` deals whole files to its workers in collection
# order, each worker taking the next file when it is nearly done with its last, and a long file dealt last keeps
# one worker busy after the others are done (the hostile-input and access files, collected late or in the middle,
# were 74 s and 59 s of a quiet run).
SLOW_FIRST = (
    "tests/test_hostile_input.py",
    "tests/core/test_access.py",
    "tests/mcp/fastpath/test_plain_path.py",
    "tests/generators/rest/test_fuzz.py",
    "tests/test_cli_model.py",
    "tests/test_cli.py",
    "tests/core/test_model_diff_reality.py",
    "tests/mcp/test_access_wire.py",
    "tests/core/test_model_apply.py",
    "tests/mcp/test_http_process.py",
    "tests/mcp/fastpath/test_legacy_stream.py",
    "tests/http/test_auth.py",
)


def slow_first_errors(names: tuple[str, ...], root: Path) -> list[str]:
    """What is wrong with `names` as a `SLOW_FIRST` list: each name that is no test file under `root`, each named
    twice."""
    errors = [f"{name}: no such test file" for name in names if not (root / name).is_file()]
    return errors + [f"{name}: named {names.count(name)} times" for name in sorted(set(names)) if names.count(name) > 1]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The files of `SLOW_FIRST` first, in that order; every other file after them as collected (a stable sort:
    within a file, the order is unchanged). A name there that is no test file (moved, renamed) stops the run: it
    would silently deal that slow file in collection order again."""
    errors = slow_first_errors(SLOW_FIRST, REPO)
    if errors:
        raise pytest.UsageError("tests/conftest.py SLOW_FIRST: " + "; ".join(errors))
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
    """Where the test's store is: `store_path`, or a new database on the test PostgreSQL server. For a test that
    asks for `seeded_store` or `seeded_location`, a copy of the backend's seeded store (`_seeded`) is there already."""
    seeded = not {"seeded_store", "seeded_location"}.isdisjoint(request.fixturenames)
    if backend == "sqlite":
        if seeded:
            copy_store(Path(_seeded(backend, request)), store_path)
        yield store_path
        return
    server: Server = request.getfixturevalue("postgres_server")
    url = server.new_database(copy_of=str(_seeded(backend, request)) if seeded else None)
    yield url
    server.drop_database(url)


_SEEDED: dict[str, str | Path] = {}  # backend -> its seeded store, made once per test process


def _seeded(backend: str, request: pytest.FixtureRequest) -> str | Path:
    """A store on `backend` holding the embedded model's seed data imported as `seeded_store` documents it, made on
    first use and never opened by tests: they get copies (a file copy; PostgreSQL's CREATE DATABASE TEMPLATE)."""
    if backend not in _SEEDED:
        if backend == "sqlite":
            location: str | Path = request.getfixturevalue("tmp_path_factory").mktemp("seeded") / "canon.db"
        else:
            location = request.getfixturevalue("postgres_server").new_database()
        made = open_store(location, load_model())
        try:
            import_path(made, default_seed_path(), principal="test:seed")
        finally:
            made.close()
        _SEEDED[backend] = location
    return _SEEDED[backend]


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
def seeded_location(store_location: str | Path) -> str | Path:
    """`store_location` holding a copy of the seeded store `seeded_store` opens (for an instance to open: it seeds
    a new store itself, the slow way)."""
    return store_location


@pytest.fixture
def seeded_store(store: Store) -> Store:
    """A store holding the embedded model's seed data, imported by `test:seed` (`store_location` made it a copy of
    a store seeded once per test process)."""
    return store


def run_canon(
    *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 120, process: bool = False
) -> subprocess.CompletedProcess[str]:
    """Run the `canon` CLI as a user would, without inheriting canon settings, and return what a child process
    would: its exit status, standard output and standard error.

    By default it runs in this process (`core.app.cli.main` with the environment, folder and standard streams of
    its own, all restored after), which spares each command the interpreter's start and canon's imports (about a
    second each, most of the CLI tests' time). It runs in a child process when `process` is set, for `canon serve`
    (which installs signal handlers and logging), off the main thread (the environment and folder are the
    process's), and for every command under `CANON_TEST_CLI_PROCESS=1`. `timeout` bounds a child process only.
    `test_cli.py` holds the two ways to the same answers."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("CANON_")}
    if (process or _command(args) == "serve" or threading.current_thread() is not threading.main_thread()
            or os.environ.get("CANON_TEST_CLI_PROCESS") == "1"):  # fmt: skip
        return subprocess.run([sys.executable, "-m", "core.app.cli", *args], cwd=cwd, env={**clean, **(env or {})},
                              capture_output=True, text=True, timeout=timeout, check=False)  # fmt: skip
    return _run_in_process(list(args), cwd, {**clean, **(env or {})})


_VALUED = {"--config", "--store", "--model"}  # the CLI's global options that take a value


def _command(args: tuple[str, ...]) -> str | None:
    """The command `args` name (the first word that is neither a global option nor its value)."""
    words = iter(args)
    for word in words:
        if word in _VALUED:
            next(words, None)
        elif not word.startswith("-"):
            return word
    return None


def _run_in_process(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    from core.app.cli import main

    def stream() -> io.TextIOWrapper:  # a text stream over bytes, as a pipe is: it has a buffer and no terminal
        return io.TextIOWrapper(io.BytesIO(), encoding="utf-8", newline="", write_through=True)

    out, err = stream(), stream()
    saved_env, saved_cwd, saved_streams = dict(os.environ), os.getcwd(), (sys.stdin, sys.stdout, sys.stderr)
    threads = set(threading.enumerate())
    try:
        os.environ.clear()
        os.environ.update(env)
        os.chdir(cwd)
        sys.stdin, sys.stdout, sys.stderr = stream(), out, err
        try:
            status = main(args)
        except SystemExit as exc:  # argparse: --help, --version, a usage error
            status = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved_streams
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
    left = [t.name for t in set(threading.enumerate()) - threads if not t.daemon]
    assert not left, f"canon {' '.join(args)} returned and left threads running: {left}"
    text = [s.buffer.getvalue().decode("utf-8") for s in (out, err)]  # pyright: ignore[reportAttributeAccessIssue]
    return subprocess.CompletedProcess(["canon", *args], status, text[0], text[1])


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
