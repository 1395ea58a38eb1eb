"""A rename declared in the model, applied to a store of N synthetic nodes: time and peak memory, next to two
baselines measured in the same run.

    python benchmarks/model_rename_bench.py --nodes 100000

The renaming model (version 2.0.0) renames the node type Person to Employee (40% of the nodes), the property
Person.title to job_title and the edge type member_of to belongs_to; adopting it moves those records in the
adopting transaction (`core.lang.model_migration`), then re-validates every record and rebuilds the key column and the
text index, as every model change does. Baselines, on copies of the same store:

* the same adoption without a rename: a model that only adds an optional property (what any model change costs);
* the old way: the renamed records (edited in a file beforehand, not timed) imported into a new store, which
  loses the change log and the audit log.

`of_which_the_move_alone` times `migrate` by itself (in a transaction rolled back): what the rename adds.

Each measurement runs in a fresh child process; `peak_rss_mib` is its VmHWM (the interpreter and imports
included), `rss_before_mib` its VmRSS just before the measured step. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

RENAMES = {"Person": "Employee", "member_of": "belongs_to"}


def renamed_document() -> dict[str, Any]:
    """The embedded model, version 2.0.0, with Person -> Employee, Person.title -> job_title, member_of ->
    belongs_to declared."""
    from core.lang.model import load_model

    document: dict[str, Any] = copy.deepcopy(dict(load_model().document))
    document["x-canon-model"]["version"] = "2.0.0"
    defs: dict[str, Any] = document["$defs"]
    for old, new in RENAMES.items():
        defs[new] = {**defs.pop(old), "x-canon-renamed-from": old}
    for definition in defs.values():
        edge = definition.get("x-canon-edge")
        if edge is not None:
            for end in ("source", "target"):
                edge[end] = [RENAMES.get(t, t) for t in edge[end]]
    employee = defs["Employee"]
    employee["properties"] = {("job_title" if k == "title" else k): v for k, v in employee["properties"].items()}
    employee["properties"]["job_title"] = {**employee["properties"]["job_title"], "x-canon-renamed-from": "title"}
    employee["required"] = ["job_title" if r == "title" else r for r in employee["required"]]
    employee["x-canon-node"]["text"] = ["job_title" if t == "title" else t for t in employee["x-canon-node"]["text"]]
    return document


def compatible_document() -> dict[str, Any]:
    """The embedded model, version 1.1.0, with one optional property added: a model change with no rename."""
    from core.lang.model import load_model

    document: dict[str, Any] = copy.deepcopy(dict(load_model().document))
    document["x-canon-model"]["version"] = "1.1.0"
    document["$defs"]["Team"]["properties"]["budget"] = {"description": "Yearly budget.", "type": "integer"}
    return document


def renamed_record(record: dict[str, Any]) -> dict[str, Any]:
    """An import record as the renaming model names it (the hand edit of the old way)."""
    out = {**record, "type": RENAMES.get(record["type"], record["type"])}
    if record.get("kind", "node") == "node" and record["type"] == "Person" and "title" in record["properties"]:
        props = dict(record["properties"])
        props["job_title"] = props.pop("title")
        out["properties"] = props
    return out


def _memory() -> dict[str, float]:
    found: dict[str, float] = {}
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith(("VmRSS:", "VmHWM:")):
                found[line.split(":")[0]] = int(line.split()[1]) / 1024
    return found


def _child(code: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def phase_adopt(store: str, document: str) -> str:
    """Open the store on the model in the file `document` (adopting it), timed."""
    return f"""
import json, sqlite3, time
from pathlib import Path
from benchmarks.model_rename_bench import _memory
from core.lang.model import load_model
from core.store.sqlite import SQLiteStore
model = load_model(Path({document!r}))
before = _memory()["VmRSS"]
t = time.perf_counter()
store = SQLiteStore.open(Path({store!r}), model, principal="bench")
elapsed = time.perf_counter() - t
stats = store.stats()
store.close()
with sqlite3.connect({store!r}) as db:
    job_titles = db.execute("SELECT count(*) FROM nodes WHERE json_type(properties, '$.job_title') IS NOT NULL")
    job_titles = job_titles.fetchone()[0]
print(json.dumps({{"seconds": elapsed, "rss_before_mib": before, "peak_rss_mib": _memory()["VmHWM"],
                   "nodes_by_type": stats.nodes_by_type, "edges_by_type": stats.edges_by_type,
                   "job_titles": job_titles}}))
