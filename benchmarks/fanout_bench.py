"""Write → change notification fan-out over HTTP: an `upsert_node` and the time until 1 / 100 / 1,000 listeners
have heard of it, on both protocol revisions, against a real `canon serve`. From the repository root:

    .venv/bin/python benchmarks/fanout_bench.py          # both revisions, raw and SDK listeners, 1 / 100 / 1,000
    .venv/bin/python benchmarks/fanout_bench.py --revision modern --client raw --listeners 1,1000 --writes 100

For every (revision, listener kind, N) a fresh `canon serve --port 0` runs on 127.0.0.1, over one store seeded with
the sample data and a writer token (`canon token create bench --role writer`), both in a temporary directory
removed at the end. N listeners watch `canon://nodes/Team/team-payments` anonymously (the node is public):

* modern (2026-07-28): one `subscriptions/listen` stream each;
* legacy (2025-11-25): one session each that called `resources/subscribe` and hears
  `notifications/resources/updated` on its GET stream.

Two kinds of listener (`--client`): `sdk` is the SDK's `mcp.Client` (`client.listen(...)`, or `mode="legacy"` with
a message handler), timed when the SDK hands over the event; `raw` speaks just enough HTTP/1.1 and SSE itself and
times the bytes as they arrive. All listeners of a run share `--client-processes` child processes of this script
(one asyncio loop each), so one process parses every notification in turn: the raw listeners keep that cost
small, and are the measure of the server; the SDK figures show what SDK clients add on top.

This process is the writer, an SDK client with the writer token. It writes one at a time, `upsert_node` on
team-payments with the same properties and a new name, after a random pause (up to `--pause`, so writes land at
every phase of the server's 50 ms change-pump tick), and waits until all N listeners have heard of the write (or
`--timeout` passes: a listener that never hears counts as missed, and the write's latency as the timeout) before
the next. Warm-up writes, not measured, first prove every stream live.

Per write, in ms: commit→last and commit→first (the commit time is the node's `updated_at` stamp, exact to the
millisecond; monotonic and wall clocks are both system-wide, so child processes' arrival times compare), first→last
(the spread of the fan-out), send→last and ack→last (from just before the call is sent and from its answer:
bounds on commit→last) and send→ack (the write call itself). p50/p90/p99 interpolate linearly over the writes
(with 30 writes p99 is close to the maximum). Each N's p50 is also a ratio of the 1-listener p50 of the same
revision and listener kind in the same run (the baseline). Also: the server's RSS before any listener connects
and its peak (VmHWM), and CPU per write of the server, the listener processes, the writer, other processes,
kernel interrupts and hypervisor steal (other processes near 0 means nothing else disturbed the run). Server
figures add up the server's process and its descendants (`--serve-arg` passes options to `canon serve`).

The target (issue): commit → notification at 1,000 listeners, p99 ≤ 100 ms; `verdict` judges commit→last.
Prints one JSON object on stdout, progress on stderr. Linux only (/proc). Needs ~4 file descriptors per listener;
the soft limit is raised to fit (the server inherits it).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import queue
import random
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import anyio
import anyio.abc
import httpx2
import mcp
import mcp_types as types
from anyio.streams.buffered import BufferedByteReceiveStream
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ResourceUpdated

NODE_ID = "team-payments"
URI = f"canon://nodes/Team/{NODE_ID}"
SERVE_LINE = re.compile(r"canon: serving MCP at (http://127\.0\.0\.1:(\d+)/mcp)")
ACCEPT = "application/json, text/event-stream"
MODES = {"modern": "auto", "legacy": "legacy"}  # the SDK client's `mode` for each revision
PROTOCOLS = {"modern": "2026-07-28", "legacy": "2025-11-25"}
MODERN_META = {"io.modelcontextprotocol/protocolVersion": PROTOCOLS["modern"],
               "io.modelcontextprotocol/clientCapabilities": {}}  # fmt: skip
CONNECTING_AT_ONCE = 32  # listeners of one process that may be connecting at the same time
TARGET_MS, TARGET_LISTENERS = 100.0, 1000
T = TypeVar("T")
SERIES = ("commit_to_last", "commit_to_first", "first_to_last", "send_to_last", "ack_to_last", "send_to_ack")


# -- the server ---------------------------------------------------------------------------------------------------
def _canon(*args: str, store: Path) -> list[str]:
    return [sys.executable, "-m", "core.app.cli", "--store", str(store), *args]


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("CANON_")}


def make_token(folder: Path, store: Path) -> str:
    """`canon token create bench --role writer` in `folder`, where the server will find the token file."""
    done = subprocess.run(_canon("token", "create", "bench", "--role", "writer", store=store), cwd=folder,
                          env=_clean_env(), capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"canon token create failed: {done.stderr}")
    return done.stdout.strip()


def process_tree(pid: int) -> list[int]:
    """`pid` and its descendants (a server started with worker processes is all of them)."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                ppid = int((entry / "stat").read_text(encoding="ascii").rpartition(")")[2].split()[1])
                parents.setdefault(ppid, []).append(int(entry.name))
    tree, todo = [], [pid]
    while todo:
        tree.append(current := todo.pop())
        todo += parents.get(current, [])
    return tree


