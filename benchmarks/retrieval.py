"""Retrieval benchmark: how well `search` ranks the sample data, against today's substring search and plain BM25.

    python benchmarks/retrieval.py                       # relevance on SQLite: a Markdown table per kind
    python benchmarks/retrieval.py --backend postgresql  # the same on a throwaway PostgreSQL server
    python benchmarks/retrieval.py --json out.json       # also the figures as JSON
    python benchmarks/retrieval.py latency --nodes 10000 100000   # p50/p95/p99 over synthetic stores, both backends
    python benchmarks/retrieval.py latency --million     # adds the 1,000,000-node store
    python benchmarks/retrieval.py latency --store a.db postgresql://…/db   # existing stores (migrated if older)

Relevance: the query set (benchmarks/retrieval_queries.json, written by reading schema/default/seed.json, with
graded judgements: 3 the best answer, 2 highly relevant, 1 relevant) runs against a store holding the sample data,
through the dispatcher in-process, for three rankers:

* `search`: the tool `search` with `{"query": q, "limit": 10}`, its `items[*].id` in rank order (reported as
  missing when the registry has no such tool); `search summary` the same with `"summary": true` (its bytes are
  a default page of summary hits);
* `substring`: today's `find_nodes` with `text` and no `type` (one call over every type, as a client would make
  it; its order is id order);
* `bm25`: textbook Okapi BM25 (k1 1.2, b 0.75, lowercase word tokens, no stemming) over the same text properties
  `find_nodes` searches (each node type's `text` in the model), written here as the reference.

Per kind and overall: nDCG@10 (graded gain, log2 discount, the ideal from the judgements), recall@10 (of the ids
judged 1 or more), MRR of the first grade-3 answer, the share of queries with no result, and bytes per query (the
JSON answer as the structured content carries it; for BM25, the `find_nodes`-shaped page of its ten nodes), and
p50/p95 of the time each answer took (in-process, through the dispatcher; `search` ranks afresh for each query,
no kept ranking; BM25's time is its ranking over an in-memory index, without reading the store).

Latency: the same synthetic graph `canon synth` writes, imported into a new store of each size on each backend,
then `search` and `find_nodes` text called in turn over `SYNTHETIC_QUERIES`: p50/p95/p99 per tool.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Generator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from core.index.search import forget_rankings  # noqa: E402
from core.ops.config import Config  # noqa: E402
from core.seam.instance import Instance, open_instance  # noqa: E402
from core.values.principal import Principal  # noqa: E402

QUERIES = Path(__file__).with_name("retrieval_queries.json")
KINDS = ("exact_name", "scattered_words", "paraphrase_synonym", "acronym", "typo", "question",
         "person_by_role_or_place", "cross_type_topic", "substring_ranks_low")  # fmt: skip
RANKERS = ("search", "search summary", "substring", "bm25")
DEPTH = 10
ADMIN = Principal("bench-retrieval", frozenset({"admin"}))


@dataclass(frozen=True)
class Query:
    text: str
    kind: str
    judgements: Mapping[str, int]


def load_queries(path: Path = QUERIES) -> list[Query]:
    """The query set; a query of an unknown kind or a grade outside 1..3 is an error naming the query."""
    data = json.loads(path.read_text(encoding="utf-8"))
    queries: list[Query] = []
    for number, item in enumerate(data["queries"]):
        where = f"{path.name}: query {number} ({item.get('query')!r})"
        if item["kind"] not in KINDS:
            raise ValueError(f"{where}: unknown kind {item['kind']!r}; expected one of {', '.join(KINDS)}")
        judgements = dict(item["judgements"])
        if not judgements or any(g not in (1, 2, 3) for g in judgements.values()):
            raise ValueError(f"{where}: judgements must grade at least one id, each 1, 2 or 3")
        queries.append(Query(item["query"], item["kind"], judgements))
    return queries


# --- metrics -------------------------------------------------------------------------------------------------


def ndcg(ranked: Sequence[str], judgements: Mapping[str, int], k: int = DEPTH) -> float:
    """Normalised discounted cumulative gain at `k`: gain = grade, discount log2(rank + 1)."""
    dcg = sum(judgements.get(id_, 0) / math.log2(rank + 2) for rank, id_ in enumerate(ranked[:k]))
    ideal = sorted(judgements.values(), reverse=True)[:k]
    best = sum(g / math.log2(rank + 2) for rank, g in enumerate(ideal))
    return dcg / best if best else 0.0


def recall(ranked: Sequence[str], judgements: Mapping[str, int], k: int = DEPTH) -> float:
    """The share of the ids judged 1 or more found in the first `k`."""
    relevant = {id_ for id_, g in judgements.items() if g >= 1}
    return len(relevant & set(ranked[:k])) / len(relevant) if relevant else 0.0


def reciprocal_rank(ranked: Sequence[str], judgements: Mapping[str, int], k: int = DEPTH) -> float:
    """1/rank of the first grade-3 answer in the first `k`, 0 if none is there."""
    for rank, id_ in enumerate(ranked[:k]):
        if judgements.get(id_, 0) >= 3:
            return 1 / (rank + 1)
    return 0.0


# --- BM25 reference ------------------------------------------------------------------------------------------

TOKEN = re.compile(r"\w+")


def tokens(text: str) -> list[str]:
    return TOKEN.findall(text.lower())


class BM25:
    """Okapi BM25 (k1 1.2, b 0.75) over lowercase word tokens, no stemming, one document per node."""

    def __init__(self, documents: Mapping[str, str], k1: float = 1.2, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        self.terms = {id_: Counter(tokens(text)) for id_, text in documents.items()}
        self.lengths = {id_: sum(c.values()) for id_, c in self.terms.items()}
        self.average = sum(self.lengths.values()) / max(len(self.lengths), 1)
        frequency = Counter(t for c in self.terms.values() for t in c)
        n = len(self.terms)
        self.idf = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in frequency.items()}

    def rank(self, query: str, k: int = DEPTH) -> list[str]:
        wanted = set(tokens(query))
        scores: dict[str, float] = {}
        for id_, counts in self.terms.items():
            norm = self.k1 * (1 - self.b + self.b * self.lengths[id_] / self.average)
            score = sum(self.idf[t] * counts[t] * (self.k1 + 1) / (counts[t] + norm) for t in wanted if t in counts)
            if score > 0:
                scores[id_] = score
        return sorted(scores, key=lambda id_: (-scores[id_], id_))[:k]


def text_documents(instance: Instance) -> dict[str, str]:
    """Each node's text properties (those `find_nodes` searches: its type's `text` in the model), one string."""
    fields = {name: t.text for name, t in instance.model.node_types.items()}
    documents: dict[str, str] = {}
    for node in instance.store.iter_nodes():
        values = (node.properties.get(f) for f in fields.get(node.type, ()))
        documents[node.id] = "\n".join(v if isinstance(v, str) else json.dumps(v) for v in values if v is not None)
    return documents


# --- running the rankers -------------------------------------------------------------------------------------


@dataclass
class Answer:
    ids: list[str]
    size: int  # bytes of the JSON answer
    missing: bool = False  # the tool is not in the registry
    ms: float = 0.0  # how long the answer took


def call(instance: Instance, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = instance.dispatcher.call_tool(ADMIN, "bench", tool, arguments)
    if result.is_error:
        raise RuntimeError(f"{tool} {arguments}: {result.as_json()}")
    return result.as_json()


def answer_size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())


def has_tool(instance: Instance, name: str) -> bool:
    return instance.dispatcher.registry.find(name) is not None


def rankers(instance: Instance) -> dict[str, Callable[[str], Answer]]:
    """The three rankers over `instance`, each a query -> its first ten ids and the answer's size."""
    bm25 = BM25(text_documents(instance))
    search_exists = has_tool(instance, "search")

    def search(q: str) -> Answer:
        if not search_exists:
            return Answer([], 0, missing=True)
        forget_rankings()  # time the ranking, not a kept one
        started = time.perf_counter()
        value = call(instance, "search", {"query": q, "limit": DEPTH})
        ms = (time.perf_counter() - started) * 1000
        return Answer([item["id"] for item in value["items"]], answer_size(value), ms=ms)

    def summary(q: str) -> Answer:
        if not search_exists:
            return Answer([], 0, missing=True)
        forget_rankings()
        started = time.perf_counter()
        value = call(instance, "search", {"query": q, "limit": DEPTH, "summary": True})
        ms = (time.perf_counter() - started) * 1000
        return Answer([item["id"] for item in value["items"]], answer_size(value), ms=ms)

    def substring(q: str) -> Answer:
        started = time.perf_counter()
        value = call(instance, "find_nodes", {"text": q, "limit": DEPTH})
        ms = (time.perf_counter() - started) * 1000
        return Answer([item["id"] for item in value["items"]], answer_size(value), ms=ms)

    def reference(q: str) -> Answer:
        started = time.perf_counter()
        ids = bm25.rank(q)
        ms = (time.perf_counter() - started) * 1000
        items = [n.to_json() for id_ in ids if (n := instance.store.node(id_)) is not None]
        return Answer(ids, answer_size({"items": items}), ms=ms)

    return {"search": search, "search summary": summary, "substring": substring, "bm25": reference}