"""


def phase_move(store: str, document: str) -> str:
    """The data move alone: `core.lang.model_migration.migrate` in a transaction that is rolled back, timed."""
    return f"""
import json, sqlite3, time
from pathlib import Path
from benchmarks.model_rename_bench import _memory
from core.lang.model import load_model
from core.lang.model_migration import SQLITE, migrate
model = load_model(Path({document!r}))
db = sqlite3.connect({store!r}, isolation_level=None)
stored = json.loads(db.execute("SELECT value FROM meta WHERE key = 'model'").fetchone()[0])
before = _memory()["VmRSS"]
db.execute("BEGIN IMMEDIATE")
t = time.perf_counter()
moved = migrate(stored, model, db.execute, SQLITE)
elapsed = time.perf_counter() - t
db.execute("ROLLBACK")
print(json.dumps({{"seconds": elapsed, "rss_before_mib": before, "peak_rss_mib": _memory()["VmHWM"],
                   "moved": {{str(m.rename): m.records for m in moved}}}}))
"""


def phase_import(data: str, store: str, document: str | None) -> str:
    model = f"Path({document!r})" if document else "None"
    return f"""
import json, time
from pathlib import Path
from benchmarks.model_rename_bench import _memory
from core.lang.model import load_model
from core.store.sqlite import SQLiteStore
from core.store.interchange import import_path
store = SQLiteStore.open(Path({store!r}), load_model({model}))
before = _memory()["VmRSS"]
t = time.perf_counter()
report = import_path(store, Path({data!r}), principal="bench")
elapsed = time.perf_counter() - t
store.close()
print(json.dumps({{"seconds": elapsed, "rss_before_mib": before, "peak_rss_mib": _memory()["VmHWM"],
                   "nodes": report.nodes, "edges": report.edges}}))
"""


def _copy(store: Path, target: Path) -> str:
    for suffix in ("", "-wal"):
        if Path(f"{store}{suffix}").exists():
            shutil.copyfile(f"{store}{suffix}", f"{target}{suffix}")
    return str(target)


def _figures(measured: dict[str, Any]) -> dict[str, float]:
    return {k: round(measured[k], 2) for k in ("seconds", "rss_before_mib", "peak_rss_mib")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=100_000, help="synthetic graph size (default: 100000)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    os.environ["PYTHONPATH"] = os.pathsep.join([str(HERE.parent), os.environ.get("PYTHONPATH", "")])
    from core.app.synthetic import write_synthetic

    with tempfile.TemporaryDirectory(prefix="canon-rename-bench-") as folder:
        tmp = Path(folder)
        data, renamed_data = tmp / "graph.jsonl", tmp / "renamed.jsonl"
        write_synthetic(data, args.nodes, args.seed)
        with data.open(encoding="utf-8") as source, renamed_data.open("w", encoding="utf-8") as target:
            target.writelines(json.dumps(renamed_record(json.loads(line))) + "\n" for line in source)
        renaming, compatible = tmp / "renaming.schema.json", tmp / "compatible.schema.json"
        renaming.write_text(json.dumps(renamed_document()), encoding="utf-8")
        compatible.write_text(json.dumps(compatible_document()), encoding="utf-8")
        store = tmp / "canon.db"
        imported = _child(phase_import(str(data), str(store), None))
        move = _child(phase_move(str(store), str(renaming)))
        rename = _child(phase_adopt(_copy(store, tmp / "rename.db"), str(renaming)))
        plain = _child(phase_adopt(_copy(store, tmp / "plain.db"), str(compatible)))
        reimport = _child(phase_import(str(renamed_data), str(tmp / "reimport.db"), str(renaming)))
    moved_nodes = rename["nodes_by_type"].get("Employee", 0)
    moved_edges = rename["edges_by_type"].get("belongs_to", 0)
    print(json.dumps({
        "input": f"synthetic n={args.nodes} seed={args.seed}", "nodes": imported["nodes"], "edges": imported["edges"],
        "renamed": {"Person -> Employee nodes": moved_nodes, "member_of -> belongs_to edges": moved_edges,
                    "Person.title -> job_title values": rename["job_titles"]},
        "rename": _figures(rename),
        "of_which_the_move_alone": {**_figures(move), "records": move["moved"]},
        "baseline_model_change_without_rename": _figures(plain),
        "baseline_export_edit_reimport": _figures(reimport),
        "rename_vs_plain_model_change": round(rename["seconds"] / plain["seconds"], 2),
        "rename_vs_reimport": round(rename["seconds"] / reimport["seconds"], 2),
    }, indent=1))  # fmt: skip


if __name__ == "__main__":
    main()
