"""Does a small static embedding model lift the paraphrase and question kinds? (issue 26 item 4, ADR 0060)

    pip install wordllama                      # not a dependency of canon: this benchmark's only
    python benchmarks/embeddings.py            # nDCG@10 per kind: words alone, and fused with the embeddings
    python benchmarks/embeddings.py --depth 30 # how many of the word search's hits are re-ranked (default 50)

For each query of the retrieval set (benchmarks/retrieval_queries.json) over the sample data, `search` gives its
first `depth` hits (the word ranking); WordLlama (`l2_supercat`, 256 dimensions, the model its wheel ships, loaded
from the package with downloads disabled) embeds the query and each hit's node (its display value and text
properties), and the two rankings are fused by reciprocal rank fusion (1/(60 + rank) each, ties by the word rank).
Reported per kind and overall: nDCG@10 and MRR for the words alone and fused, in the same run; and the model's
costs: load time, the resident memory loading adds, and the time to embed the sample's nodes and 100,000 node texts.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.retrieval import KINDS, call, load_queries, ndcg, reciprocal_rank, sample_instance  # noqa: E402
from core.index.search import forget_rankings  # noqa: E402
from core.lang.model import property_text  # noqa: E402

RRF = 60


def load_model() -> Any:
    try:
        import wordllama  # pyright: ignore[reportMissingImports]
    except ImportError:
        sys.exit("benchmarks/embeddings.py needs wordllama (pip install wordllama); canon does not depend on it")
    # the wheel holds the weights and the tokenizer; its own lookup of the tokenizer misses the folder it ships
    # it in, so the package folder is given as the cache, and downloads are off
    folder = Path(wordllama.__file__).parent  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
    return wordllama.WordLlama.load(cache_dir=folder, disable_download=True)  # pyright: ignore[reportUnknownMemberType]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--depth", type=int, default=50, help="word hits re-ranked per query (at most 50)")
    args = parser.parse_args(argv)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    started = time.perf_counter()
    model = load_model()
    loaded = time.perf_counter() - started
    memory = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 - before
    import numpy as np

    with sample_instance("sqlite") as instance:
        types = instance.model.node_types

        def text(node: Any) -> str:
            node_type = types[node.type]
            names = dict.fromkeys([node_type.display, *node_type.text])
            return "\n".join(property_text(node.properties.get(p)) for p in names)

        nodes = list(instance.store.iter_nodes())
        started = time.perf_counter()
        vectors = dict(zip([n.id for n in nodes], model.embed([text(n) for n in nodes], norm=True), strict=True))
        embedded = time.perf_counter() - started
        rows: list[tuple[str, float, float, float, float]] = []
        for q in load_queries():
            forget_rankings()
            hits = [h["id"] for h in call(instance, "search", {"query": q.text, "limit": args.depth,
                                                                "summary": True})["items"]]  # fmt: skip
            fused = hits
            if hits:
                query = model.embed([q.text], norm=True)[0]
                similarity = {i: float(np.dot(query, vectors[i])) for i in hits}
                by_meaning = sorted(hits, key=lambda i: -similarity[i])
                score = {i: 1 / (RRF + hits.index(i)) + 1 / (RRF + by_meaning.index(i)) for i in hits}
                fused = sorted(hits, key=lambda i: (-score[i], hits.index(i)))
            rows.append((q.kind, ndcg(hits, q.judgements), ndcg(fused, q.judgements),
                         reciprocal_rank(hits, q.judgements), reciprocal_rank(fused, q.judgements)))  # fmt: skip
    sample = [text(n) for n in nodes]
    many = [sample[i % len(sample)] for i in range(100_000)]
    started = time.perf_counter()
    model.embed(many, norm=True, batch_size=512)
    hundred_thousand = time.perf_counter() - started

    print("| kind | queries | nDCG@10 words | nDCG@10 words + embeddings (RRF) | MRR words | MRR fused |")
    print("|---|---:|---:|---:|---:|---:|")
    for kind in [*KINDS, "**overall**"]:
        mine = [r for r in rows if kind == "**overall**" or r[0] == kind]
        if mine:
            n = len(mine)
            print(f"| {kind} | {n} | {sum(r[1] for r in mine) / n:.3f} | {sum(r[2] for r in mine) / n:.3f} | "
                  f"{sum(r[3] for r in mine) / n:.3f} | {sum(r[4] for r in mine) / n:.3f} |")  # fmt: skip
    print(
        f"\nload {loaded:.2f} s; {memory:.0f} MB more resident memory; "
        f"{len(nodes)} sample nodes embedded in {embedded * 1000:.0f} ms "
        f"({embedded / len(nodes) * 1e6:.0f} µs a node); 100,000 node texts in {hundred_thousand:.1f} s"
    )


if __name__ == "__main__":
    main()
