"""`canon serve` with `[logging] format = "json"` and `access_log = true`: every stderr log line is one JSON
object, and each HTTP request gets an access line naming its route (the path's first segment) and status."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import httpx2

from tests.conftest import copy_store
from tests.mcp.conftest import serving

API, HEALTH = ("GET", "/api", 404), ("GET", "/healthz", 200)


def logged(lines: list[str]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in lines if line.startswith("{")]


def accessed(lines: list[str]) -> list[tuple[str, str, int]]:
    """The access lines' method, route and status, in the order logged."""
    return [(r["method"], r["route"], r["status"]) for r in logged(lines) if r.get("event") == "access"]


def both_logged(seen: list[tuple[str, str, int]]) -> bool:
    """The test's two requests logged, in order (start-up's readiness checks log `/healthz` lines before them)."""
    return API in seen and HEALTH in seen[seen.index(API) :]


def test_canon_serve_logs_json_lines_and_one_access_line_per_request(
    seed_template: Path,
    tmp_path: Path,
) -> None:
    store = copy_store(seed_template, tmp_path / "canon.db")
    (tmp_path / "canon.toml").write_text('[logging]\nformat = "json"\naccess_log = true\n', encoding="utf-8")
    with serving(store, cwd=tmp_path) as process:
        assert httpx2.get(f"{process.base}/api/nodes/no-such-node").status_code == 404
        assert httpx2.get(f"{process.base}/healthz").status_code == 200
        deadline, tick = time.monotonic() + 10, threading.Event()
        while not both_logged(accessed(process.stderr)) and time.monotonic() < deadline:
            tick.wait(0.02)  # a poll: the server writes its log line after the response, on its own schedule
        text = process.output()
    records = logged(text.splitlines())
    seen = accessed(text.splitlines())
    assert both_logged(seen), seen
    assert seen.count(API) == 1, "one access line per request"
    assert all({"time", "level", "logger", "message"} <= set(r) for r in records)
    assert "no-such-node" not in text, "the access log names the route, never the rest of the path"
    not_json = [line for line in text.splitlines() if line.strip() and not line.startswith(("{", "canon: "))]
    assert not_json == [], "every log line is JSON (canon's start-up announcement is not a log line)"