def memory_mib(pid: int, key: str) -> float:
    """A /proc/<pid>/status memory line (VmRSS, VmHWM) in MiB, summed over the process and its descendants."""
    total = 0
    for member in process_tree(pid):
        with contextlib.suppress(OSError), open(f"/proc/{member}/status", encoding="ascii") as status:
            total += next((int(line.split()[1]) for line in status if line.startswith(key + ":")), 0)
    return total / 1024


def commit_time_ns(stamp: str) -> int:
    """A store timestamp (`updated_at`, UTC, millisecond precision) as wall-clock nanoseconds."""
    return round(datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() * 1000) * 1_000_000


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (/proc/<pid>/stat)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        fields = stat.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_use(server: int, listeners: list[int]) -> dict[str, float]:
    """CPU seconds so far: the server, the listener processes, this process, every other process, the kernel's
    interrupt work (loopback TCP is mostly softirq) and time stolen by the hypervisor."""
    with open("/proc/stat", encoding="ascii") as stat:
        user, nice, system, _idle, _iowait, irq, softirq, steal = (int(v) for v in stat.readline().split()[1:9])
    tick = os.sysconf("SC_CLK_TCK")
    use = {"server": sum(cpu_seconds(pid) for pid in process_tree(server)),
           "listeners": sum(cpu_seconds(pid) for pid in listeners), "writer": cpu_seconds(os.getpid())}  # fmt: skip
    use["others"] = (user + nice + system) / tick - sum(use.values())
    use["irq"], use["steal"] = (irq + softirq) / tick, steal / tick
    return use


@dataclass
class Server:
    popen: subprocess.Popen[str]
    url: str
    stderr: list[str] = field(default_factory=list[str])

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None


def _drain(stream: Any, lines: list[str], ready: queue.Queue[str]) -> None:
    for line in stream:
        lines.append(line)
        del lines[:-200]  # keep the tail, for error messages
        ready.put(line)
    ready.put("")


SERVER_ENV: dict[str, str] = {}  # what the server's environment adds (`--fastpath off`: CANON_MCP_FASTPATH=0)


@contextlib.contextmanager
def serving(folder: Path, store: Path, options: list[str]) -> Iterator[Server]:
    """`canon --store STORE serve --port 0` in `folder`; stopped with SIGINT (then killed) when the block ends."""
    command = _canon("serve", "--port", "0", "--log-level", "warning", *options, store=store)
    popen = subprocess.Popen(command, cwd=folder, env=_clean_env() | SERVER_ENV, stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)  # fmt: skip
    lines: list[str] = []
    ready: queue.Queue[str] = queue.Queue()
    threading.Thread(target=_drain, args=(popen.stderr, lines, ready), daemon=True).start()
    try:
        deadline = time.monotonic() + 120  # a cold start imports the SDK, seeds the store, builds the index
        while True:
            line = ready.get(timeout=max(0.0, deadline - time.monotonic()))
            if not line:
                raise RuntimeError(f"canon serve exited before serving:\n{''.join(lines)}")
            if found := SERVE_LINE.search(line):
                break
        server = Server(popen, found[1], lines)
        _wait_healthy(server.url.removesuffix("/mcp"), deadline)
        yield server
    finally:
        _stop(popen)


def _stop(popen: subprocess.Popen[Any]) -> None:
    if popen.poll() is None:
        popen.send_signal(signal.SIGINT)
        try:
            popen.wait(timeout=30)
        except subprocess.TimeoutExpired:
            popen.kill()
            popen.wait(timeout=10)


