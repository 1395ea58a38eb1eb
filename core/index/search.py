"""Find by meaning: the words of a query, the candidates the store holds for them, and the one ranking rule.

A query is words, never an engine's syntax: `parse_query` splits what was typed into words (letters and
digits), lowers them, drops question and stop words, and bounds their number; nothing of it reaches SQL but
bound substring needles. Each word is looked up through the store's text index (`Store.find_nodes` with
`NodeQuery.text`, the caller's sight applied in SQL, so a record the caller may not read is never a candidate,
never counted, never quoted), by a prefix of its stem, and — when no node holds the word itself — by the pieces
of it that any spelling within one or two edits must keep (a word of n pieces with fewer than n edits keeps
one piece whole). When a candidate of a type with `names` properties (a glossary term's expansion and synonyms)
is named by the query, word for word, its other names are looked up too (`Alternative`: `SLO` also looks for
"service level objective", and back), their words counting `ALTERNATIVE` of a query word's. The candidates'
own words then decide, in Python and so the same on every backend:

- a word matches a node's word that has the same stem (weight 1), that it begins (0.6, words of 3 or more
  letters), or that is one edit away (words of 5 or more letters; two edits from 9): 0.4 and 0.25;
- each property weighs what the model says (`NodeType.weights`: a property's `x-canon-search` weight, else
  the key and display properties 3, arrays of strings such as tags, synonyms and aliases 2, other text 1);
- BM25 over those weighted counts (k1 1.2, b 0.75; document frequencies counted over the candidates the
  caller may see, the collection the visible nodes of the searched types);
- a node whose display or key property says exactly the query comes first (plus the sum of the words' idf);
- the share of the query's words a node matches (or stands for, holding every word of another name of them)
  scales its score (a node matching all of them outranks one matching a rare half).

Ties break by id, so a ranking is total and the same on SQLite and PostgreSQL.
"""

from __future__ import annotations

import builtins
import functools
import json
import math
import threading
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence, Set
from dataclasses import dataclass, field
from typing import Any

import snowballstemmer  # pyright: ignore[reportMissingTypeStubs]
from rapidfuzz.distance import Levenshtein

from core.lang.model import WORD_PATTERN, Model, NodeType, property_text, text_words
from core.store import NodeQuery, Store
from core.values.errors import InvalidArgumentsError, Problem
from core.values.records import Node, Sight

__all__ = ["MAX_WORDS", "Hit", "SearchResult", "forget_rankings", "parse_query", "ranked", "search"]

MAX_WORDS = 16  # words of a query after stop words: more is a paragraph, not a search
MAX_ALTERNATIVES = 16  # other names of what a query names, looked up beside its words
ALTERNATIVE = 0.5  # what a word of another name counts for, against a word of the query
PER_TERM = 150  # nodes ranked per word of the query (the most about it first): enough to rank a page, bounded
NEAR_WORDS = 400  # the vocabulary's words read per half of a typo, to find those within its edits
K1, B = 1.2, 0.75
RANKINGS = 32  # rankings kept for their next pages (per process)
SNIPPET = 60  # characters of a snippet around its first match

_STEMMER: Any = snowballstemmer.stemmer("english")  # pyright: ignore[reportUnknownMemberType]
STOP_WORDS = frozenset(
    """a about all an and any are as at be by can could did do does find for from get give had has have how i in
    is it its list me my of on or our please show tell that the their them there these this those to was we were
    what when where which who whom whose why will with would you your""".split()
)


@dataclass(frozen=True)
class Term:
    word: str
    stem: str
    edits: int = field(init=False, compare=False)  # how many edits from a node's word still count as this word

    def __post_init__(self) -> None:
        object.__setattr__(self, "edits", 2 if len(self.word) >= 9 else 1 if len(self.word) >= 5 else 0)


@dataclass(frozen=True)
class Hit:
    node: Node
    score: float
    property: str
    text: str  # the property's text
    terms: tuple[Term, ...]  # the words that matched

    @builtins.property  # the field `property` shadows the builtin here
    def snippet(self) -> str:
        """Up to `SNIPPET` characters of the property's text around its first match (made for a page's hits only)."""
        return _snippet(self.text, self.terms)

    def as_json(self, model: Model) -> dict[str, Any]:
        display = model.node_types[self.node.type].display
        return {
            "id": self.node.id,
            "type": self.node.type,
            "name": _display_text(self.node.properties.get(display), self.node.id),
            "score": round(self.score, 2),
            "match": {"property": self.property, "snippet": self.snippet},
            "node": self.node.to_json(),
        }


