"""What an agent receives from canon, in bytes and ≈ tokens (bytes/4), before and after a change, in one run.

    .venv/bin/python benchmarks/context_budget.py                       # this checkout only
    .venv/bin/python benchmarks/context_budget.py --before <git ref>    # and <git ref>, side by side

Each row is the size of the JSON-RPC answer line a client reads over stdio (raw newline-delimited JSON-RPC,
protocol 2025-11-25), from a fresh `canon serve --stdio` per model and profile on a fresh store:

* `tools/list` with the full and the agent profile, on the default model (seeded with the sample data) and on
  synthetic models of 7, 50 and 200 node types (`core.app.synthetic.synthetic_model`, no data);
* the largest single tool definition of the full profile;
* `get_neighbors` of one team at depth 1 and 2 (the default page), plain and with `summary`, and of a service;
* `find_nodes` of two types (the default page);
* `describe_model`; the server `instructions`.

`--before REF` exports REF with `git archive` into a temporary folder and runs the same rows with that folder first
on PYTHONPATH (same interpreter, same dependencies), so both columns come from one machine in one run. Tokens are
bytes/4: no tokenizer is assumed. Prints a Markdown table and, with `--json`, the raw figures.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # run as a script: `benchmarks` is importable from the repository root

from benchmarks.stdio_wire import Wire  # noqa: E402

TEAM = "team-payments"  # a node of the sample data with many neighbours


def serve(source: Path, folder: Path, profile: str, model: Path | None) -> Wire:
    """One `canon serve --stdio` of the code in `source`, on a new store in `folder`."""
    env = {**os.environ, "PYTHONPATH": str(source)}
    command = [sys.executable, "-m", "core.app.cli", "--store", str(folder / f"{profile}.db")]
    command += ["--model", str(model)] if model else []
    command += ["serve", "--stdio", "--profile", profile, "--log-level", "warning"]
    return Wire(command, env, folder, "context_budget")


def measure(source: Path, models: dict[str, Path | None]) -> dict[str, int | str]:
    """Every row, for the code in `source`."""
    rows: dict[str, int | str] = {}
    for label, model in models.items():
        for profile in ("full", "agent"):
            with tempfile.TemporaryDirectory() as folder:
                server = serve(source, Path(folder), profile, model)
                try:
                    init = server.start()
                    listed = server.request("tools/list", {})
                    rows[f"tools/list, {profile}, {label}"] = server.last_size
                    if label != "default":
                        continue
                    rows[f"instructions ({profile})"] = len(init.get("instructions", "").encode())
                    if profile == "full":
                        rows["largest tool definition"] = max(len(json.dumps(t, separators=(",", ":")))
                                                              for t in listed["tools"])  # fmt: skip
                    for name, arguments in _calls():
                        server.request("tools/call", {"name": name, "arguments": arguments})
                        rows[f"{name} {json.dumps(arguments)} ({profile})"] = server.last_size
                finally:
                    server.close()
    return rows


def _calls() -> list[tuple[str, dict[str, Any]]]:
    return [
        ("get_neighbors", {"id": TEAM, "depth": 1}),
        ("get_neighbors", {"id": TEAM, "depth": 2}),
        ("get_neighbors", {"id": TEAM, "depth": 1, "summary": True}),
        ("get_neighbors", {"id": "svc-checkout-api"}),
        ("find_nodes", {"type": "Service"}),
        ("find_nodes", {"type": "Decision"}),
        ("describe_model", {}),
    ]


def synthetic_models(folder: Path, sizes: list[int]) -> dict[str, Path | None]:
    sys.path.insert(0, str(REPO))
    from core.app.synthetic import synthetic_model

    models: dict[str, Path | None] = {"default": None}
    for n in sizes:
        path = folder / f"synthetic-{n}.json"
        path.write_text(json.dumps(synthetic_model(n)))
        models[f"{n} types"] = path
    return models


def export(ref: str, folder: Path) -> Path:
    folder.mkdir()
    archive = subprocess.run(["git", "archive", ref], cwd=REPO, check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return folder


def table(after: dict[str, int | str], before: dict[str, int | str] | None) -> str:
    head = "| what an agent receives | before, bytes | ≈ tokens | after, bytes | ≈ tokens |" if before else (
        "| what an agent receives | bytes | ≈ tokens |")  # fmt: skip
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for key, value in after.items():
        cells = []
        if before is not None:
            old = before.get(key, "—")
            cells += [
                f"{old:,}" if isinstance(old, int) else str(old),
                f"{old // 4:,}" if isinstance(old, int) else "—",
            ]
        cells += [f"{value:,}" if isinstance(value, int) else str(value),
                  f"{value // 4:,}" if isinstance(value, int) else "—"]  # fmt: skip
        lines.append(f"| {key} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", help="a git ref to measure too, e.g. main")
    parser.add_argument("--types", default="7,50,200", help="sizes of the synthetic models (node types)")
    parser.add_argument("--json", action="store_true", help="print the raw figures as JSON as well")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        models = synthetic_models(Path(folder), [int(n) for n in options.types.split(",")])
        before = measure(export(options.before, Path(folder) / "before"), models) if options.before else None
        after = measure(REPO, models)
    print(table(after, before))
    if options.json:
        print(json.dumps({"before": before, "after": after}, indent=2))


if __name__ == "__main__":
    main()
