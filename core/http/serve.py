"""Running the HTTP app under uvicorn, bound to a socket canon opens itself (so port 0 reports its port).

With several workers, the parent opens one listening socket per worker, all on the same port with
SO_REUSEPORT, and starts worker processes (spawned, never forked: a SQLite connection must not cross a fork)
that each open the store, build their own index and serve their own socket; the kernel spreads new connections
over the sockets by a hash of their addresses. (One socket shared by every worker does not spread them: the
worker that wakes first accepts every pending connection, so kept-alive clients all landed on one worker:
measured, 4 connections, 1.77 s against 0.04 s of CPU in 2 s.) The parent keeps each socket, so a worker that
dies is started again on the same socket and the connections queued on it are served. Each worker follows the
change log, so a write through one is read through another from its next request on. 2026-07-28 requests are
stateless and go anywhere; a 2025-11-25 session lives in the worker that opened it, so such clients need to
keep their connection.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import multiprocessing
import signal
import socket
import sys
import time
from multiprocessing.connection import wait
from multiprocessing.process import BaseProcess
from typing import Any

import uvicorn
from starlette.applications import Starlette

from core.http.app import build_app, close_streams
from core.ops.config import Config
from core.ops.logs import configure_logging
from core.seam.instance import Instance, open_instance
from core.seam.surfaces import Surface, discover
from core.values.errors import CanonError

__all__ = ["GracefulServer", "listening_socket", "serve_http", "serve_workers", "served", "worker_sockets"]

log = logging.getLogger("canon.serve")
LATE_CONNECTIONS_TICK_S = 0.05  # how often a shutdown looks for connections that registered after it began


def listening_socket(host: str, port: int, *, reuse_port: bool = False) -> socket.socket:
    """A TCP socket bound to (host, port) and listening, set up so responses are never held back.

    IPPROTO_TCP, not the default 0: asyncio turns Nagle's algorithm off (TCP_NODELAY) only on accepted sockets
    whose protocol says TCP; with 0, every response on a kept-alive connection waited about 40 ms for the
    client's delayed ACK (measured: 48 ms against 2.4 ms per `get_node`). TCP_NODELAY on the listening socket
    is inherited by the sockets it accepts on Linux, whatever the server library does. With `reuse_port`, other
    sockets may listen on the same port (SO_REUSEPORT) and the kernel spreads new connections over them.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if reuse_port:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind((host.strip("[]"), port))
    sock.listen(2048)  # accept connections from the moment the address is announced
    return sock


def served(instance: Instance) -> str:
    """What the start-up line says is served: the model, the store (a PostgreSQL URL without its password) and the
    bearer tokens."""
    model, config = instance.model, instance.config
    return (f"the model {model.name} {model.version} from the store {instance.store.location}; "
            f"{len(instance.tokens.entries())} bearer token(s) in {config.tokens}")  # fmt: skip


def _announce(sock: socket.socket, config: Config, surfaces: list[Surface], what: str, workers: int = 1) -> None:
    """The two start-up lines on stderr: where MCP is and what it serves; where every other surface is. Both name
    paths as a caller on this address reaches them, `[server] root_path` first."""
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if sock.family == socket.AF_INET6 else host
    access = "callers without a token read public nodes" if config.anonymous else "every request needs a token"
    processes = f"; {workers} worker processes" if workers > 1 else ""
    prefix = config.root_path
    others = ", ".join(
        f"{s.name} ({' '.join(prefix + p.rstrip('/') for p in s.paths)})" for s in surfaces if "/mcp" not in s.paths
    )
    issuer = "" if config.oauth is None else f" and the access tokens of {config.oauth.issuer}"
    print(f"canon: serving MCP at http://{shown}:{port}{prefix}/mcp (health: {prefix}/healthz); {what}{issuer}; "
          f"{access}{processes}", file=sys.stderr, flush=True)  # fmt: skip
    if others:
        print(f"canon: also serving {others}", file=sys.stderr, flush=True)


class GracefulServer(uvicorn.Server):
    """uvicorn serving a `build_app` app, which ends the app's change streams as soon as it begins to shut down,
    and every connection, however late it registers.

    uvicorn waits for every response in flight to finish before it runs the app's shutdown, and a listen stream or
    a 2025-11-25 GET stream never finishes by itself: closing the streams first (`close_streams`: a listen stream
    gets its final result) lets shutdown go on.

    uvicorn tells the connections it knows of to finish, then waits until none is left. A connection accepted just
    before the listening socket closed registers a few loop turns later (asyncio calls `connection_made` from a
    task the accept starts), after that one telling: nobody tells it, and a client that keeps it busy (a poll on
    a kept-alive connection) held shutdown for good, answering as if nothing had happened (1 run in about 25 of
    `test_a_server_stopped_by_a_signal_writes_every_audit_record_it_queued`). So while uvicorn waits, every
    connection that registers late is told too.
    """

    def __init__(self, app: Starlette) -> None:
        # proxy_headers off: uvicorn believes X-Forwarded-* from 127.0.0.1 unless told otherwise; canon believes them
        # only from `[server] trusted_proxies` (core.http.forwarded)
        super().__init__(uvicorn.Config(app, log_level="warning", lifespan="on", proxy_headers=False))
        self.app = app

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        close_streams(self.app)
        told = set(self.server_state.connections)  # what uvicorn tells at once, before its first await
        late = asyncio.ensure_future(self._tell_late_connections(told))
        try:
            await super().shutdown(sockets)
        finally:
            late.cancel()

    async def _tell_late_connections(self, told: set[Any]) -> None:
        while True:
            for connection in list(self.server_state.connections):
                if connection not in told:
                    told.add(connection)
                    connection.shutdown()  # idle: closed now; mid-request: closed once its response is sent
            await asyncio.sleep(LATE_CONNECTIONS_TICK_S)


