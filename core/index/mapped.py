"""The graph index at one revision as compact read-only arrays in a file, mapped into every process that reads it.

A dict index holds each node and edge as Python objects of its process's own: at 1,000,000 nodes about 1.6 GiB per
process, so a serving process and its walk workers each held a copy (ADR 0039). The arrays here (CSR adjacency with
interned ids) are written once by `write_sections` into the saved index file (`core.index.persisted`) and mapped
read-only by `Mapped`: their pages are the kernel's page cache, shared by every process that maps the file, so an
extra walk worker costs its interpreter and its changes since the file, not a copy of the graph.

`MappedNodes` and `MappedAdjacency` read the arrays as the mappings the index is made of (id -> attributes,
id -> neighbour -> {edge type: data}), so they are the read-only *base* under `core.index.graph_layers`' layers;
the changes since the file's revision stay a per-process delta over them. See
docs/decisions/0061-one-copy-of-the-graph-per-machine.md.

The sections (each an array of one machine type, page-aligned in the file, little-endian as written):

* `ids`: every node id, UTF-8, in sorted order, one after another; `id_offsets` (uint64, nodes + 1) where each
  starts. A node's number is its place in that order.
* `slots`: an open-addressing hash table (int32, a power of two at least twice the nodes; -1 empty) of node numbers
  by CRC-32 of the id's UTF-8, probed linearly: id -> number without a dict of a million strings in each process.
* `node_type` (uint16, a number into the names' node types), `visibility` (uint8: public, internal, restricted),
  `reader_offsets` (uint32, nodes + 1) into `readers` (uint32, numbers into the names' tags).
* per direction (`out`, `in`): `<way>_offsets` (uint64, nodes + 1) into `<way>` (uint32 pairs: neighbour number,
  edge type number), sorted by neighbour, then edge type name.
* `names`: JSON: node types, edge types (sorted: their numbers follow their names), tags, and the counts the index
  keeps with its maps.
"""

from __future__ import annotations

import json
import mmap
import sys
import zlib
from array import array
from collections.abc import Callable, Iterator, Mapping
from itertools import pairwise
from types import MappingProxyType
from typing import Any, Protocol

__all__ = ["SECTIONS", "Mapped", "MappedAdjacency", "MappedNodes", "SectionError", "write_sections"]

PAGE = 4096
LEVELS = ("public", "internal", "restricted")
SECTIONS = {"names": "B", "ids": "B", "id_offsets": "Q", "slots": "i", "node_type": "H", "visibility": "B",
            "reader_offsets": "I", "readers": "I", "out_offsets": "Q", "out": "I", "in_offsets": "Q",
            "in": "I"}  # fmt: skip
EDGE_DATA: Mapping[str, Any] = MappingProxyType({})  # every mapped edge's data: the index keeps none
# per process, bounded: walks meet the same nodes again. Decoded ids by number in a list (8 bytes a node, and the ids
# decoded: at most `_DECODED`, about 64 MiB of strings, then it starts again), ids looked up in a dict (`_LOOKED_UP`)
_DECODED = 1 << 20
_LOOKED_UP = 1 << 18


class SectionError(ValueError):
    """The sections do not hold together (a file that passed its checksum but was not written by `write_sections`)."""


def _hash(data: bytes) -> int:
    return zlib.crc32(data)


# -- writing -----------------------------------------------------------------------------------------------------
class Sink(Protocol):
    def write(self, data: Any, /) -> int: ...


