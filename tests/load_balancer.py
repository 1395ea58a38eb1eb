"""A real HAProxy in front of canon replicas, for the tests and benchmarks/replicas_bench.py:
docs/operations/examples/haproxy.cfg, the very file the replicas guide shows, with the addresses in its environment
variables.

`balancing(replicas)` writes that file to a temporary folder (for fewer than its three replicas, without the
`server` lines of the others; for three, unchanged), starts `haproxy -db` on it (in the foreground, a child of the
caller) on a free 127.0.0.1 port, and stops it when the block ends. HAProxy comes from Debian's package
(scripts/test installs it when missing, as it does PostgreSQL); without it this raises, so the tests that need it
fail loudly and are never skipped.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.clients._processes import stop

__all__ = ["CONFIG", "REPLICA_HEADER", "Balancer", "balancing"]

CONFIG = Path(__file__).resolve().parent.parent / "docs" / "operations" / "examples" / "haproxy.cfg"
REPLICA_HEADER = "X-Canon-Replica"  # the config names the replica that answered in it
NAMES = ("a", "b", "c")  # the config's servers, CANON_REPLICA_A..C
DEADLINE_S = 10.0


def _haproxy() -> str:
    found = shutil.which("haproxy") or next((p for p in ("/usr/sbin/haproxy",) if os.access(p, os.X_OK)), None)
    if found is None:
        raise RuntimeError(
            "The load-balancer tests need HAProxy: install it (Debian: apt-get install haproxy; scripts/test does "
            "when it runs as root)."
        )
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class Balancer:
    """A running HAProxy: `base` is its URL; `replica_of` maps the names it reports to the replicas' addresses."""

    base: str
    replica_of: dict[str, str]
    pid: int


def render(replicas: int) -> str:
    """CONFIG for the first `replicas` of its servers: the other `server` lines left out."""
    if not 1 <= replicas <= len(NAMES):
        raise ValueError(f"the example configuration balances 1 to {len(NAMES)} replicas, not {replicas}")
    dropped = tuple(f"server {name} " for name in NAMES[replicas:])
    lines = CONFIG.read_text(encoding="utf-8").splitlines(keepends=True)
    return "".join(line for line in lines if not line.strip().startswith(dropped))


def _wait_listening(port: int, popen: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while True:
        if popen.poll() is not None:
            raise RuntimeError(f"haproxy exited ({popen.returncode}): {log.read_text(errors='replace')}")
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        if time.monotonic() > deadline:
            raise RuntimeError(f"haproxy did not listen on {port} within {DEADLINE_S} s")
        with contextlib.suppress(subprocess.TimeoutExpired):
            popen.wait(timeout=0.02)  # a readiness poll: nothing to wait on until the port accepts


@contextlib.contextmanager
def balancing(replicas: Sequence[str]) -> Generator[Balancer]:
    """HAProxy with CONFIG in front of one to three replicas (`host:port` each); stopped when the block ends."""
    config = render(len(replicas))
    port = _free_port()
    named = dict(zip(NAMES, replicas, strict=False))
    env = {**os.environ, "CANON_LB_BIND": f"127.0.0.1:{port}"}
    env |= {f"CANON_REPLICA_{name.upper()}": address for name, address in named.items()}
    with tempfile.TemporaryDirectory(prefix="canon-haproxy-") as folder:
        (Path(folder) / "haproxy.cfg").write_text(config, encoding="utf-8")
        log = Path(folder) / "haproxy.log"
        with log.open("wb") as out:
            popen = subprocess.Popen([_haproxy(), "-db", "-f", "haproxy.cfg"], env=env, cwd=folder,
                                     stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                     start_new_session=True)  # a group of its own, as `stop` ends it  # fmt: skip
            try:
                _wait_listening(port, popen, log)
                yield Balancer(f"http://127.0.0.1:{port}", named, popen.pid)
            finally:
                stop(popen, DEADLINE_S)
