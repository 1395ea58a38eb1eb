"""Resident memory of a serving process and its walk workers, and the walks' p50, for 1, 2 and 4 workers.

    .venv/bin/python benchmarks/index_memory_bench.py --store big.db --workers 1 2 4 --calls 30 --ref main

For each worker count, in a fresh process: open the instance as `canon serve` does (`open_instance`, the graph
index loaded from its file beside the store when it is sound), wait until every walk worker has loaded its index,
then run `get_neighbors` at depth 2 and `find_paths` `--calls` times each through the dispatcher (the walks run in
the workers) and read, for the serving process and each worker, `/proc/<pid>/smaps_rollup`: RSS, PSS (each shared
page divided among the processes that map it) and USS (private pages: what the process alone costs). The sum of
PSS is what the machine holds for them. Issue 30's target: one serving process with its workers within 1.3× of a
single process (each extra worker at most 200 MiB of its own).

With `--ref REV`, the same is measured for a `git worktree` of REV (run from that checkout, its own script), each
count for REV then for this checkout, interleaved, so both see the same machine at the same time. Each side runs on
a copy of the store of its own (the index file beside it is of that side's format), made in a temporary folder and
opened once first so that its index file exists (`--keep` keeps the copies there for another run).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# the checkout whose canon is measured: this one, or (a child of `--ref`) the worktree named by BENCH_CODE
sys.path.insert(0, os.environ.get("BENCH_CODE") or str(Path(__file__).resolve().parent.parent))

REPO = Path(__file__).resolve().parent.parent


def rollup(pid: int) -> dict[str, float]:
    """RSS, PSS and USS (private clean + dirty) of process `pid`, in MiB."""
    fields: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]:
        name, _, rest = line.partition(":")
        fields[name.strip()] = int(rest.split()[0])
    uss = fields["Private_Clean"] + fields["Private_Dirty"]
    return {"rss": fields["Rss"] / 1024, "pss": fields["Pss"] / 1024, "uss": uss / 1024}


def measure(store: str, workers: int, calls: int) -> dict[str, Any]:
    """One instance with `workers` walk workers (run in this process: the caller spawns one per count)."""
    from core.ops.config import Config
    from core.seam.instance import open_instance
    from core.values.principal import LOCAL

    started = time.perf_counter()
    instance = open_instance(Config(store=store, walk_workers=workers))
    try:
        opened = time.perf_counter() - started
        walkers = instance.walkers
        assert walkers is not None
        if not walkers.ready(900):
            raise SystemExit("index_memory_bench: the walk workers did not load their index in 900 s")
        ready = time.perf_counter() - started
        dispatcher = instance.snapshot.dispatcher
        index = instance.index
        assert index is not None
        public = sorted(n for n in index.graph if index.graph.nodes[n]["visibility"] == "public")  # either index
        ids = public[:: max(1, len(public) // calls)][:calls]
        timings: dict[str, list[float]] = {"get_neighbors_depth_2": [], "find_paths": []}
        for i, id_ in enumerate(ids):
            other = ids[(i + 1) % len(ids)]
            for name, tool, arguments in (
                ("get_neighbors_depth_2", "get_neighbors", {"id": id_, "depth": 2, "limit": 50}),
                ("find_paths", "find_paths", {"source": id_, "target": other, "max_depth": 4, "limit": 20}),
            ):
                t = time.perf_counter()
                result = dispatcher.call_tool(LOCAL, "bench", tool, arguments)
                timings[name].append((time.perf_counter() - t) * 1000)
                assert not result.is_error, result.error
        memory = {"serving": rollup(os.getpid()), "workers": [rollup(pid) for pid in walkers.pids()]}
        total_pss = memory["serving"]["pss"] + sum(w["pss"] for w in memory["workers"])
        return {
            "workers": workers, "loaded_from_file": {"serving": index.loaded_at is not None,
                                                     "workers": walkers.loaded},
            "open_s": round(opened, 1), "workers_ready_s": round(ready, 1),
            "memory_mib": memory, "total_pss_mib": round(total_pss, 1),
            "p50_ms": {k: round(statistics.median(v), 2) for k, v in timings.items()},
            "answered_by_workers": walkers.answered,
        }  # fmt: skip
    finally:
        instance.close()


PREPARE = """
import sys
from core.ops.config import Config
from core.seam.instance import open_instance
instance = open_instance(Config(store=sys.argv[1], walk_workers=0))
try:
    instance.save_index()
finally:
    instance.close()
"""  # open the store once (as `canon serve` does) and wait for its index file: each measured start loads it


def _copy(store: str, folder: Path) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / Path(store).name
    for suffix in ("", "-wal", "-shm"):
        if Path(f"{store}{suffix}").exists() and not Path(f"{target}{suffix}").exists():
            shutil.copyfile(f"{store}{suffix}", f"{target}{suffix}")
    return str(target)


def _child(code: Path, store: str, calls: int, *mode: str) -> dict[str, Any] | None:
    """Run `mode` (`--one N`, or `--prepare`) for `store` with the checkout `code`'s canon (and its own script)."""
    env = {**os.environ, "PYTHONPATH": str(code), "BENCH_CODE": str(code)}  # that checkout's canon, not this one's
    if mode == ("--prepare",):
        command = [sys.executable, "-c", PREPARE, store]
    else:  # this script (the same calls on both sides) over that checkout's canon
        command = [sys.executable, __file__, "--store", store, "--calls", str(calls), *mode]
    done = subprocess.run(command, cwd=code, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"index_memory_bench: {code} {mode} failed:\n{done.stderr[-3000:]}")
    lines = done.stdout.strip().splitlines()
    return json.loads(lines[-1]) if lines else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--store", required=True, help="an existing SQLite store (with --ref: copied)")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4], help="worker counts (default: 1 2 4)")
    parser.add_argument("--calls", type=int, default=30, help="calls of each walk (default: 30)")
    parser.add_argument("--ref", help="also measure this git revision (a worktree of it), interleaved")
    parser.add_argument("--keep", type=Path, help="with --ref: the folder for the copies of the store (kept)")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # a child measuring one count
    args = parser.parse_args()
    if args.one is not None:
        print(json.dumps(measure(args.store, args.one, args.calls)))
        return
    if args.ref is None:
        results = [_child(REPO, args.store, args.calls, "--one", str(count)) for count in args.workers]
        print(json.dumps({"load_average_1min": round(os.getloadavg()[0], 2), "runs": results}, indent=1))
        return
    folder = args.keep or Path(tempfile.mkdtemp(prefix="index-memory-"))
    checkout = folder / "ref-checkout"
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(checkout), args.ref], check=True,
                   capture_output=True)  # fmt: skip
    try:
        sides = {
            "ref": (checkout, _copy(args.store, folder / "ref")),
            "this": (REPO, _copy(args.store, folder / "this")),
        }
        for code, store in sides.values():
            _child(code, store, args.calls, "--prepare")
        runs: dict[str, list[Any]] = {"ref": [], "this": []}
        loads = []
        for count in args.workers:
            for side, (code, store) in sides.items():
                loads.append(round(os.getloadavg()[0], 2))
                runs[side].append(_child(code, store, args.calls, "--one", str(count)))
        print(json.dumps({"ref": args.ref, "load_average_1min": loads, "runs": runs}, indent=1))
    finally:
        subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(checkout)], check=False,
                       capture_output=True)  # fmt: skip
        if args.keep is None:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