def _wait_healthy(base: str, deadline: float) -> None:
    with httpx2.Client(base_url=base, timeout=5) as http:
        while True:
            try:
                if http.get("/healthz").status_code == 200:
                    return
            except httpx2.TransportError:
                if time.monotonic() > deadline:
                    raise
            time.sleep(0.02)  # a readiness poll: nothing to wait on until the port accepts


def raise_fd_limit(needed: int) -> int:
    """Raise this process's soft open-file limit (children, the server included, inherit it); the new limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed:
        soft = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    return soft


# -- listeners (the child processes) ------------------------------------------------------------------------------
class Lines:
    """Lines to stdout, written together: arrival times are taken before, so batching does not skew them."""

    def __init__(self) -> None:
        self.pending: list[str] = []
        self.wake = anyio.Event()

    def emit(self, line: str) -> None:
        self.pending.append(line)
        self.wake.set()

    async def flusher(self) -> None:
        while True:
            await self.wake.wait()
            self.wake = anyio.Event()
            await anyio.lowlevel.checkpoint()  # let the other listeners woken by the same tick add theirs
            data, self.pending = "".join(f"{line}\n" for line in self.pending), []
            os.write(1, data.encode())


Connected = Callable[[], None]


async def _sdk_modern(lid: int, url: str, http: httpx2.AsyncClient, out: Lines, connected: Connected) -> None:
    async with (
        mcp.Client(streamable_http_client(url, http_client=http), mode=MODES["modern"]) as client,  # pyright: ignore[reportArgumentType]
        client.listen(resource_subscriptions=[URI]) as subscription,
    ):
        if subscription.honored.resource_subscriptions != [URI]:
            raise RuntimeError(f"listen not honoured: {subscription.honored}")
        connected()
        async for event in subscription:
            arrived = time.monotonic_ns()
            if isinstance(event, ResourceUpdated) and event.uri == URI:
                out.emit(f"h {lid} {arrived}")
            else:
                out.emit(f"x {lid} {type(event).__name__}")
        raise RuntimeError("the listen stream ended")


async def _sdk_legacy(lid: int, url: str, http: httpx2.AsyncClient, out: Lines, connected: Connected) -> None:
    async def on_message(message: Any) -> None:
        arrived = time.monotonic_ns()
        if isinstance(message, Exception):
            out.emit(f"x {lid} {type(message).__name__}")
        elif isinstance(message, types.ResourceUpdatedNotification) and str(message.params.uri) == URI:
            out.emit(f"h {lid} {arrived}")

    async with mcp.Client(streamable_http_client(url, http_client=http), mode=MODES["legacy"],  # pyright: ignore[reportArgumentType]
                          message_handler=on_message) as client:  # fmt: skip
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", mcp.MCPDeprecationWarning)
            await client.subscribe_resource(URI)
        connected()
        await anyio.sleep_forever()


class RawHTTP:
    """Just enough HTTP/1.1 over one TCP connection for a listener: requests, heads, JSON bodies, SSE events."""

    def __init__(self, url: str, stream: anyio.abc.SocketStream) -> None:
        parts = urlsplit(url)
        self.netloc, self.path = parts.netloc, parts.path
        self.stream = stream
        self.buffered = BufferedByteReceiveStream(stream)

    @classmethod
    async def open(cls, url: str) -> RawHTTP:
        parts = urlsplit(url)
        return cls(url, await anyio.connect_tcp(parts.hostname or "127.0.0.1", parts.port or 80))

    async def request(self, method: str, headers: dict[str, str], body: dict[str, Any] | None = None) -> None:
        data = json.dumps(body, separators=(",", ":")).encode() if body is not None else b""
        lines = [f"{method} {self.path} HTTP/1.1", f"Host: {self.netloc}", f"Accept: {ACCEPT}"]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        if body is not None:
            lines += ["Content-Type: application/json", f"Content-Length: {len(data)}"]
        await self.stream.send(("\r\n".join(lines) + "\r\n\r\n").encode() + data)

    async def head(self) -> tuple[int, dict[str, str]]:
        status, *lines = (await self.buffered.receive_until(b"\r\n\r\n", 1 << 16)).decode("latin-1").split("\r\n")
        return int(status.split()[1]), {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in lines)}

    async def answer(self, what: str) -> tuple[dict[str, str], bytes]:
        """The head and (Content-Length) body of a response that must be 2xx."""
        status, headers = await self.head()
        length = int(headers.get("content-length", "0"))
        body = await self.buffered.receive_exactly(length) if length else b""
        if not 200 <= status < 300 or b'"error"' in body:
            raise RuntimeError(f"{what}: HTTP {status} {body[:300]!r}")
        return headers, body

    async def events(self) -> AsyncIterator[tuple[int, bytes]]:
        """(arrival in monotonic ns, one SSE event) from a chunked event stream, until the stream ends."""
        raw, text = bytearray(), bytearray()
        while True:
            try:
                data = await self.buffered.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError):
                return
            arrived = time.monotonic_ns()
            raw += data
            while (eol := raw.find(b"\r\n")) >= 0:  # de-chunk every complete chunk
                size = int(bytes(raw[:eol]).split(b";")[0], 16)
                if size == 0:
                    return
                if len(raw) < eol + 2 + size + 2:
                    break
                text += raw[eol + 2 : eol + 2 + size]
                del raw[: eol + 4 + size]
            text[:] = text.replace(b"\r\n", b"\n")
            while (cut := text.find(b"\n\n")) >= 0:
                yield arrived, bytes(text[:cut])
                del text[: cut + 2]

    async def aclose(self) -> None:
        await self.stream.aclose()


def _on_event(lid: int, arrived: int, event: bytes, out: Lines) -> None:
    if b"notifications/resources/updated" in event and URI.encode() in event:
        out.emit(f"h {lid} {arrived}")
    elif not event.startswith(b":"):  # ":" starts a keep-alive comment
        out.emit(f"x {lid} {event[:80]!r}")


async def _raw_modern(lid: int, url: str, out: Lines, connected: Connected) -> None:
    connection = await RawHTTP.open(url)
    try:
        body = {"jsonrpc": "2.0", "id": f"listen-{lid}", "method": "subscriptions/listen",
                "params": {"notifications": {"resourceSubscriptions": [URI]}, "_meta": MODERN_META}}  # fmt: skip
        await connection.request("POST", {"MCP-Protocol-Version": PROTOCOLS["modern"],
                                          "Mcp-Method": "subscriptions/listen"}, body)  # fmt: skip
        status, headers = await connection.head()
        if status != 200 or not headers.get("content-type", "").startswith("text/event-stream"):
            length = int(headers.get("content-length", "0"))
            body = await connection.buffered.receive_exactly(length) if length else b""
            raise RuntimeError(f"subscriptions/listen: HTTP {status} {body[:300]!r}")
        acknowledged = False
        async for arrived, event in connection.events():
            if not acknowledged and b"notifications/subscriptions/acknowledged" in event:
                if URI.encode() not in event:
                    raise RuntimeError(f"listen not honoured: {event!r}")
                acknowledged = True
                connected()
            else:
                _on_event(lid, arrived, event, out)
        raise RuntimeError("the listen stream ended")
    finally:
        await connection.aclose()


async def _raw_legacy(lid: int, url: str, out: Lines, connected: Connected) -> None:
    async with contextlib.AsyncExitStack() as closing:
        posts = await RawHTTP.open(url)
        closing.push_async_callback(posts.aclose)
        hello = {"protocolVersion": PROTOCOLS["legacy"], "capabilities": {},
                 "clientInfo": {"name": "fanout-bench", "version": "0"}}  # fmt: skip
        await posts.request("POST", {}, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello})
        headers, _ = await posts.answer("initialize")
        session = {"Mcp-Session-Id": headers["mcp-session-id"], "MCP-Protocol-Version": PROTOCOLS["legacy"]}
        await posts.request("POST", session, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        await posts.answer("notifications/initialized")
        stream = await RawHTTP.open(url)
        closing.push_async_callback(stream.aclose)
        await stream.request("GET", session)
        status, headers = await stream.head()
        if status != 200 or not headers.get("content-type", "").startswith("text/event-stream"):
            raise RuntimeError(f"GET stream: HTTP {status} {headers}")
        await posts.request("POST", session, {"jsonrpc": "2.0", "id": 2, "method": "resources/subscribe",
                                              "params": {"uri": URI}})  # fmt: skip
        await posts.answer("resources/subscribe")
        await posts.aclose()  # the session lives on; its notifications come on the GET stream
        connected()
        async for arrived, event in stream.events():
            _on_event(lid, arrived, event, out)
        raise RuntimeError("the GET stream ended")


async def listeners_main(url: str, revision: str, client: str, count: int, first: int) -> None:
    """Run `count` listeners (ids from `first`) until stdin closes. Lines out: `r ID` connected, `h ID NS` heard
    (monotonic ns), `e ID MESSAGE` failed, `x ID WHAT` something unexpected."""
    out = Lines()
    connecting = anyio.Semaphore(CONNECTING_AT_ONCE)
    limits = httpx2.Limits(max_connections=None, max_keepalive_connections=None)

    async def one(lid: int, http: httpx2.AsyncClient) -> None:
        await connecting.acquire()
        held = True

        def connected() -> None:
            nonlocal held
            connecting.release()
            held = False
            out.emit(f"r {lid}")

        try:
            if client == "raw":
                await (_raw_modern if revision == "modern" else _raw_legacy)(lid, url, out, connected)
            else:
                await (_sdk_modern if revision == "modern" else _sdk_legacy)(lid, url, http, out, connected)
        except Exception as exc:  # noqa: BLE001  # reported, never dropped: the parent counts it as failed
            out.emit(f"e {lid} {type(exc).__name__}: {exc}".replace("\n", " "))
        finally:
            if held:
                connecting.release()

    async with (
        httpx2.AsyncClient(timeout=httpx2.Timeout(30, read=3600), limits=limits) as http,
        anyio.create_task_group() as tasks,
    ):
        tasks.start_soon(out.flusher)
        for lid in range(first, first + count):
            tasks.start_soon(one, lid, http)
        await anyio.to_thread.run_sync(sys.stdin.buffer.read)  # until the parent closes our stdin
        tasks.cancel_scope.cancel()


# -- the measurement (this process) -------------------------------------------------------------------------------
@dataclass
class Heard:
    """Arrival times, per write, of the listeners that heard of it."""

    n: int
    current: int = -1
    sent_ns: int = 0
    times: dict[int, dict[int, int]] = field(default_factory=dict[int, dict[int, int]])
    all_heard: anyio.Event = field(default_factory=anyio.Event)
    connected: int = 0
    connected_ids: set[int] = field(default_factory=set[int])
    failed: list[str] = field(default_factory=list[str])  # before connecting
    lost: list[str] = field(default_factory=list[str])  # after connecting
    lost_ids: set[int] = field(default_factory=set[int])
    extra: int = 0
    unexpected: list[str] = field(default_factory=list[str])
    settled: anyio.Event = field(default_factory=anyio.Event)  # every listener connected or failed

    def start(self, write: int, sent_ns: int) -> None:
        self.current, self.sent_ns = write, sent_ns
        self.times[write] = {}
        self.all_heard = anyio.Event()

    def _check(self) -> None:
        """All heard: every listener still connected (a lost one is not waited for, but its misses count)."""
        heard = self.times.get(self.current)
        if heard is None:
            return
        alive = len(heard.keys() - self.lost_ids) if self.lost_ids else len(heard)
        if alive >= self.connected - len(self.lost_ids):
            self.all_heard.set()

    def line(self, text: str) -> None:
        kind, _, rest = text.partition(" ")
        if kind == "h":
            lid, arrived = (int(v) for v in rest.split())
            heard = self.times.get(self.current)
            if heard is None or lid in heard or arrived < self.sent_ns:
                self.extra += 1  # not for the write in flight: late (after a timeout) or a duplicate
                return
            heard[lid] = arrived
            self._check()
        elif kind == "r":
            self.connected += 1
            self.connected_ids.add(int(rest))
        elif kind == "e":
            lid = int(rest.partition(" ")[0])
            if lid in self.connected_ids:
                self.lost.append(rest)
                self.lost_ids.add(lid)
            else:
                self.failed.append(rest)
            self._check()
        else:
            self.unexpected.append(rest)
        if kind in ("r", "e") and self.connected + len(self.failed) >= self.n:
            self.settled.set()


async def _read_lines(stream: anyio.abc.ByteReceiveStream, on_line: Callable[[str], None]) -> None:
    buffered = BufferedByteReceiveStream(stream)
    with contextlib.suppress(anyio.EndOfStream, anyio.IncompleteRead, anyio.ClosedResourceError):
        while True:
            on_line((await buffered.receive_until(b"\n", 1 << 20)).decode())


@contextlib.asynccontextmanager
async def listener_processes(url: str, revision: str, client: str, n: int, processes: int, heard: Heard
                             ) -> AsyncIterator[list[anyio.abc.Process]]:  # fmt: skip
    """N listeners split over `processes` children of this script; stopped (stdin closed, then killed) at exit."""
    shares = [n // processes + (1 if i < n % processes else 0) for i in range(processes)]
    script = str(Path(__file__).resolve())
    started: list[anyio.abc.Process] = []
    try:
        async with anyio.create_task_group() as readers:
            first = 0
            for share in shares:
                if share == 0:
                    continue
                command = [sys.executable, script, "--listen-child", url, revision, client, str(share), str(first)]
                process = await anyio.open_process(command, stderr=None)
                started.append(process)
                assert process.stdout is not None
                readers.start_soon(_read_lines, process.stdout, heard.line)
                first += share
            try:
                yield started
            finally:
                readers.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            for process in started:
                if process.stdin is not None:
                    await process.stdin.aclose()
            for process in started:
                with anyio.move_on_after(10):
                    await process.wait()
                if process.returncode is None:
                    process.kill()
                    await process.wait()


@contextlib.asynccontextmanager
async def writer_client(url: str, revision: str, token: str) -> AsyncIterator[mcp.Client]:
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300)) as http,
        mcp.Client(streamable_http_client(url, http_client=http), mode=MODES[revision]) as client,  # pyright: ignore[reportArgumentType]
    ):
        if client.protocol_version != PROTOCOLS[revision]:
            raise RuntimeError(f"writer negotiated {client.protocol_version}, not {PROTOCOLS[revision]}")
        yield client


def _percentiles(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"p50": None, "p90": None, "p99": None}
    if len(values) == 1:
        return {"p50": round(values[0], 2), "p90": round(values[0], 2), "p99": round(values[0], 2)}
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    return {"p50": round(cuts[49], 2), "p90": round(cuts[89], 2), "p99": round(cuts[98], 2)}


async def measure(server: Server, token: str, revision: str, client: str, n: int, args: argparse.Namespace,
                  write_to: Server | None = None) -> dict[str, Any]:  # fmt: skip
    """The listeners on `server`; the writes through `write_to` (another replica of its store), else `server`."""
    heard = Heard(n)
    rss_idle = memory_mib(server.pid, "VmRSS")
    processes = min(args.client_processes, n)
    connect_started = time.monotonic()
    async with (
        listener_processes(server.url, revision, client, n, processes, heard) as children,
        writer_client((write_to or server).url, revision, token) as writer,
    ):
        with anyio.move_on_after(60 + n * 0.2):
            await heard.settled.wait()
        connect_s = time.monotonic() - connect_started
        if heard.connected == 0:
            raise RuntimeError(f"no listener connected ({len(heard.failed)} failed): {heard.failed[:3]}")
        got = await writer.call_tool("get_node", {"id": NODE_ID})
        if got.is_error or got.structured_content is None:
            raise RuntimeError(f"get_node failed: {got.content}")
        properties = dict(got.structured_content["node"]["properties"])
        pauses = random.Random(args.seed)
        write_no = 0

        async def write() -> dict[str, Any]:
            nonlocal write_no
            write_no += 1
            # a random pause first, so writes land at every phase of the server's 50 ms pump tick rather than
            # just after the tick that delivered the previous write
            await anyio.sleep(pauses.uniform(0, args.pause))
            arguments = {"id": NODE_ID, "type": "Team", "properties": {**properties, "name": f"Payments {write_no}"}}
            heard.start(write_no, time.monotonic_ns())
            sent = heard.sent_ns
            result = await writer.call_tool("upsert_node", arguments)
            acked = time.monotonic_ns()
            wall_offset = time.time_ns() - time.monotonic_ns()  # both clocks are system-wide: one offset for all
            if result.is_error or result.structured_content is None:
                raise RuntimeError(f"upsert_node failed: {result.content}")
            with anyio.move_on_after(args.timeout):
                await heard.all_heard.wait()
            committed = commit_time_ns(result.structured_content["node"]["updated_at"]) - wall_offset
            return {"sent": sent, "acked": acked, "committed": committed, "times": dict(heard.times[write_no])}

        warmups_missed = 0
        for _ in range(args.warmup):
            done = await write()
            warmups_missed += heard.connected - len(done["times"])
        cpu_before = cpu_use(server.pid, [c.pid for c in children])
        writes = [await write() for _ in range(args.writes)]
        cpu_after = cpu_use(server.pid, [c.pid for c in children])
        vmhwm = memory_mib(server.pid, "VmHWM")
        server_alive = server.alive()
    exits = [c.returncode for c in children]
    server_said = [line.strip() for line in server.stderr if not SERVE_LINE.search(line)]

    connected = heard.connected
    timeout_ns = int(args.timeout * 1e9)
    series: dict[str, list[float]] = {k: [] for k in SERIES}
    missed = incomplete = outside = 0
    for w in writes:
        arrivals = sorted(w["times"].values())
        short = connected - len(arrivals)
        missed += short
        incomplete += short > 0
        last = w["acked"] + timeout_ns if short or not arrivals else arrivals[-1]
        first = arrivals[0] if arrivals else last
        # the commit stamp is truncated to the millisecond: it may lie up to 1 ms before the send
        outside += not w["sent"] - 1_000_000 <= w["committed"] <= w["acked"]
        for name, value in (("commit_to_last", last - w["committed"]), ("commit_to_first", first - w["committed"]),
                            ("first_to_last", last - first), ("send_to_last", last - w["sent"]),
                            ("ack_to_last", last - w["acked"]), ("send_to_ack", w["acked"] - w["sent"])):  # fmt: skip
            series[name].append(value / 1e6)
    k = max(len(writes), 1)

    def per_write(what: str) -> float:
        return round((cpu_after[what] - cpu_before[what]) * 1000 / k, 2)

    problems = {"failures": (heard.failed + heard.lost)[:5], "unexpected": heard.unexpected[:5],
                "server_stderr_tail": server_said[-3:]}  # fmt: skip
    return {
        "delivery": {
            "listeners": n,
            "connected": connected,
            "not_connected": n - connected,  # failed (see problems) or never answered
            "lost_after_connecting": len(heard.lost),
            "connect_s": round(connect_s, 2),
            "client_processes": processes,
            "listener_process_exits": ",".join(str(code) for code in exits),
            "writes": len(writes),
            "warmup_writes": args.warmup,
            "missed_notifications": missed,  # (listener, write) pairs never heard within the timeout
            "incomplete_writes": incomplete,
            "missed_in_warmup": warmups_missed,
            "extra_notifications": heard.extra,
            "commit_stamps_outside_send_ack": outside,
            "server_alive_after": server_alive,
        },
        "problems": {k: v for k, v in problems.items() if v},
        "latency_ms": {name: _percentiles(values) for name, values in series.items()},
        "server_memory_mib": {"rss_idle": round(rss_idle, 1), "peak_rss": round(vmhwm, 1)},
        "cpu_ms_per_write": {  # other_processes near 0: nothing else disturbed the run
            "server": per_write("server"),
            "listener_processes": per_write("listeners"),
            "writer": per_write("writer"),
            "other_processes": per_write("others"),
            "kernel_irq": per_write("irq"),
            "stolen": per_write("steal"),
        },
    }


async def interruptible(work: Callable[..., Awaitable[T]], *args: Any) -> T:
    """`await work(*args)`, cancelled on SIGINT or SIGTERM (its clean-up runs), which then raises KeyboardInterrupt."""
    interrupted = False
    async with anyio.create_task_group() as tasks:

        async def watch() -> None:
            nonlocal interrupted
            with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                async for _ in signals:
                    interrupted = True
                    tasks.cancel_scope.cancel()
                    return

        tasks.start_soon(watch)
        result = await work(*args)
        tasks.cancel_scope.cancel()
    if interrupted:
        raise KeyboardInterrupt
    return result


def _ratios(rows: dict[str, dict[str, Any]]) -> None:
    """Each N's p50 as a ratio of the 1-listener p50 of the same revision."""
    base = rows.get("1")
    if base is None:
        return
    for row in rows.values():
        ratio: dict[str, float | None] = {}
        for name in ("commit_to_last", "send_to_last"):
            mine, theirs = row["latency_ms"][name]["p50"], base["latency_ms"][name]["p50"]
            ratio[name] = None if mine is None or theirs is None or theirs <= 0 else round(mine / theirs, 2)
        row["p50_ratio_to_1_listener"] = ratio