def _run(instance: Instance, surfaces: list[Surface], sock: socket.socket) -> None:
    app = build_app(instance, surfaces)
    # Everything built so far (model, registry, index, the SDK) lives as long as the process: freeze it out of
    # the cyclic garbage collector, whose full collections otherwise walk it too. With 1,000 listen streams open
    # a full collection took 130-230 ms, long enough to hold up a write's notifications past 100 ms.
    gc.collect()
    gc.freeze()
    # What clients open later still lives long: 1,000 2025-11-25 sessions are about 430,000 tracked objects (most of
    # them the SDK's), and a full collection walking them took 190-344 ms, three times in 30 writes (p99 259-309 ms
    # from commit to the last of 1,000 listeners). Full collections 100 times rarer: none in two such runs, p99
    # 68-76 ms; young collections stay as they were. The price: cyclic garbage that survived two collections waits
    # longer to be freed.
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, 1_000)
    GracefulServer(app).run(sockets=[sock])


def serve_http(instance: Instance, surfaces: list[Surface] | None = None) -> None:
    """Serve `instance` on `surfaces` (default: every installed one) in this process until it is interrupted."""
    surfaces = discover() if surfaces is None else surfaces
    sock = listening_socket(instance.config.host, instance.config.port)
    _announce(sock, instance.config, surfaces, served(instance))
    _run(instance, surfaces, sock)


def _worker(config: Config, surfaces: list[Surface], sock: socket.socket, log_level: int) -> None:
    configure_logging(log_level, config)

    def terminate(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)  # unwind: the audit log is flushed and the store closed

    signal.signal(signal.SIGTERM, terminate)
    instance = open_instance(config, principal="system:worker")
    try:
        _run(instance, surfaces, sock)
    finally:
        instance.close()


def worker_sockets(host: str, port: int, workers: int) -> list[socket.socket]:
    """`workers` listening sockets on one port (the first picks it when `port` is 0), one per worker process."""
    first = listening_socket(host, port, reuse_port=True)
    chosen = first.getsockname()[1]
    return [first, *(listening_socket(host, chosen, reuse_port=True) for _ in range(workers - 1))]


def serve_workers(config: Config, surfaces: list[Surface], workers: int, what: str, *,
                  restarts: int = 5, settle_s: float = 30.0) -> None:  # fmt: skip
    """Serve with `workers` processes, each on its own socket of one port, until interrupted; stop them all then.

    A worker that exits while the others serve is started again on its socket. One that exits within
    `settle_s` of starting, `restarts` times in a row, is not: then every worker is stopped and this raises, since
    a worker that cannot start (a broken store, say) will not start the next time either. `what`: what the
    start-up line says is served (`served`).
    """
    socks = worker_sockets(config.host, config.port, workers)
    context = multiprocessing.get_context("spawn")
    level = logging.getLogger().getEffectiveLevel()

    def start(i: int) -> BaseProcess:
        child = context.Process(target=_worker, args=(config, surfaces, socks[i], level), name=f"canon-worker-{i}",
                                daemon=False)  # fmt: skip
        child.start()
        return child

    children = [start(i) for i in range(workers)]
    started = [time.monotonic()] * workers
    failures = [0] * workers
    _announce(socks[0], config, surfaces, what, workers)
    try:
        while True:
            wait([c.sentinel for c in children])
            for i, child in enumerate(children):
                if child.is_alive():
                    continue
                quick = time.monotonic() - started[i] < settle_s
                failures[i] = failures[i] + 1 if quick else 1
                if failures[i] > restarts:
                    raise CanonError(f"worker {i} exited {failures[i]} times within {settle_s:.0f} s of starting "
                                       f"(last exit code {child.exitcode}); see the log above")  # fmt: skip
                log.warning("worker %d (pid %s) exited with code %s; starting it again", i, child.pid, child.exitcode)
                children[i], started[i] = start(i), time.monotonic()
    finally:
        for child in children:
            if child.is_alive():
                child.terminate()  # SIGTERM: each worker unwinds and flushes its audit log
        for child in children:
            child.join(timeout=30)
            if child.is_alive():
                child.kill()
        for sock in socks:
            sock.close()
