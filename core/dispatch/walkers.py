"""Graph walks off the serving interpreter: a small pool of walk worker processes (ADR 0039).

Walks (`"execution": "walk"`: `get_neighbors`, `find_paths`, `query_graph`) are pure Python; run in the serving
process they hold its interpreter while the event loop waits to answer cheap reads. A `Walkers` pool runs them in
processes of their own instead, each with its own read-only store connection and its own `GraphIndex` (loaded from
the file the serving process saved beside the store when it is sound, `core.index.persisted`; built otherwise), one
walk at a time per process. The serving process still authorises, validates, audits and shapes every call
(`core.dispatch.dispatcher`); it sends a worker only the handler's part as a `WalkRequest` and waits for the answer on a
pipe, off its interpreter.

* Read-your-writes: a request carries the revision the serving process's index has reached; the worker syncs its
  own index to the store's latest revision (at least that one) before it walks.
* Visibility: the worker walks with the caller's sight (`core.dispatch.access.sight_of` of the request's principal).
* Time: the worker bounds the walk by the call's deadline itself (the handlers' `check_time`); a worker that has
  not answered one second past it is killed and replaced, and the call answers `limit_exceeded` (`time_s`).
* A worker that dies mid-walk is replaced, and the call answers `unavailable` (`UnavailableError`), never hangs.
* Until a worker has started (it loads the graph first), when a worker died idle, or when the serving process runs
  another model than the store's recorded one (in the middle of a model change), the walk runs in the serving
  process as before (`core.values.priority`'s turns).

Workers start on the first walk, not with the instance, so a process that never walks starts none. A worker runs
`python -m core.dispatch.walkers`; its pipe is inherited, and it ends when the pipe closes (the serving process closing
the pool, or dying), not on Ctrl-C. Its stdout goes nowhere (on stdio the server's stdout is the MCP channel).
"""

from __future__ import annotations

import gc
import logging
import os
import queue
import sys
import threading
import time
from collections.abc import Mapping
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from core.values.errors import CanonError, UnavailableError
from core.values.principal import Principal

if TYPE_CHECKING:  # the process machinery is imported with the first worker: a process that never walks needs none
    import subprocess
    from multiprocessing.connection import Connection

    from core.dispatch.dispatcher import CallContext, Handler
    from core.index.graph import GraphIndex
    from core.store import Store

__all__ = ["Hold", "WalkRequest", "Walkers", "workers_for"]

log = logging.getLogger("canon.walkers")
NICENESS = 10  # a worker's scheduling priority below the serving process's: cheap reads get a core first
GRACE_S = 1.0  # how long past a call's deadline a worker may take to answer before it is killed
BOOT_TIMEOUT_S = 600.0  # loading the graph: 1,000,000 nodes take about 25 s (core.index.graph)


def workers_for(setting: int | None) -> int:
    """How many walk workers `[server] walk_workers` asks for: None is one per core but one (at least one), so a
    core stays with the serving process, on POSIX systems (none elsewhere); 0 is none (walks run in the serving
    process)."""
    if setting is not None:
        return setting
    if os.name != "posix":  # a worker inherits its pipe by file descriptor and lowers its priority: POSIX only
        return 0
    return max(1, (os.cpu_count() or 1) - 1)


@dataclass(frozen=True)
class WalkRequest:
    """What a worker needs to run one walk: the tool, who calls (their sight), the full arguments, the call's
    deadline, the revision the walk must see at least, and the model the serving process runs it under.

    The deadline is the serving process's `time.monotonic()` value itself: on POSIX (where workers run) that is
    `CLOCK_MONOTONIC`, one clock for every process on the machine, so the worker stops at the call's deadline and
    not at a later one shifted by the time the request took to reach it."""

    tool: str
    principal: Principal
    surface: str
    arguments: Mapping[str, Any]
    deadline: float  # `time.monotonic()`, the same clock in every process on the machine
    time_limit_s: float
    revision: int
    model_digest: str
    hold: bool = False  # test hook (`Walkers.hold`): stop after the sync, before the walk, until told to go


@dataclass
class Hold:
    """Test hook: the next walk a worker takes stops there (after its sync, before walking) until `release()`."""

    reached: threading.Event = field(default_factory=threading.Event)  # set once the worker holds the walk
    released: threading.Event = field(default_factory=threading.Event)
    pid: int | None = None  # the worker holding it

    def release(self) -> None:
        self.released.set()


