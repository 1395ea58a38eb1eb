"""A process killed with SIGKILL leaves the store consistent: no partial import, no lost acknowledged write."""

from __future__ import annotations

import os
import queue
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

import pytest

from core.model import default_model_path, load_model
from core.store.sqlite import SQLiteStore
from core.synthetic import write_synthetic

HERE = Path(__file__).resolve().parent
DEADLINE_S = 60.0


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("CANON_")}


def _stop(proc: subprocess.Popen[Any]) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=30)


@pytest.mark.slow
def test_sigkill_during_a_large_import_leaves_no_partial_import(tmp_path: Path) -> None:
    data = tmp_path / "synthetic.jsonl"
    write_synthetic(data, 20_000)
    store_path = tmp_path / "canon.db"
    # --model given explicitly: a new store is not seeded, so it holds only what the import writes
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "core.cli",
            "--model",
            str(default_model_path()),
            "--store",
            str(store_path),
            "import",
            str(data),
            "--progress",
        ],
        cwd=tmp_path,
        env=_clean_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    seen = b""
    try:
        assert proc.stderr is not None
        fd = proc.stderr.fileno()
        deadline = time.monotonic() + DEADLINE_S
        while b"writing" not in seen:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"no 'writing' progress within {DEADLINE_S} s; stderr so far: {seen[-500:]!r}"
            ready, _, _ = select.select([fd], [], [], remaining)
            if ready:
                chunk = os.read(fd, 65536)
                assert chunk, f"the import ended before writing anything; stderr: {seen[-500:]!r}"
                seen += chunk
        proc.send_signal(signal.SIGKILL)
        returncode = proc.wait(timeout=30)
    finally:
        _stop(proc)
        if proc.stderr is not None:
            proc.stderr.close()

    assert returncode == -signal.SIGKILL
    store = SQLiteStore.open(store_path, load_model())
    try:
        stats = store.stats()
        assert (stats.nodes, stats.edges) == (0, 0)
        assert store.integrity_check() == "ok"
    finally:
        store.close()


def _line_reader(stream: IO[str], lines: queue.Queue[str | None]) -> threading.Thread:
    """Feed `lines` from `stream` in a thread (None at the end), so the test can wait with a deadline."""

    def run() -> None:
        for line in stream:
            lines.put(line)
        lines.put(None)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_sigkill_during_a_write_loop_loses_no_acknowledged_write(tmp_path: Path) -> None:
    store_path = tmp_path / "canon.db"
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "_write_loop.py"), str(store_path)],
        cwd=tmp_path,
        env=_clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    acks: list[tuple[int, str]] = []
    lines: queue.Queue[str | None] = queue.Queue()
    try:
        assert proc.stdout is not None
        reader = _line_reader(proc.stdout, lines)
        deadline = time.monotonic() + DEADLINE_S
        while len(acks) < 200:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"only {len(acks)} acks within {DEADLINE_S} s"
            line = lines.get(timeout=remaining)
            assert line is not None, f"the writer exited after {len(acks)} acks (exit {proc.poll()})"
            word, revision, node_id = line.split()
            assert word == "ack"
            acks.append((int(revision), node_id))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        reader.join(timeout=30)
    finally:
        _stop(proc)
        if proc.stdout is not None:
            proc.stdout.close()

    # complete lines printed before the kill landed are acknowledged writes too
    while True:
        try:
            line = lines.get_nowait()
        except queue.Empty:
            break
        if line is None or not line.endswith("\n"):
            break
        word, revision, node_id = line.split()
        acks.append((int(revision), node_id))

    assert proc.returncode == -signal.SIGKILL
    store = SQLiteStore.open(store_path, load_model())
    try:
        found = store.nodes([node_id for _, node_id in acks])
        missing = [node_id for _, node_id in acks if node_id not in found]
        assert missing == []
        assert all(found[node_id].revision == revision for revision, node_id in acks)
        assert store.revision() >= acks[-1][0]
        assert store.integrity_check() == "ok"
    finally:
        store.close()