@dataclass
class Row:
    query: Query
    ranker: str
    answer: Answer

    @property
    def ndcg(self) -> float:
        return ndcg(self.answer.ids, self.query.judgements)

    @property
    def recall(self) -> float:
        return recall(self.answer.ids, self.query.judgements)

    @property
    def rr(self) -> float:
        return reciprocal_rank(self.answer.ids, self.query.judgements)


def run(instance: Instance, queries: Sequence[Query], names: Sequence[str] = RANKERS) -> list[Row]:
    ranking = rankers(instance)
    return [Row(q, name, ranking[name](q.text)) for name in names for q in queries]


def summary(rows: Sequence[Row]) -> dict[str, float]:
    n = len(rows)
    return {
        "queries": n,
        "ndcg@10": round(sum(r.ndcg for r in rows) / n, 3),
        "recall@10": round(sum(r.recall for r in rows) / n, 3),
        "mrr": round(sum(r.rr for r in rows) / n, 3),
        "empty": round(sum(not r.answer.ids for r in rows) / n, 3),
        "bytes": round(sum(r.answer.size for r in rows) / n),
        "p50_ms": round(percentile([r.answer.ms for r in rows], 50), 2),
        "p95_ms": round(percentile([r.answer.ms for r in rows], 95), 2),
    }