def _display_text(value: Any, fallback: str) -> str:
    """A display value as text: what a hit is called (the id when the node has no display value)."""
    return fallback if value is None else value if isinstance(value, str) else json.dumps(value)


@dataclass(frozen=True)
class SearchResult:
    hits: tuple[Hit, ...]  # every node that matched, best first
    facets: dict[str, int]  # how many of them per type
    cut: bool  # a needle had more candidates than were read


def words(text: str) -> list[str]:
    """The lowered words of `text`, in order (letters and digits; anything else separates)."""
    return text_words(text)


@functools.lru_cache(maxsize=65536)
def stem(word: str) -> str:
    return str(_STEMMER.stemWord(word))  # pyright: ignore[reportUnknownMemberType]


def parse_query(tool: str, text: str) -> tuple[Term, ...]:
    """The query's words less stop words, each once; `InvalidArgumentsError` at `/query` when none is left or
    there are more than `MAX_WORDS`."""
    found = words(text)
    kept = [w for w in dict.fromkeys(found) if w not in STOP_WORDS]
    if not found:
        raise InvalidArgumentsError(tool, [Problem("/query", "the query has no words (letters or digits)")])
    if not kept:
        raise InvalidArgumentsError(tool, [Problem("/query", "the query has only stop words; add a word to find")])
    if len(kept) > MAX_WORDS:
        raise InvalidArgumentsError(tool, [Problem("/query", f"at most {MAX_WORDS} words, not {len(kept)}")])
    return tuple(Term(w, stem(w)) for w in dict.fromkeys(kept))


def search(
    store: Store,
    model: Model,
    sight: Sight | None,
    terms: Sequence[Term],
    types: Sequence[str] | None,
    visible: Callable[[], Mapping[str, int]] | None = None,
) -> SearchResult:
    """The visible nodes of `types` (all types when None) most about `terms` or another name of what they name
    (`alternatives`), ranked. `visible`: how many nodes of each type the caller sees (the graph index knows it
    without a scan; else the store counts them)."""
    searched = [t.name for t in model.node_types.values() if types is None or t.name in types]
    only = searched[0] if len(searched) == 1 else None
    wanted = None if types is None else searched
    found, cut = _candidates(store, terms, wanted, sight)
    others = _alternatives(model, terms, found.values())
    extra = tuple(dict.fromkeys(t for a in others for t in a.terms if t not in terms))
    if extra:
        more, more_cut = _candidates(store, extra, wanted, sight)
        found, cut = found | more, cut or more_cut
    candidates = [n for n in found.values() if n.type in searched]
    if visible is not None:
        counts = visible()
        population = sum(counts.get(t, 0) for t in searched)
    elif only is not None or types is None:
        population = store.find_nodes(NodeQuery(only, sight=sight), after=None, limit=1)[1]
    else:
        population = sum(store.find_nodes(NodeQuery(t, sight=sight), after=None, limit=1)[1] for t in searched)
    hits = _rank(model, terms, others, candidates, population)
    return SearchResult(tuple(hits), dict(sorted(Counter(h.node.type for h in hits).items())), cut)


_rankings: OrderedDict[tuple[Any, ...], SearchResult] = OrderedDict()
_rankings_lock = threading.Lock()


def ranked(
    store: Store,
    model: Model,
    sight: Sight | None,
    terms: Sequence[Term],
    types: Sequence[str] | None,
    revision: int,
    *,
    compute: bool = True,
    visible: Callable[[], Mapping[str, int]] | None = None,
) -> SearchResult | None:
    """`search` at `revision`, kept for the next pages: a page after the first reads the ranking its first page
    made, so paging ranks once and every page of one cursor comes from one ranking. Kept per store location,
    model, sight, words and types, the last `RANKINGS` of them. With `compute` false, only a kept ranking (None
    when there is none, as for a revision the store has moved past)."""
    key = (store.location, model.digest, revision, sight, tuple(terms), None if types is None else tuple(types))
    with _rankings_lock:
        if (kept := _rankings.get(key)) is not None:
            _rankings.move_to_end(key)
            return kept
    if not compute:
        return None
    result = search(store, model, sight, terms, types, visible)
    with _rankings_lock:
        _rankings[key] = result
        while len(_rankings) > RANKINGS:
            _rankings.popitem(last=False)
    return result


