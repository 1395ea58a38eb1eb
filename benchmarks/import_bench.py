"""`canon import` against the store's own speed, on SQLite and PostgreSQL, in one run.

    python benchmarks/import_bench.py --nodes 50000                      # both backends, this checkout
    python benchmarks/import_bench.py --nodes 50000 --ref main           # and the import of another commit
    python benchmarks/import_bench.py --nodes 20000 --backends sqlite    # one backend

One `canon synth` file (JSON Lines; about 3 edges per node) is imported into a new store of each backend by
`canon import` in a child process: wall clock, records/s, the canon process's CPU time (user + system), records per
CPU second (the steadier figure when other work shares the machine) and peak resident memory (`ru_maxrss`; the
PostgreSQL server's own CPU and memory are not in them). Beside it, in the same run and on the same file:

* **plain inserts**: a child process that parses the same file (`json.loads` per line) and inserts its nodes and
  edges into the same tables in one transaction, with no validation, no change log and no text index:
  `executemany` on SQLite (as `docs/operations/capacity.md` measured it), `COPY` on PostgreSQL. What the store
  takes when nothing is checked: the ceiling an import can approach, never reach (it writes the change log too);
* with `--ref REV`, the same `canon import` run from a `git worktree` of REV (removed afterwards), so a change
  is measured against the code before it under the same load.

The PostgreSQL server is the tests' (tests/postgres_server.py): a throwaway cluster with fsync and synchronous commit
off (SQLite keeps its full sync), or the server `$CANON_TEST_DATABASE_URL` names. Each run gets a database of its
own. Prints each figure to stderr as it is measured, then one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

PLAIN = r"""
import json, sys, time
backend, store, data = sys.argv[1:4]
started = time.perf_counter()
nodes, edges = [], []
with open(data, encoding="utf-8") as f:
    for line in f:
        r = json.loads(line)
        if r["kind"] == "node":
            readers = r.get("readers")
            nodes.append((r["id"], r["type"], r["id"], r.get("visibility", "internal"),
                          json.dumps(readers) if readers else None, json.dumps(r.get("properties", {}))))
        else:
            edges.append((r["source"], r["type"], r["target"], json.dumps(r.get("properties", {}))))