def percentile(values: Sequence[float], p: float) -> float:
    """The nearest-rank `p`th percentile of `values` (0 for none)."""
    ordered = sorted(values)
    return ordered[max(math.ceil(len(ordered) * p / 100) - 1, 0)] if ordered else 0.0


def report(rows: Sequence[Row]) -> dict[str, Any]:
    """Per ranker: per kind and overall figures (or `missing` for a ranker whose tool is not there)."""
    out: dict[str, Any] = {}
    for name in dict.fromkeys(r.ranker for r in rows):
        mine = [r for r in rows if r.ranker == name]
        if any(r.answer.missing for r in mine):
            out[name] = "missing"
            continue
        kinds = {kind: summary([r for r in mine if r.query.kind == kind]) for kind in KINDS}
        out[name] = {"overall": summary(mine), "kinds": {k: v for k, v in kinds.items() if v}}
    return out


def markdown(figures: Mapping[str, Any]) -> str:
    lines = ["| ranker | kind | queries | nDCG@10 | recall@10 | MRR | empty | bytes/query | p50 ms | p95 ms |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    for name, value in figures.items():
        if value == "missing":
            lines.append(f"| {name} | (tool missing) | | | | | | | | |")
            continue
        for kind, s in [*value["kinds"].items(), ("**overall**", value["overall"])]:
            lines.append(f"| {name} | {kind} | {s['queries']} | {s['ndcg@10']:.3f} | {s['recall@10']:.3f} | "
                         f"{s['mrr']:.3f} | {s['empty']:.0%} | {s['bytes']} | {s['p50_ms']:.2f} | "
                         f"{s['p95_ms']:.2f} |")  # fmt: skip
    return "\n".join(lines)


def per_query(rows: Sequence[Row]) -> str:
    """One line per query: its kind, nDCG@10, RR and the first five ids (for a failing floor's message)."""
    return "\n".join(f"{r.ndcg:.2f} rr={r.rr:.2f} [{r.query.kind}] {r.query.text!r} -> {r.answer.ids[:5]}"
                     for r in sorted(rows, key=lambda r: r.ndcg))  # fmt: skip


# --- stores --------------------------------------------------------------------------------------------------


@contextmanager
def sample_instance(backend: str) -> Generator[Instance]:
    """An instance holding the sample data on a new SQLite file or a new database on a throwaway PostgreSQL."""
    with _location(backend) as location:
        instance = open_instance(Config(store=location))
        try:
            yield instance
        finally:
            instance.close()


@contextmanager
def _location(backend: str) -> Generator[str | Path]:
    if backend == "sqlite":
        with tempfile.TemporaryDirectory() as folder:
            yield Path(folder) / "canon.db"
        return
    from tests.postgres_server import Server

    server = Server.start()
    try:
        url = server.new_database()
        try:
            yield url
        finally:
            server.drop_database(url)
    finally:
        server.stop()


# --- latency -------------------------------------------------------------------------------------------------

SYNTHETIC_QUERIES = ("service", "payments ledger", "team", "decision", "person", "zq000x", "node 42",
                     "system design", "document review", "glossary term")  # fmt: skip
"""Queries for the synthetic stores, drawn from the words `canon synth` writes (and one that matches nothing)."""


def latency(nodes: Sequence[int], backends: Sequence[str], calls: int) -> dict[str, Any]:
    """p50/p99 (ms) of `search` and of `find_nodes` text over synthetic stores of each size on each backend."""
    from core.app.synthetic import write_synthetic
    from core.lang.model import default_model_path

    out: dict[str, Any] = {}
    for backend in backends:
        for size in nodes:
            with tempfile.TemporaryDirectory() as folder, _location(backend) as location:
                data = Path(folder) / "synthetic.jsonl"
                write_synthetic(data, size)
                import subprocess

                started = time.perf_counter()
                subprocess.run([sys.executable, "-m", "core.app.cli", "--store", str(location), "--model",
                                str(default_model_path()), "import", str(data), "--no-progress"],
                               cwd=ROOT, check=True, stdout=subprocess.DEVNULL)  # fmt: skip
                imported = time.perf_counter() - started
                out[f"{backend} {size}"] = measured(location, backend, calls, imported=imported)
    return out


def measured(
    location: str | Path, backend: str, calls: int, *, imported: float | None = None, build: bool = True
) -> dict[str, Any]:
    """The figures of one store: its word index (`index_figures`: sizes, then the time to build it anew) and
    p50/p95/p99 of `search` and of `find_nodes` text, called in turn over `SYNTHETIC_QUERIES`. Opening the store
    migrates it first if it is of an older schema (the time that takes is `open_s`)."""
    started = time.perf_counter()
    instance = open_instance(Config(store=location, seed=False))
    opened = time.perf_counter() - started
    try:
        index = index_figures(instance, backend, build=build)
        index["open_s"] = round(opened, 1)
        if imported is not None:
            index["import_s"] = round(imported, 1)
        plans: dict[str, tuple[str, str]] = {"find_nodes text": ("find_nodes", "text")}
        if has_tool(instance, "search"):
            plans["search"] = ("search", "query")
        figures: dict[str, Any] = {}
        for label, (tool, field) in plans.items():
            times: list[float] = []
            for n in range(calls):
                arguments = {field: SYNTHETIC_QUERIES[n % len(SYNTHETIC_QUERIES)], "limit": DEPTH}
                forget_rankings()  # time the ranking, not a kept one
                started = time.perf_counter()
                call(instance, tool, arguments)
                times.append((time.perf_counter() - started) * 1000)
            figures[label] = {"p50_ms": round(percentile(times, 50), 2),
                              "p95_ms": round(percentile(times, 95), 2),
                              "p99_ms": round(percentile(times, 99), 2)}  # fmt: skip
        if "search" not in plans:
            figures["search"] = "missing"
        figures["index"] = index
        print(f"{backend} {location}: {json.dumps(figures)}", file=sys.stderr)
        return figures
    finally:
        instance.close()


WORD_INDEX = ("node_words", "vocabulary")  # the word index's tables (their indexes are counted with them)


def index_figures(instance: Instance, backend: str, *, build: bool = True) -> dict[str, Any]:
    """The store's size, the word index's share of it, and the time to build the word index anew from the nodes
    (`rebuild_word_index`; sizes after the import, before the rebuild). A store without a word index reports its
    size only. On PostgreSQL the word index includes the nodes' numbers it is keyed by (ADR 0065): the index
    `nodes_number` and the column's 4 bytes a node (`growth` is the word index over the rest of the store)."""
    store: Any = instance.store
    names = (
        [r[0] for r in store.rows("SELECT name FROM sqlite_master WHERE type = 'table'")]
        if backend == "sqlite"
        else [r[0] for r in store.rows("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")]
    )
    has_words = all(n in names for n in WORD_INDEX)
    if backend == "sqlite":
        pages = store.rows("SELECT (SELECT page_count FROM pragma_page_count()) - "
                           "(SELECT freelist_count FROM pragma_freelist_count()), "
                           "(SELECT page_size FROM pragma_page_size())")[0]  # fmt: skip
        total = int(pages[0]) * int(pages[1])
        words = (
            int(
                store.rows(
                    "SELECT coalesce(sum(s.pgsize), 0) FROM dbstat s JOIN sqlite_master m ON m.name = "
                    "s.name WHERE m.tbl_name IN ('node_words', 'vocabulary')"
                )[0][0]
            )
            if has_words
            else 0
        )
    else:
        total = int(store.rows("SELECT pg_database_size(current_database())")[0][0])
        words = (
            sum(int(store.rows("SELECT pg_total_relation_size(?)", (n,))[0][0]) for n in WORD_INDEX) if has_words else 0
        )
        if store.rows("SELECT 1 FROM pg_indexes WHERE indexname = 'nodes_number'"):
            words += int(store.rows("SELECT pg_relation_size('nodes_number') + 4 * (SELECT count(*) FROM nodes)")[0][0])
    out: dict[str, Any] = {"store_mb": round(total / 1e6, 1)}
    if has_words:
        out["word_index_mb"] = round(words / 1e6, 1)
        out["growth"] = round(words / max(total - words, 1), 3)
    if has_words and build:
        started, cpu = time.perf_counter(), time.process_time()
        store.rebuild_word_index()
        out["build_s"] = round(time.perf_counter() - started, 1)
        out["build_cpu_s"] = round(time.process_time() - cpu, 1)  # this process's (a PostgreSQL server's is apart)
    return out


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    sub = parser.add_subparsers(dest="part")
    relevance = sub.add_parser("relevance", help="the query set on the sample data (the default)")
    for p in (parser, relevance):
        p.add_argument("--backend", choices=("sqlite", "postgresql"), default="sqlite")
    timing = sub.add_parser("latency", help="p50/p99 over synthetic stores")
    timing.add_argument("--nodes", type=int, nargs="+", default=[10_000, 100_000])
    timing.add_argument("--million", action="store_true", help="add the 1,000,000-node store")
    timing.add_argument("--backends", nargs="+", choices=("sqlite", "postgresql"), default=["sqlite", "postgresql"])
    timing.add_argument("--calls", type=int, default=200)
    timing.add_argument("--store", nargs="+", help="measure these existing stores (SQLite files or PostgreSQL URLs; "
                        "an older schema is migrated on opening) instead of importing synthetic ones")  # fmt: skip
    timing.add_argument("--no-build", action="store_true", help="with --store: do not time building the word index")
    args = parser.parse_args(argv)
    if args.part == "latency" and args.store:
        figures = {str(s): measured(s if "://" in s else Path(s), "postgresql" if "://" in s else "sqlite",
                                    args.calls, build=not args.no_build) for s in args.store}  # fmt: skip
        print(json.dumps(figures, indent=2))
    elif args.part == "latency":
        figures = latency([*args.nodes, *([1_000_000] if args.million else [])], args.backends, args.calls)
        print(json.dumps(figures, indent=2))
    else:
        with sample_instance(args.backend) as instance:
            figures = report(run(instance, load_queries()))
        print(markdown(figures))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