def forget_rankings() -> None:
    """Drop every kept ranking (a benchmark timing the ranking itself, not a kept one)."""
    with _rankings_lock:
        _rankings.clear()


def _candidates(
    store: Store, terms: Sequence[Term], types: Sequence[str] | None, sight: Sight | None
) -> tuple[dict[str, Node], bool]:
    """The visible nodes (of `types`, when given) most about each of `terms`, and whether more were left.

    Each term stands for the index's words that begin with a prefix of its stem (`_prefix`; the first 32,
    `Store.prefix_postings`); a term no visible node holds such a word of is a typo, and stands for the index's words
    within its edits (`_near`). Of the nodes holding its words, the word index gives those most about them
    (`Store.word_postings`), at most `PER_TERM` per term, so a search reads and ranks a bounded number of nodes
    however many hold a common word."""
    ids: dict[str, None] = {}
    cut = False
    spelled = store.prefix_postings([_prefix(t) for t in terms], types, sight, PER_TERM)
    for term, (postings, more) in zip(terms, spelled, strict=True):
        cut = cut or more
        if not postings and term.edits:
            postings, more = store.word_postings(_near(store, term), types, sight, PER_TERM)
            cut = cut or more
        best = list(dict.fromkeys(id_ for _, id_, _ in sorted(postings, key=lambda p: (-p[2], p[1]))))
        cut = cut or len(best) > PER_TERM
        ids.update(dict.fromkeys(best[:PER_TERM]))
    read = store.nodes(list(ids))  # seen in the index's SQL; checked again, as a write may have come between
    return {id_: n for id_, n in read.items() if sight is None or sight.sees(n.visibility, n.readers)}, cut


def _near(store: Store, term: Term) -> list[str]:
    """The index's words within `term.edits` of it (as `_match` counts them): a word one edit away keeps the
    typo's first half as its beginning or its second half as its end, so the vocabulary's words that begin with
    the one or end with the other hold every such word (and, for two edits, those with both in one half)."""
    half = len(term.word) // 2
    around = [*store.words_beginning(term.word[:half], NEAR_WORDS), *store.words_ending(term.word[half:], NEAR_WORDS)]
    return [w for w in dict.fromkeys(around)
            if abs(len(w) - len(term.word)) <= term.edits
            and Levenshtein.distance(term.word, w, score_cutoff=term.edits) <= term.edits]  # fmt: skip


@dataclass(frozen=True)
class Alternative:
    """Another name of something the query names: `covers` are the query's words that name it, `terms` the
    words of the other name (`SLO` and `service level objective`, `double entry` and `double-entry bookkeeping`)."""

    covers: frozenset[Term]
    terms: tuple[Term, ...]


def _alternatives(model: Model, terms: Sequence[Term], nodes: Iterable[Node]) -> tuple[Alternative, ...]:
    """The other names of what the query names, from the data the caller sees: a node of a type with `names`
    properties (`x-canon-search` names: an abbreviation's expansion, synonyms) one of whose names (its display
    value or a names value) the query says, word for word by stem, offers each of its other names."""
    stems = [t.stem for t in terms]
    out: dict[Alternative, None] = {}
    for node in nodes:
        node_type = model.node_types[node.type]
        if not node_type.names:
            continue
        names = [_name_terms(line) for p in (node_type.display, *node_type.names)
                 for line in property_text(node.properties.get(p)).splitlines()]  # fmt: skip
        said = [n for n in names if n and _said(stems, [t.stem for t in n])]
        if not said:
            continue
        covers = frozenset(t for n in said for t in terms if t.stem in {x.stem for x in n})
        for other in names:
            if other and other not in said and len(out) < MAX_ALTERNATIVES:
                out[Alternative(covers, other)] = None
    return tuple(out)


def _name_terms(name: str) -> tuple[Term, ...]:
    return tuple(Term(w, stem(w)) for w in words(name) if w not in STOP_WORDS)[:MAX_WORDS]


def _said(query: Sequence[str], name: Sequence[str]) -> bool:
    """Whether the stems of a name stand one after another in the query's."""
    return any(list(query[i : i + len(name)]) == list(name) for i in range(len(query) - len(name) + 1))


def _prefix(term: Term) -> str:
    """A substring every word of the same stem, or that the word begins, holds: the stem less a changed last
    letter (`polici` is `policy`'s stem), never longer than the word."""
    common = 0
    while common < min(len(term.word), len(term.stem)) and term.word[common] == term.stem[common]:
        common += 1
    if term.stem != term.word:
        common -= 1  # the stem's last kept letter may itself be a changed one (`happi`, `happy`)
    return term.word[: max(common, min(3, len(term.word)))]


