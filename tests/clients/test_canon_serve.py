"""What a client that starts `canon serve` itself relies on: the announced endpoint is ready when announced.

Scripts, CI jobs and harnesses start `canon serve --port 0`, read the URL it prints, and connect at once
(the real-client tests here do the same). So the line must not come before the port accepts connections.
"""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path
from urllib.parse import urlsplit

from tests.clients._processes import outputs, start, stop
from tests.clients.conftest import SERVING


def test_canon_serve_accepts_connections_as_soon_as_it_says_it_is_serving(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CANON_")}
    command = [sys.executable, "-m", "core.app.cli", "--store", tmp_path / "canon.db", "serve", "--port", "0"]
    process = start(command, cwd=tmp_path, env=env)
    stdout, stderr = outputs(process)
    try:
        match = SERVING.search(stderr.wait_for(SERVING.search, timeout=60))
        assert match is not None
        address = urlsplit(match[1])
        try:
            socket.create_connection((address.hostname, address.port), timeout=5).close()
        except ConnectionRefusedError:
            raise AssertionError(f"canon said it was serving at {match[1]} but refused a connection there") from None
    finally:
        stop(process)
        stdout.close()
        stderr.close()