@dataclass(eq=False)
class _Worker:
    process: subprocess.Popen[bytes]
    conn: Connection

    @property
    def pid(self) -> int:
        return self.process.pid


class _Late(Exception):
    """The worker did not answer by the call's deadline and its grace."""


class _Lost(Exception):
    """The worker's pipe closed: it stopped."""


class Walkers:
    """A pool of `count` walk worker processes on the store at `location` (started on the first walk).

    `handlers` is the table a worker runs walks from, handed in by the composition root (`core.instance`), and
    `source` where a worker finds the same table, as `module:attribute` (a worker imports it by that name: this
    module imports no toolset, so dispatch, the walkers and the tools make no circle)."""

    def __init__(self, location: Path | str, count: int, handlers: Mapping[str, Handler], source: str,
                 index_file: Path | None = None) -> None:  # fmt: skip
        if count < 1:
            raise ValueError(f"a walk worker pool needs at least one worker, not {count}")
        if ":" not in source:
            raise ValueError(f"the walk handlers' source must be module:attribute, not {source!r}")
        self._location, self._count = str(location), count
        self._index_file = None if index_file is None else str(index_file)  # the saved index a worker loads
        self._handlers, self._source = handlers, source
        self._idle: queue.Queue[_Worker] = queue.Queue()
        self._live: set[_Worker] = set()  # started, answering or not
        self._ready = 0  # workers that have loaded their graph
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._started = self._closed = False
        self._hold: Hold | None = None
        self.answered = 0  # walks the workers answered (a value or an error)
        self.loaded = 0  # workers that started from the saved index (core.index.persisted) rather than a build

    # -- the serving side --------------------------------------------------------------------------------------
    def serves(self, name: str, handler: Handler) -> bool:
        """Whether a worker can run `handler` for the tool `name`: one of the handed-in table (a worker imports
        that table by its `source`; a tools folder's handlers run in the serving process)."""
        return self._handlers.get(name) is handler

    def walk(self, ctx: CallContext, tool: str, arguments: Mapping[str, Any]) -> dict[str, Any] | None:
        """The value of `tool`'s handler for `arguments`, run in a worker; None when no worker can take it now (it
        runs in this process then). Raises what the handler raised, `ctx.out_of_time()` past the deadline, and
        `UnavailableError` if the worker died meanwhile."""
        self._start()
        if self._ready == 0:
            return None
        try:
            worker = self._idle.get(timeout=max(0.0, ctx.deadline - time.monotonic()))
        except queue.Empty:
            raise ctx.out_of_time() from None
        hold, self._hold = self._hold, None
        request = WalkRequest(tool, ctx.principal, ctx.surface, arguments, ctx.deadline, ctx.time_limit_s,
                              ctx.view.revision, ctx.model.digest, hold is not None)  # fmt: skip
        try:
            worker.conn.send(request)
        except OSError:  # it died while idle: this call runs here, a new worker starts
            self._replace(worker)
            return None
        try:
            answer = self._answer(worker, ctx.deadline + GRACE_S, hold)
        except _Late:
            self._replace(worker)
            raise ctx.out_of_time() from None
        except _Lost:
            status = self._replace(worker)
            raise UnavailableError(
                f"The walk worker (process {worker.pid}) stopped during this {tool} call ({status}); a new one is "
                "starting: call again."
            ) from None
        self._idle.put(worker)
        if answer[0] != "elsewhere":
            with self._lock:
                self.answered += 1
        return _unpack(answer)

    def _answer(self, worker: _Worker, until: float, hold: Hold | None) -> tuple[Any, ...]:
        """The worker's answer, waited for until `until` (`time.monotonic()`) at most."""
        while True:
            try:
                if not worker.conn.poll(max(0.0, until - time.monotonic())):
                    raise _Late
                answer = cast("tuple[Any, ...]", worker.conn.recv())
            except (EOFError, OSError):
                raise _Lost from None
            if answer[0] != "holding" or hold is None:
                return answer
            hold.pid = worker.pid
            hold.reached.set()
            if not hold.released.wait(max(0.0, until - time.monotonic())):
                raise _Late
            try:
                worker.conn.send("go")
            except OSError:
                raise _Lost from None

    def hold(self) -> Hold:
        """Test hook: the next walk a worker runs stops after its sync, before walking, until the `Hold` is
        released (or its call's deadline and grace pass)."""
        self._hold = Hold()
        return self._hold

    def ready(self, timeout: float) -> bool:
        """Start the workers if they have not started, and wait up to `timeout` seconds until all have loaded their
        graph; whether they have."""
        self._start()
        deadline = time.monotonic() + timeout
        with self._changed:
            return self._changed.wait_for(lambda: self._ready >= self._count, max(0.0, deadline - time.monotonic()))

    @property
    def ready_count(self) -> int:
        """Workers that have loaded their graph and take walks."""
        return self._ready

    def pids(self) -> list[int]:
        """The process ids of the live workers."""
        with self._lock:
            return sorted(w.pid for w in self._live)

    def close(self) -> None:
        """Stop every worker (closing its pipe ends it) and wait for it."""
        with self._lock:
            self._closed = True
            workers = list(self._live)
            self._live.clear()
            self._ready = 0
        for worker in workers:
            _stop(worker)

    # -- starting and replacing workers -----------------------------------------------------------------------
    def _start(self) -> None:
        if self._started:
            return
        with self._lock:
            if self._started or self._closed:
                return
            self._started = True
        for _ in range(self._count):
            self._spawn()

    def _spawn(self) -> None:
        """Start one worker; a thread waits for it to load its graph, then offers it to calls."""
        import socket
        import subprocess
        from multiprocessing.connection import Connection

        ours, theirs = socket.socketpair()
        with theirs:
            process = subprocess.Popen(
                [sys.executable, "-m", "core.dispatch.walkers", str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,  # never the server's: on stdio, that is the MCP channel (stderr is shared)
            )
        worker = _Worker(process, Connection(ours.detach()))
        with self._lock:
            if self._closed:
                _stop(worker)
                return
            self._live.add(worker)
        threading.Thread(target=self._boot, args=(worker,), name=f"canon-walker-boot-{process.pid}",
                         daemon=True).start()  # fmt: skip

    def _boot(self, worker: _Worker) -> None:
        try:
            # over the pipe, not the command line: a URL may hold a password
            worker.conn.send((self._location, self._source, self._index_file))
            if not worker.conn.poll(BOOT_TIMEOUT_S):
                raise TimeoutError(f"it loaded no graph in {BOOT_TIMEOUT_S:g} s")
            answer = cast("tuple[Any, ...]", worker.conn.recv())
            if answer[0] != "ready":
                raise RuntimeError(str(answer[1]))
            loaded = bool(answer[2])
        except (EOFError, OSError, TimeoutError, RuntimeError) as exc:
            log.warning("walk worker %d did not start (%s); walks run in this process", worker.pid, exc or "exited")
            with self._lock:
                self._live.discard(worker)
            _stop(worker)
            return
        with self._changed:
            if worker not in self._live:  # closed meanwhile
                return
            self._ready += 1
            self.loaded += loaded
            self._changed.notify_all()
        self._idle.put(worker)

    def _replace(self, worker: _Worker) -> str:
        """Stop `worker` (killing it if it still runs) and start another; how it ended."""
        with self._lock:
            known = worker in self._live
            self._live.discard(worker)
            if known:
                self._ready -= 1
        status = _stop(worker, kill=True)
        if known and not self._closed:
            self._spawn()
        return status


def _stop(worker: _Worker, *, kill: bool = False) -> str:
    """End `worker`: close its pipe (which ends it), kill it if asked or if it lingers; how it ended."""
    import subprocess

    worker.conn.close()
    if kill and worker.process.poll() is None:
        worker.process.kill()
    try:
        ended = worker.process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        worker.process.kill()
        ended = worker.process.wait()
    if ended < 0:
        return f"signal {-ended}"
    return f"exit status {ended}"


def _unpack(answer: tuple[Any, ...]) -> dict[str, Any] | None:
    """A worker's answer as the handler's value (or None: run it here), raising the error it reports."""
    kind = answer[0]
    if kind == "ok":
        return cast("dict[str, Any]", answer[1])
    if kind == "elsewhere":
        return None
    if kind == "error":
        cls, args, attributes = cast("tuple[type[CanonError], tuple[Any, ...], dict[str, Any]]", answer[1:])
        error = cls.__new__(cls)
        Exception.__init__(error, *args)
        error.__dict__.update(attributes)
        raise error
    raise RuntimeError(f"the walk worker failed:\n{answer[1]}")


# -- the worker side ---------------------------------------------------------------------------------------------
def _serve(conn: Connection) -> None:
    """A worker's life: open the store read-only and load its graph, say so, then answer walks until the pipe
    closes."""
    from core.index.persisted import FileWatch, open_index
    from core.store import open_existing_store

    location, source, index_file = cast("tuple[str, str, str | None]", conn.recv())
    try:
        handlers = _handlers_of(source)
        store = open_existing_store(location, read_only=True)
        watch = None if index_file is None else FileWatch(Path(index_file))  # a newer one: mapped at the next walk
        index, loaded = open_index(store, None if index_file is None else Path(index_file))  # the saved one if sound
    except Exception as exc:  # noqa: BLE001 - said to the serving process, which then runs walks itself
        conn.send(("failed", f"{type(exc).__name__}: {exc}"))
        return
    index.warm()  # a mapped index's ids decoded now, not by the first walks
    gc.collect()  # the graph lives as long as the worker: out of the cyclic collector's full collections, as in
    gc.freeze()  # the serving process (core.http.serve), or every walk's garbage makes them walk the graph again
    conn.send(("ready", index.revision, loaded))
    with closing(store):
        while True:
            try:
                request = cast("WalkRequest", conn.recv())
            except EOFError:
                return
            if watch is not None and watch.replaced():
                _remap(index, watch.path)
            conn.send(_run(conn, store, index, handlers, request))


def _remap(index: GraphIndex, path: Path) -> None:
    """Move onto the newer file the serving process saved (`core.index.persisted.remap_index`), before a walk: the
    walk then reads the shared arrays, not this worker's own copy of the changes since the last file."""
    from core.index.persisted import remap_index

    try:
        if remap_index(index, path):
            index.warm()
    except Exception:  # the index it has still answers: the walk goes on over it
        log.warning("walk worker %d could not move onto the graph index file %s", os.getpid(), path, exc_info=True)


def _handlers_of(source: str) -> Mapping[str, Handler]:
    """The handler table named `module:attribute` (what the serving process handed its pool)."""
    import importlib

    module, _, attribute = source.partition(":")
    return cast("Mapping[str, Handler]", getattr(importlib.import_module(module), attribute))


def _run(conn: Connection, store: Store, index: GraphIndex, handlers: Mapping[str, Handler],
         request: WalkRequest) -> tuple[Any, ...]:  # fmt: skip
    """The answer to one request: ("ok", value), ("error", class, args, attributes), ("elsewhere",) when the
    serving process runs another model than the store's, or ("failed", traceback)."""
    import traceback

    from core.dispatch.access import sight_of
    from core.dispatch.dispatcher import CallContext, ReadOnly
    from core.dispatch.registry import Registry
    from core.index.current import CurrentView
    from core.lang.model_migration import renames_types
    from core.store.view import View

    deadline = request.deadline
    try:
        if store.model.digest != request.model_digest:
            stored = store.stored_model()
            if stored.digest != request.model_digest:
                return ("elsewhere",)
            if renames_types(store.model, stored):
                index.reload()  # the records moved to the new type names without a change each
            store.follow_model()
        index.sync()
        if index.revision < request.revision:
            raise RuntimeError(f"the store is at revision {index.revision}, behind {request.revision}")
        if request.hold:
            conn.send(("holding",))
            conn.recv()
        registry = Registry(store.model, (), (), ())  # the model alone: what walk handlers read (`ctx.model`)
        arguments = dict(request.arguments)
        view: View = store.view(arguments["at"]) if "at" in arguments else CurrentView(store, index)  # as dispatch
        ctx = CallContext(request.principal, request.surface, registry, view, ReadOnly(), deadline,
                          request.time_limit_s, sight_of(request.principal))  # fmt: skip
        return ("ok", handlers[request.tool](ctx, arguments))
    except CanonError as exc:
        return ("error", type(exc), exc.args, dict(vars(exc)))
    except Exception:  # noqa: BLE001 - a bug: the serving process raises it as the handler would have
        return ("failed", traceback.format_exc())


def main(argv: list[str]) -> int:
    """`python -m core.dispatch.walkers FD`: a walk worker on the pipe inherited as file descriptor FD. It ignores
    Ctrl-C
    (the terminal sends it to the whole process group): it ends when the serving process closes the pipe. It runs
    `NICENESS` below the serving process, so when cores are short the operating system runs the serving process's
    cheap reads first and walks with what is left."""
    import signal
    from multiprocessing.connection import Connection

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.nice(NICENESS)
    _serve(Connection(int(argv[1])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