def _match(term: Term, token: str, token_stem: str) -> float:
    """How well one of a node's words stands for `term` (0: not at all)."""
    if token_stem == term.stem or token == term.word:
        return 1.0
    if len(term.word) >= 3 and token.startswith(term.word):
        return 0.6
    if term.edits and abs(len(token) - len(term.word)) <= term.edits:
        distance = Levenshtein.distance(term.word, token, score_cutoff=term.edits)
        if distance <= term.edits:
            return 0.4 if distance == 1 else 0.25
    return 0.0


@dataclass
class _Scored:
    node: Node
    tf: dict[Term, float]  # weighted match count per term
    length: float  # weighted word count
    best: tuple[float, str, str]  # (weight x matches, property, its text) of the best-matching property
    exact: bool


def _score_node(
    node: Node,
    node_type: NodeType,
    terms: Sequence[Term],
    phrase: list[str],
    own: Set[Term],
    memo: dict[str, tuple[tuple[Term, float], ...]],
) -> _Scored | None:
    tf: dict[Term, float] = {}
    length = 0.0
    best = (0.0, "", "")
    exact = False
    for name, weight in node_type.weights:
        text = property_text(node.properties.get(name))
        if not text:
            continue
        tokens = words(text)
        length += weight * len(tokens)
        if name in (node_type.key, node_type.display) and tokens == phrase:
            exact = True
        found = 0.0
        for token in tokens:
            if (matches := memo.get(token)) is None:
                token_stem = stem(token)
                matches = memo[token] = tuple((t, q) for t in terms if (q := _match(t, token, token_stem)))
            for term, quality in matches:
                tf[term] = tf.get(term, 0.0) + weight * quality
                found += weight * quality * (1 if term in own else ALTERNATIVE)
        if found > best[0]:
            best = (found, name, text)
    return _Scored(node, tf, length, best, exact) if tf else None


def _rank(
    model: Model, terms: Sequence[Term], others: Sequence[Alternative], nodes: Iterable[Node], population: int
) -> list[Hit]:
    phrase = [t.word for t in terms]
    every = tuple(dict.fromkeys([*terms, *(t for a in others for t in a.terms)]))
    own = set(terms)
    memo: dict[str, tuple[tuple[Term, float], ...]] = {}  # a word's matches: words repeat across the candidates
    scored = [s for n in nodes if (s := _score_node(n, model.node_types[n.type], every, phrase, own, memo))]
    if not scored:
        return []
    average = sum(s.length for s in scored) / len(scored) or 1.0
    frequency = Counter(t for s in scored for t in s.tf)
    idf = {t: math.log(1 + (max(population, len(scored)) - df + 0.5) / (df + 0.5)) for t, df in frequency.items()}
    hits: list[Hit] = []
    for s in scored:
        norm = K1 * (1 - B + B * s.length / average)
        score = sum((1 if t in own else ALTERNATIVE) * idf[t] * tf * (K1 + 1) / (tf + norm) for t, tf in s.tf.items())
        matched = own.intersection(s.tf).union(*(a.covers for a in others if all(t in s.tf for t in a.terms)))
        score *= (1 + len(matched)) / (1 + len(terms))
        if s.exact:
            score += sum(idf[t] for t in terms if t in idf) + 10
        hits.append(Hit(s.node, score, s.best[1], s.best[2], every))
    hits.sort(key=lambda h: (-round(h.score, 9), h.node.id))
    return hits


def _snippet(text: str, terms: Sequence[Term]) -> str:
    """Up to `SNIPPET` characters of `text` around its first matching word, each matching word in `**`."""
    spans = [
        m.span()
        for m in WORD_PATTERN.finditer(text)
        if any(_match(t, m.group().lower(), stem(m.group().lower())) for t in terms)
    ]
    start = max(0, spans[0][0] - SNIPPET // 3) if spans else 0
    end = min(len(text), start + SNIPPET)
    out, at = [], start
    for a, b in spans:
        if a < start or b > end:
            continue
        out += [text[at:a], "**", text[a:b], "**"]
        at = b
    out.append(text[at:end])
    return ("…" if start else "") + "".join(out).replace("\n", " ") + ("…" if end < len(text) else "")
