"""A real HAProxy in front of canon replicas, for the tests: docs/operations/examples/haproxy.cfg, the very file the
replicas guide shows, run as it is with the addresses in its environment variables.

`balancing(replicas)` starts `haproxy -db` (in the foreground, a child of the test) on a free 127.0.0.1 port and
stops it when the block ends. HAProxy comes from Debian's package (scripts/test installs it when missing, as it
does PostgreSQL); without it this raises, so the tests that need it fail loudly and are never skipped.
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
    """HAProxy with CONFIG in front of three replicas (`host:port` each); stopped when the block ends."""
    if len(replicas) != len(NAMES):
        raise ValueError(f"the example configuration balances {len(NAMES)} replicas, not {len(replicas)}")
    port = _free_port()
    env = {**os.environ, "CANON_LB_BIND": f"127.0.0.1:{port}"}
    env |= {f"CANON_REPLICA_{name.upper()}": address for name, address in zip(NAMES, replicas, strict=True)}
    with tempfile.TemporaryDirectory(prefix="canon-haproxy-") as folder:
        log = Path(folder) / "haproxy.log"
        with log.open("wb") as out:
            popen = subprocess.Popen([_haproxy(), "-db", "-f", str(CONFIG)], env=env, cwd=folder,
                                     stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)  # fmt: skip
            try:
                _wait_listening(port, popen, log)
                yield Balancer(f"http://127.0.0.1:{port}", dict(zip(NAMES, replicas, strict=True)))
            finally:
                popen.terminate()
                try:
                    popen.wait(timeout=DEADLINE_S)
                except subprocess.TimeoutExpired:
                    popen.kill()
                    popen.wait(timeout=DEADLINE_S)
