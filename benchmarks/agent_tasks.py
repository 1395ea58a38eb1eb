"""The agent-task benchmark: realistic questions over the sample organisation, answered over stdio by canon and by
`@modelcontextprotocol/server-memory` loaded with the same data, each checked and scored by what the agent read.

    .venv/bin/python benchmarks/agent_tasks.py                       # canon (agent profile) and server-memory
    .venv/bin/python benchmarks/agent_tasks.py --before 5f2f63c      # and canon at that commit, same run

Each server is started fresh (canon on a fresh store it seeds itself; server-memory on a JSONL file written from
`schema/default/seed.json`, see `benchmarks/peer_memory.py`) and spoken to in raw newline-delimited JSON-RPC,
protocol 2025-11-25. Every byte the client reads from the server's stdout counts: the `initialize` answer, the
`tools/list` answer and every `tools/call` answer of every question. A set-up step before the questions (not
counted) edits two nodes on each server, so "what changed since revision N" has an answer. The questions, their
expected answers (computed from the seed file, not from canon) and each server's fixed call sequence are in
`benchmarks/agent_questions.py`. A question counts as answered when the answer a script extracted from what it
received equals the expected one. Tokens are bytes/4 (no tokenizer that runs offline from a package is assumed).

`--before REF` exports REF with `git archive` and runs canon's side again from it (same interpreter and
dependencies, that folder first on PYTHONPATH), with the profile REF offers. Prints a Markdown table per
question and the totals, and with `--json` the raw figures.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # run as a script: `benchmarks` is importable from the repository root

from benchmarks.agent_questions import CHANGED, QUESTIONS, Memory, Question, Seed, set_up  # noqa: E402
from benchmarks.peer_memory import NODE22, install_peer, write_memory_file  # noqa: E402
from benchmarks.stdio_wire import Wire  # noqa: E402

REPO = HERE.parent
Json = dict[str, Any]


@dataclass
class Score:
    """One question on one server: whether it was answered right, with what it cost."""

    answered: bool
    received: int
    calls: int
    answer: Any = None


@dataclass
class Run:
    """One server's run: what the start cost (initialize + tools/list), and each question."""

    server: str
    start: int
    scores: list[Score]

    @property
    def total(self) -> int:
        return self.start + sum(s.received for s in self.scores)


def ask(wire: Wire, questions: tuple[Question, ...], seed: Seed, script: Callable[[Question], Any]) -> list[Score]:
    scores: list[Score] = []
    for question in questions:
        before, calls = wire.received, wire.calls
        try:
            answer = script(question)
        except (RuntimeError, ValueError, KeyError, StopIteration) as exc:  # a script that could not finish
            answer = f"failed: {exc}"
        answered = answer is not None and answer == question.expected(seed)
        scores.append(Score(answered, wire.received - before, wire.calls - calls, answer))
    return scores


def run_canon(source: Path, profile: str, folder: Path, seed: Seed, label: str) -> Run:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("CANON_")}, "PYTHONPATH": str(source)}
    command = [sys.executable, "-m", "core.app.cli", "--store", str(folder / f"{label}.db"), "serve", "--stdio",
               "--profile", profile, "--log-level", "warning"]  # fmt: skip
    wire = Wire(command, env, folder, "agent-tasks")
    try:
        wire.start()
        listed = wire.request("tools/list", {})
        start = wire.received
        agent = set_up(wire.tool, listed)
        wire.received, wire.calls = start, 0  # the set-up is not the agent's
        scores = ask(wire, QUESTIONS, seed, lambda q: q.canon(agent))
    finally:
        wire.close()
    return Run(label, start, scores)


def run_memory(node: Path, folder: Path, seed: Seed) -> Run:
    entry, version = install_peer(node)
    data = write_memory_file(folder, list(seed.nodes.values()), list(seed.edges), scalars=True)
    wire = Wire([str(node), str(entry)], {**os.environ, "MEMORY_FILE_PATH": str(data)}, folder, "agent-tasks")
    try:
        wire.start()
        wire.request("tools/list", {})
        start = wire.received
        observation = [{"entityName": name, "contents": ["edited: by the agent-task set-up"]} for name in CHANGED]
        wire.tool("add_observations", {"observations": observation})
        wire.received, wire.calls = start, 0
        agent = Memory(wire.tool)
        scores = ask(wire, QUESTIONS, seed, lambda q: None if q.memory is None else q.memory(agent))
    finally:
        wire.close()
    return Run(f"server-memory {version}", start, scores)


def export(ref: str, folder: Path) -> Path:
    folder.mkdir()
    archive = subprocess.run(["git", "archive", ref], cwd=REPO, check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return folder


def table(runs: list[Run]) -> str:
    head = "| # | question | " + " | ".join(f"{r.server}: bytes (calls)" for r in runs) + " |"
    lines = [head, "|" + "---|" * (len(runs) + 2)]
    for i, question in enumerate(QUESTIONS, start=1):
        cells = [f"{s.received:,} ({s.calls})" + ("" if s.answered else " ✗") for s in (r.scores[i - 1] for r in runs)]
        lines.append(f"| {i} | {question.text} | " + " | ".join(cells) + " |")
    lines.append("| | start (`initialize` + `tools/list`) | " + " | ".join(f"{r.start:,}" for r in runs) + " |")
    lines.append("| | **total bytes** | " + " | ".join(f"**{r.total:,}**" for r in runs) + " |")
    lines.append("| | ≈ tokens (bytes/4) | " + " | ".join(f"{r.total // 4:,}" for r in runs) + " |")
    lines.append("| | answered right | " + " | ".join(
        f"{sum(s.answered for s in r.scores)} of {len(r.scores)}" for r in runs) + " |")  # fmt: skip
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--before", help="a git ref of canon to run the same questions on, e.g. 5f2f63c")
    parser.add_argument("--before-profile", default="agent", help="the profile to serve REF with (default: agent)")
    parser.add_argument("--node", type=Path, default=NODE22, help="Node 22 binary (default: scripts/test's)")
    parser.add_argument("--json", action="store_true", help="print the raw figures as JSON as well")
    options = parser.parse_args()
    seed, began = Seed.load(), time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="canon-agent-tasks-") as name:
        folder = Path(name)
        runs = [run_canon(REPO, "agent", folder, seed, "canon (agent profile)"),
                run_canon(REPO, "full", folder, seed, "canon (full profile)")]  # fmt: skip
        if options.before:
            source = export(options.before, folder / "before")
            runs.append(run_canon(source, options.before_profile, folder, seed, f"canon {options.before}"))
        runs.append(run_memory(options.node, folder, seed))
    print(table(runs))
    canon, memory = runs[0], runs[-1]
    print(f"\nserver-memory / canon (agent profile), total bytes: {memory.total / canon.total:.1f}x")
    if options.before:
        print(f"canon now / canon {options.before}: {canon.total / runs[-2].total:.1%}")
    print(f"run: {time.perf_counter() - began:.0f} s")
    if options.json:
        figures = [{"server": r.server, "start": r.start, "total": r.total, "questions": [vars(s) for s in r.scores]}
                   for r in runs]  # fmt: skip
        print(json.dumps(figures, indent=1, default=str))


if __name__ == "__main__":
    main()