if backend == "sqlite":
    import sqlite3
    from core.store.sqlite import MIGRATIONS
    db = sqlite3.connect(store, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL"); db.execute("PRAGMA synchronous=FULL")
    for statement in MIGRATIONS[1]:
        db.execute(statement)
    db.execute("BEGIN")
    db.executemany("INSERT INTO nodes VALUES (?, ?, ?, ?, ?, ?, 1, 't', 't', 'b')", nodes)
    db.executemany("INSERT INTO edges VALUES (?, ?, ?, ?, 1, 't', 't', 'b')", edges)
    db.execute("COMMIT")
else:
    import psycopg
    with psycopg.connect(store) as db, db.cursor() as cursor:
        with cursor.copy("COPY nodes (id, type, key, visibility, readers, properties, revision, created_at, "
                         "updated_at, updated_by) FROM STDIN") as copy:
            for row in nodes:
                copy.write_row((*row, 1, "t", "t", "b"))
        with cursor.copy("COPY edges (source, type, target, properties, revision, created_at, updated_at, "
                         "updated_by) FROM STDIN") as copy:
            for row in edges:
                copy.write_row((*row, 1, "t", "t", "b"))
print(json.dumps({"seconds": time.perf_counter() - started}))
"""


def _run(command: list[str], cwd: Path, env: dict[str, str] | None = None) -> tuple[dict[str, Any], str]:
    """Run `command` in a child; (wall clock, CPU time and peak RSS of the child; its standard output)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as errors:  # files: no pipe to fill and block
        started = time.perf_counter()
        proc = subprocess.Popen(command, cwd=cwd, env=env, stdout=out, stderr=errors)
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        except BaseException:  # interrupted: the child must not outlive the benchmark (nor hold the server open)
            proc.kill()
            proc.wait()
            raise
        seconds = time.perf_counter() - started
        out.seek(0)
        errors.seek(0)
        printed, complaint = out.read().decode(), errors.read().decode(errors="replace")
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{' '.join(command[:6])} … failed ({status}): {complaint[-2000:]}")
    return {"seconds": round(seconds, 2), "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 2),
            "peak_rss_mib": round(usage.ru_maxrss / 1024, 1)}, printed  # fmt: skip


def canon_import(store: str, data: Path, code: Path) -> dict[str, Any]:
    """`canon import` of `data` into the new store `store`, run from the checkout `code`."""
    model = code / "schema" / "default" / "model.schema.json"
    command = [sys.executable, "-m", "core.app.cli", "--store", store, "--model", str(model), "import", str(data),
               "--no-progress"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(code)}  # that checkout's canon, ahead of the installed one
    measured, _ = _run(command, code, env)
    return measured


def plain_inserts(backend: str, store: str, data: Path) -> dict[str, Any]:
    """The same nodes and edges parsed and inserted with no checks (see the module's text)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    measured, out = _run([sys.executable, "-c", PLAIN, backend, store, str(data)], ROOT, env)
    measured["inserting_seconds"] = round(json.loads(out.strip().splitlines()[-1])["seconds"], 2)
    return measured


class RefCheckout:
    """A `git worktree` of `rev` in a temporary folder, removed on exit."""

    def __init__(self, rev: str, folder: Path) -> None:
        self.rev, self.path = rev, folder / "ref"

    def __enter__(self) -> Path:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(self.path), self.rev], check=True,
                       capture_output=True)  # fmt: skip
        return self.path

    def __exit__(self, *_: object) -> None:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(self.path)], check=False,
                       capture_output=True)  # fmt: skip


def _rate(records: int, measured: dict[str, Any]) -> dict[str, Any]:
    """With records per second of wall clock, and per second of the child's CPU (steadier on a shared machine)."""
    return {**measured, "records_per_s": round(records / measured["seconds"]),
            "records_per_cpu_s": round(records / max(measured["cpu_seconds"], 1e-9))}  # fmt: skip


def run(nodes: int, backends: list[str], ref: Path | None, folder: Path) -> dict[str, Any]:
    from core.app.synthetic import write_synthetic
    from tests.postgres_server import Server

    data = folder / "graph.jsonl"
    node_count, edge_count = write_synthetic(data, nodes)
    records = node_count + edge_count
    result: dict[str, Any] = {"nodes": node_count, "edges": edge_count, "records": records,
                              "file_mib": round(data.stat().st_size / 2**20, 1),
                              "load_average_at_start": [round(x, 2) for x in os.getloadavg()]}  # fmt: skip
    server = Server.start() if "postgresql" in backends else None
    try:
        names = iter(range(1_000_000))
        fresh: dict[str, Callable[[], str]] = {"sqlite": lambda: str(folder / f"store-{next(names)}.db")}
        if server is not None:
            fresh["postgresql"] = server.new_database
        for backend in backends:
            figures: dict[str, Any] = {}
            # into canon's tables: a new PostgreSQL database holds them, a new SQLite file gets them
            figures["plain_inserts"] = _rate(records, plain_inserts(backend, fresh[backend](), data))
            _report(backend, "plain inserts", figures["plain_inserts"])
            if ref is not None:
                figures["ref"] = _rate(records, canon_import(fresh[backend](), data, ref))
                _report(backend, "canon import (ref)", figures["ref"])
            figures["canon_import"] = _rate(records, canon_import(fresh[backend](), data, ROOT))
            _report(backend, "canon import", figures["canon_import"])
            figures["canon_over_plain"] = round(
                figures["canon_import"]["seconds"] / figures["plain_inserts"]["seconds"], 1
            )
            if ref is not None:
                figures["speedup_over_ref"] = round(figures["ref"]["seconds"] / figures["canon_import"]["seconds"], 2)
            result[backend] = figures
    finally:
        if server is not None:
            server.stop()
    result["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    return result


def _report(backend: str, label: str, figures: dict[str, Any]) -> None:
    print(f"{backend}: {label}: {json.dumps(figures)}", file=sys.stderr, flush=True)


def _unwind(signum: int, frame: object) -> None:
    """On SIGTERM, exit through the `finally` blocks: the server stops, the worktree and files are removed."""
    sys.exit(128 + signum)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--nodes", type=int, default=50_000, help="synthetic graph size (about 3 edges per node)")
    parser.add_argument("--backends", default="sqlite,postgresql", help="comma-separated (default: both)")
    parser.add_argument("--ref", help="also import with the code of this git revision (e.g. main), same run")
    args = parser.parse_args()
    backends = [backend.strip() for backend in args.backends.split(",") if backend.strip()]
    unknown = sorted(set(backends) - {"sqlite", "postgresql"})
    if unknown or not backends:
        parser.error(f"--backends: unknown {', '.join(unknown) or '(none given)'}; choose from sqlite, postgresql")
    signal.signal(signal.SIGTERM, _unwind)
    sys.path.insert(0, str(ROOT))
    with tempfile.TemporaryDirectory(prefix="canon-import-bench-") as name:
        folder = Path(name)
        if args.ref is None:
            print(json.dumps(run(args.nodes, backends, None, folder), indent=1))
            return
        with RefCheckout(args.ref, folder) as ref:
            result = run(args.nodes, backends, ref, folder)
            result["ref"] = args.ref
            print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
