"""MCP over stdio: one process, one client; logs go to stderr only. Its start is what an agent waits for.

An agent spawns `canon serve --stdio` for every session and waits for the answer to its opening request
(`initialize`, or `server/discover` in 2026-07-28). Importing the MCP SDK is most of a start (docs/benchmarks.md),
and nothing in that answer needs the SDK (`core.mcp.handshake`). So (ADR 0036): while a thread imports the SDK side
(`core.mcp.stdio_sdk`), this module reads the client's first line from the standard input itself, a byte at a time
so that nothing behind that line is taken from the pipe before the SDK reads it, and if the line is a request of
the plain shape `opening_request` accepts, answers it at once. The SDK then serves the connection from that line
on, in the state it would have reached by itself: the line is replayed to it as the first message it reads, and
its own answer is compared with the one sent and not sent again (`core.mcp.stdio_sdk`). Any other first line is
replayed alike, and the SDK answers it.

`[server] mcp_fastpath = false` (`CANON_MCP_FASTPATH=0`) turns this off, as it turns off canon's answers on HTTP:
the SDK reads every line.

This module imports nothing of the SDK (a test enforces it); `core.mcp.stdio_sdk` is imported when it is needed.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import threading

from core.mcp.handshake import early_result, opening_request
from core.mcp.options import DEFAULT_OPTIONS, ServeOptions
from core.seam.instance import Instance

__all__ = ["read_line", "serve_stdio"]

STDIN, STDOUT = 0, 1
_SDK_SIDE = "core.mcp.stdio_sdk"


def serve_stdio(instance: Instance, options: ServeOptions = DEFAULT_OPTIONS) -> None:
    """Serve `instance` on stdin/stdout until the client closes stdin. The caller is the configured local principal."""
    if not instance.config.mcp_fastpath:
        from core.mcp.stdio_sdk import Opening, serve_on_sdk

        serve_on_sdk(instance, options, Opening())
        return
    loading = threading.Thread(target=_load_sdk_side, name="canon-sdk-import", daemon=True)
    loading.start()  # the SDK is imported while the client's first line is awaited and answered
    line = read_line(STDIN)
    request = opening_request(line)
    answered = None
    if request is not None:
        answered = early_result(request, instance.snapshot.registry.instructions())
        response = {"jsonrpc": "2.0", "id": request.id, "result": answered}
        _write_all(STDOUT, json.dumps(response, ensure_ascii=False, separators=(",", ":")).encode() + b"\n")
    loading.join()
    from core.mcp.stdio_sdk import Opening, serve_on_sdk

    serve_on_sdk(instance, options, Opening(line, None if request is None else request.id, answered))


def read_line(fd: int) -> bytes:
    """The next line on `fd`, newline included (without one at the end of the stream; empty at its end), read a byte
    at a time: whatever follows stays in the pipe for the next reader."""
    line = bytearray()
    while not line.endswith(b"\n"):
        byte = os.read(fd, 1)
        if not byte:
            break
        line += byte
    return bytes(line)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _load_sdk_side() -> None:
    # an import that fails here fails again, with its traceback, where serve_stdio imports the module itself
    with contextlib.suppress(Exception):
        importlib.import_module(_SDK_SIDE)