def _verdict(results: dict[str, dict[str, dict[str, dict[str, Any]]]]) -> dict[str, Any]:
    """The issue's target, judged on commit→last (the commit stamp is exact to a millisecond)."""
    verdict: dict[str, Any] = {"target": f"commit → last of {TARGET_LISTENERS} listeners, p99 ≤ {TARGET_MS:g} ms"}
    for revision, clients in results.items():
        for client, rows in clients.items():
            row = rows.get(str(TARGET_LISTENERS))
            if row is None:
                continue
            p99 = row["latency_ms"]["commit_to_last"]["p99"]
            if row["delivery"]["missed_notifications"] or row["delivery"]["not_connected"]:
                verdict[f"{revision}/{client}"] = "not met: listeners failed to connect or missed notifications"
            else:
                verdict[f"{revision}/{client}"] = f"{'met' if p99 <= TARGET_MS else 'not met'}: p99 {p99} ms"
    return verdict


def run(args: argparse.Namespace) -> dict[str, Any]:
    started = time.monotonic()
    revisions = ["modern", "legacy"] if args.revision == "both" else [args.revision]
    clients = args.client.split(",")
    counts = [int(v) for v in args.listeners.split(",")]
    fd_limit = raise_fd_limit(max(counts) * 4 + 256)
    results: dict[str, dict[str, dict[str, dict[str, Any]]]] = {}
    folder = Path(tempfile.mkdtemp(prefix="canon-fanout-"))
    try:
        store = folder / "canon.db"  # seeded by the first server, reused by the next ones
        token = make_token(folder, store)
        for revision in revisions:
            for client in clients:
                rows: dict[str, dict[str, Any]] = {}
                for n in counts:
                    with serving(folder, store, args.serve_arg) as server:
                        rows[str(n)] = anyio.run(interruptible, measure, server, token, revision, client, n, args)
                    summary = {k: v["p50"] for k, v in rows[str(n)]["latency_ms"].items()}
                    print(f"fanout: {revision} {client} N={n} p50 ms: {json.dumps(summary)}", file=sys.stderr)
                _ratios(rows)
                results.setdefault(revision, {})[client] = rows
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return {
        "benchmark": "write → change-notification fan-out (upsert_node over HTTP, canon serve)",
        "node": URI,
        "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0], "fd_limit": fd_limit},
        "settings": {
            "writes": args.writes,
            "warmup": args.warmup,
            "timeout_s": args.timeout,
            "pause_s": args.pause,
            "seed": args.seed,
            "clients": clients,
            "client_processes": args.client_processes,
            "serve_args": args.serve_arg,
            "listeners": counts,
            "fastpath": SERVER_ENV.get("CANON_MCP_FASTPATH", "1") == "1",
        },
        "results": results,
        "verdict": _verdict(results),
        "wall_s": round(time.monotonic() - started, 1),
    }