def write_sections(sink: Sink, start: int, nodes: Mapping[str, Any], succ: Mapping[str, Any],
                   pred: Mapping[str, Any], counts: dict[str, Any],
                   pause: Callable[[], None] = lambda: None) -> dict[str, list[int]]:  # fmt: skip
    """Write the sections of the index the three maps hold (and its `counts`, JSON-ready) to `sink`, whose position
    is `start` in the file; each section starts on a page. Returns {section: [offset in the file, bytes]}. `pause`
    is called between stretches of work (the serving process's other threads get the interpreter then)."""
    ids = sorted(nodes)
    number = {id_: k for k, id_ in enumerate(ids)}
    node_types = sorted({nodes[i]["type"] for i in ids})
    edge_types: set[str] = set()
    for i in ids:
        for keys in succ[i].values():
            edge_types.update(keys)
    edge_names = sorted(edge_types)
    type_no, edge_no = {t: k for k, t in enumerate(node_types)}, {t: k for k, t in enumerate(edge_names)}
    tags: dict[str, int] = {}
    arrays = {name: array(code) for name, code in SECTIONS.items() if name not in ("names", "ids")}
    blob = bytearray()
    offsets, kinds, levels = arrays["id_offsets"], arrays["node_type"], arrays["visibility"]
    reader_offsets, readers = arrays["reader_offsets"], arrays["readers"]
    offsets.append(0)
    reader_offsets.append(0)
    level = {name: k for k, name in enumerate(LEVELS)}
    for k, id_ in enumerate(ids):
        blob += id_.encode("utf-8", "surrogatepass")
        offsets.append(len(blob))
        attributes = nodes[id_]
        kinds.append(type_no[attributes["type"]])
        levels.append(level[attributes["visibility"]])
        readers.extend(tags.setdefault(tag, len(tags)) for tag in attributes["readers"])
        reader_offsets.append(len(readers))
        if k % 20_000 == 0:
            pause()
    for way, maps in (("out", succ), ("in", pred)):
        ends, pairs = arrays[f"{way}_offsets"], arrays[way]
        ends.append(0)
        for k, id_ in enumerate(ids):
            adjacent = maps[id_]
            for neighbour in sorted(adjacent):
                at = number[neighbour]
                for key in sorted(adjacent[neighbour]):
                    pairs.append(at)
                    pairs.append(edge_no[key])
            ends.append(len(pairs) // 2)
            if k % 20_000 == 0:
                pause()
    arrays["slots"] = _slots(blob, offsets)
    names = {
        "node_types": node_types,
        "edge_types": edge_names,
        "tags": list(tags),
        "counts": counts,
        "byteorder": sys.byteorder,
    }
    parts: dict[str, Any] = {"names": json.dumps(names, sort_keys=True).encode(), "ids": bytes(blob), **arrays}
    sections: dict[str, list[int]] = {}
    position = start
    for name in SECTIONS:
        data = parts[name]
        raw = memoryview(data).cast("B")
        padding = -position % PAGE
        sink.write(b"\0" * padding)
        position += padding
        sections[name] = [position, raw.nbytes]
        sink.write(raw)
        position += raw.nbytes
        pause()
    return sections


def _slots(blob: bytearray, offsets: array[int]) -> array[int]:
    nodes = len(offsets) - 1
    size = 1 << max(4, (2 * nodes).bit_length())
    mask = size - 1
    slots = array("i", [-1]) * size
    view = memoryview(blob)
    for k in range(nodes):
        slot = _hash(view[offsets[k] : offsets[k + 1]]) & mask  # pyright: ignore[reportArgumentType]
        while slots[slot] >= 0:
            slot = (slot + 1) & mask
        slots[slot] = k
    return slots


# -- reading -----------------------------------------------------------------------------------------------------
class Mapped:
    """The sections of one file, mapped read-only: numbers to ids and back, a node's attributes, its adjacency.

    Never changed and never unmapped while anything refers to it (a published view of the index holds its maps,
    which hold this): a new file is a new `Mapped`, the old one goes when its last view does. The file itself is
    only ever replaced by a rename, never written in place, so a mapping's pages never change under it."""

    def __init__(self, mapped: mmap.mmap, sections: Mapping[str, list[int]]) -> None:
        self._mmap = mapped
        size = len(mapped)
        whole = memoryview(mapped)
        views: dict[str, memoryview] = {}
        for name, code in SECTIONS.items():
            where = sections.get(name)
            if not isinstance(where, list) or len(where) != 2 or not all(isinstance(n, int) for n in where):  # pyright: ignore[reportUnnecessaryIsInstance] - read from JSON
                raise SectionError(f"the section {name!r} is missing or malformed")
            offset, length = where
            itemsize = array(code).itemsize
            if offset < 0 or length < 0 or offset + length > size or offset % PAGE or length % itemsize:
                raise SectionError(f"the section {name!r} ({offset}, {length} bytes) does not fit the file")
            views[name] = whole[offset : offset + length].cast(code)  # pyright: ignore[reportCallIssue, reportArgumentType]
        names = json.loads(bytes(views["names"]))
        if names.get("byteorder") != sys.byteorder:
            raise SectionError(f"its arrays are {names.get('byteorder')}-endian, this machine's {sys.byteorder}-endian")
        self.node_types: list[str] = names["node_types"]
        self.edge_types: list[str] = names["edge_types"]
        self.tags: list[str] = names["tags"]
        self.counts: dict[str, Any] = names["counts"]
        self._ids_at = sections["ids"][0]
        self._offsets, self._slots = views["id_offsets"], views["slots"]
        self._types, self._levels = views["node_type"], views["visibility"]
        self._reader_offsets, self._readers = views["reader_offsets"], views["readers"]
        self.ways = {"out": (views["out_offsets"], views["out"]), "in": (views["in_offsets"], views["in"])}
        self.nodes = len(self._offsets) - 1
        self._check(views)
        self._mask = len(self._slots) - 1
        self.numbers: dict[str, int] = {}  # id -> number, lately decoded or asked for (bounded: `_LOOKED_UP`)
        self.decoded: list[str | None] = [None] * self.nodes  # number -> id, once decoded (bounded: `_DECODED`)
        self._decodes = 0

    def _check(self, views: Mapping[str, memoryview]) -> None:
        """The sections' sizes agree with each other (a cheap check, not a proof: the checksum is that)."""
        n = self.nodes
        sizes = {"node_type": n, "visibility": n, "reader_offsets": n + 1, "out_offsets": n + 1, "in_offsets": n + 1}
        for name, size in sizes.items():
            if len(views[name]) != size:
                raise SectionError(f"the section {name!r} holds {len(views[name])} entries, not {size}")
        slots = len(self._slots)
        if n < 0 or slots < 2 * n or slots & (slots - 1):
            raise SectionError(f"the hash table of {slots} slots does not fit {n} nodes")
        if n >= 0 and self._offsets[n] != len(views["ids"]):
            raise SectionError("the ids' offsets do not end where the ids do")
        if self._reader_offsets[n] != len(self._readers):
            raise SectionError("the readers' offsets do not end where the readers do")
        for way, (ends, pairs) in self.ways.items():
            if ends[n] * 2 != len(pairs) or ends[n] != self.counts["edges"]:
                raise SectionError(f"the {way} adjacency does not hold the {self.counts['edges']} edges")

    def id_of(self, number: int) -> str:
        found = self.decoded[number]
        if found is None:
            offsets, start = self._offsets, self._ids_at
            found = self._mmap[start + offsets[number] : start + offsets[number + 1]].decode("utf-8", "surrogatepass")
            self._decodes += 1
            if self._decodes > _DECODED:  # a thread still holding the old list only writes into it: harmless
                fresh: list[str | None] = [None] * self.nodes
                self.decoded, self._decodes = fresh, 1
            self.decoded[number] = found
            self._remember(found, number)
        return found

    def decode_all(self) -> None:
        """Decode every id now (a walk worker, before it takes walks): each walk then finds its neighbours' ids
        decoded, as a dict index holds them, instead of decoding them as it first meets them (a third more CPU for
        a cold `find_paths`, benchmarks). The strings are the process's own: about 64 bytes a node. Not beyond
        `_DECODED` nodes, where the ids are decoded as walks meet them."""
        if self.nodes > _DECODED or self._decodes >= self.nodes:
            return
        start = self._ids_at
        blob = self._mmap[start : start + self._offsets[self.nodes]]
        text = blob.decode("utf-8", "surrogatepass")
        offsets = self._offsets
        if len(text) == len(blob):  # every id ASCII: the byte offsets are the characters' offsets
            decoded: list[str | None] = [text[a:b] for a, b in pairwise(offsets)]
        else:
            decoded = [blob[a:b].decode("utf-8", "surrogatepass") for a, b in pairwise(offsets)]
        self.decoded, self._decodes = decoded, self.nodes

    def _remember(self, id: str, number: int) -> None:
        if len(self.numbers) >= _LOOKED_UP:
            self.numbers.clear()
        self.numbers[id] = number

    def number(self, id: str) -> int:
        """The node number of `id`, or -1 when there is no such node."""
        found = self.numbers.get(id)
        if found is not None:
            return found
        if not isinstance(id, str):  # pyright: ignore[reportUnnecessaryIsInstance] - a Mapping may be asked anything
            return -1
        data = id.encode("utf-8", "surrogatepass")
        slots, offsets, mapped, start, mask = self._slots, self._offsets, self._mmap, self._ids_at, self._mask
        slot = _hash(data) & mask
        while (k := slots[slot]) >= 0:
            if mapped[start + offsets[k] : start + offsets[k + 1]] == data:
                self._remember(id, k)
                return k
            slot = (slot + 1) & mask
        return -1

    def attributes(self, number: int) -> dict[str, Any]:
        start, end = self._reader_offsets[number], self._reader_offsets[number + 1]
        tags, readers = self.tags, self._readers
        return {"type": self.node_types[self._types[number]], "visibility": LEVELS[self._levels[number]],
                "readers": tuple(tags[readers[i]] for i in range(start, end)) if end > start else ()}  # fmt: skip

    def adjacency(self, number: int, way: str) -> dict[str, dict[str, Any]]:
        """neighbour -> {edge type: data} of node `number` that way (`out`, `in`), as the dict index holds it.

        The hot loop of every walk: the node's pairs are read in one slice, and a neighbour's id from the cache of
        ids decoded lately before it is decoded again."""
        ends, pairs = self.ways[way]
        start, end = ends[number], ends[number + 1]
        found: dict[str, dict[str, Any]] = {}
        if start == end:
            return found
        flat: list[int] = pairs[2 * start : 2 * end].tolist()
        decoded, id_of, names = self.decoded, self.id_of, self.edge_types
        pairs_of = iter(flat)
        for k, t in zip(pairs_of, pairs_of, strict=True):
            neighbour = decoded[k] or id_of(k)
            keys = found.get(neighbour)
            if keys is None:
                found[neighbour] = {names[t]: EDGE_DATA}
            else:
                keys[names[t]] = EDGE_DATA
        return found


class _ByNode(Mapping[str, Any]):
    """A read-only map keyed by the mapped file's node ids, in their order: what its two maps share."""

    __slots__ = ("mapped",)

    def __init__(self, mapped: Mapped) -> None:
        self.mapped = mapped

    def __contains__(self, id: object) -> bool:
        return self.mapped.number(id) >= 0  # pyright: ignore[reportArgumentType]

    def __iter__(self) -> Iterator[str]:
        return map(self.mapped.id_of, range(self.mapped.nodes))

    def __len__(self) -> int:
        return self.mapped.nodes


class MappedNodes(_ByNode):
    """id -> attributes (type, visibility, readers) of the mapped file's nodes; each read makes a new dict."""

    __slots__ = ()

    def __getitem__(self, id: str) -> dict[str, Any]:
        k = self.mapped.number(id)
        if k < 0:
            raise KeyError(id)
        return self.mapped.attributes(k)

    def get(self, id: str, default: Any = None) -> Any:
        k = self.mapped.number(id)
        return default if k < 0 else self.mapped.attributes(k)


class MappedAdjacency(_ByNode):
    """id -> neighbour -> {edge type: data} of the mapped file, one way (`out`: networkx's `_succ`; `in`: `_pred`)."""

    __slots__ = ("way",)

    def __init__(self, mapped: Mapped, way: str) -> None:
        super().__init__(mapped)
        self.way = way

    def __getitem__(self, id: str) -> dict[str, dict[str, Any]]:
        k = self.mapped.number(id)
        if k < 0:
            raise KeyError(id)
        return self.mapped.adjacency(k, self.way)

    def get(self, id: str, default: Any = None) -> Any:
        k = self.mapped.number(id)
        return default if k < 0 else self.mapped.adjacency(k, self.way)

    def pairs(self, id: str) -> list[tuple[str, str]]:
        """(neighbour, edge type) at `id` (`core.index.graph_layers.pairs`): `Mapped.pairs`, inlined, as the walks'
        hot loop calls it once per node they reach."""
        mapped = self.mapped
        k = mapped.number(id)
        if k < 0:
            raise KeyError(id)
        ends, pairs = mapped.ways[self.way]
        start, end = ends[k], ends[k + 1]
        if start == end:
            return []
        flat: list[int] = pairs[2 * start : 2 * end].tolist()
        decoded, id_of, names, numbers = mapped.decoded, mapped.id_of, mapped.edge_types, mapped.numbers
        found: list[tuple[str, str]] = []
        pairs_of = iter(flat)
        for n, t in zip(pairs_of, pairs_of, strict=True):
            neighbour = decoded[n] or id_of(n)
            numbers[neighbour] = n  # the walk steps from it next: its number without hashing its id
            found.append((neighbour, names[t]))
        if len(numbers) > _LOOKED_UP:
            numbers.clear()
        return found