def compact_json(value: Any) -> str:
    """Indented JSON with every innermost object or list on one line."""
    text = json.dumps(value, indent=1, ensure_ascii=False)
    return re.sub(r"([{\[])\n\s*([^{}\[\]]*?)\n\s*([}\]])", lambda m: m[1] + re.sub(r"\n\s*", " ", m[2]) + m[3], text)


def main() -> None:
    if len(sys.argv) == 7 and sys.argv[1] == "--listen-child":  # a listener process started by `run`
        url, revision, client, count, first = sys.argv[2:]
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's ^C reaches us too: the parent stops us
        anyio.run(listeners_main, url, revision, client, int(count), int(first))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--listeners", default="1,100,1000", help="listener counts, comma-separated")
    parser.add_argument("--revision", choices=("modern", "legacy", "both"), default="both")
    parser.add_argument("--writes", type=int, default=30, help="measured writes per listener count (default 30)")
    parser.add_argument("--warmup", type=int, default=3, help="unmeasured writes first (default 3)")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for every listener, per write")
    parser.add_argument("--client", default="raw,sdk", help="listener kinds, comma-separated: raw, sdk (default both)")
    parser.add_argument("--pause", type=float, default=0.1, help="seconds: the most to pause before each write")
    parser.add_argument("--seed", type=int, default=1, help="seed of the random pauses")
    parser.add_argument(
        "--serve-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="one more argument for `canon serve` (repeat for more), e.g. --serve-arg=--profile=agent",
    )
    parser.add_argument("--client-processes", type=int, default=1, help="listener processes (default 1)")
    parser.add_argument("--fastpath", choices=("on", "off"), default="on",
                        help="off: /mcp through the plain SDK path (CANON_MCP_FASTPATH=0)")  # fmt: skip
    args = parser.parse_args()
    SERVER_ENV["CANON_MCP_FASTPATH"] = "1" if args.fastpath == "on" else "0"
    if not set(args.client.split(",")) <= {"raw", "sdk"}:
        parser.error("--client takes raw, sdk or raw,sdk")
    try:
        print(compact_json(run(args)))
    except KeyboardInterrupt:
        print("fanout: interrupted; the server and listeners are stopped and the temporary files removed",
              file=sys.stderr)  # fmt: skip
        sys.exit(130)


if __name__ == "__main__":
    main()
