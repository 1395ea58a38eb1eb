"""What each page shows, gathered through the request's `Reader` (so through the dispatcher, as its caller).

Each view returns a `View`: the template and its context, and for a list the rows its CSV and JSON downloads
carry (the same tool answer the page shows, so the three never disagree). The model page is the one page read
from the model itself, since a model's definitions are not data any caller is refused.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from core.lang.conditions import facet_key
from core.lang.model import EdgeEnd, Model, NodeType, deprecation, is_deprecated
from core.lang.ordering import sort_kind
from core.values.errors import CanonError, ConflictError, NotFoundError, Problem, ValidationError
from generators.pages.editing import (
    ACCESS_POINTERS,
    READERS_FIELD,
    VISIBILITY_FIELD,
    Access,
    Field,
    access_fields,
    access_of,
    by_field,
    fields_of,
    patch_of,
)  # fmt: skip
from generators.pages.filters import Facet, TypeQuery, facets_of, parse_type_query
from generators.pages.reads import Reader
from generators.pages.values import Shown, shown

__all__ = ["Download", "Group", "View", "Views"]

NEIGHBOUR_LIMIT = 200  # get_neighbors' largest page: neighbours listed per edge name on a node page
HISTORY_STEPS = 10  # earlier states of a node its page lists
RECENT = 20  # revisions the home page looks back for changes
MAX_COLUMNS = 6  # a type table's property columns
SEARCH_SIZE = 20
MAX_FACETS = 8  # find_nodes' most facets in one call
CHANGES_SIZE = 100
WHOLE = re.compile(r"[0-9]{1,19}")  # a revision as a query string writes it (ASCII digits only)


@dataclass(frozen=True)
class Download:
    """A list as CSV and JSON: its columns, its rows (each a mapping of column -> value) and the tool's answer."""

    name: str  # the file's name without suffix
    columns: tuple[str, ...]
    rows: tuple[Mapping[str, Any], ...]
    answer: Mapping[str, Any]  # the tool's answer, the JSON download's body


@dataclass(frozen=True)
class View:
    template: str
    context: dict[str, Any]
    download: Download | None = None
    title: str = ""


@dataclass(frozen=True)
class Group:
    """A node's neighbours under one name of the model (an edge type out, its inverse name in)."""

    name: str
    edge_type: str
    direction: str
    items: tuple[Mapping[str, Any], ...]  # get_neighbors' items: {node, edge, depth}
    total: int
    deprecated: bool = False


@dataclass(frozen=True)
class Row:
    """A node as a row of a type table: its id, its title and its column values."""

    node: Mapping[str, Any]
    title: str
    cells: tuple[Shown, ...] = ()


@dataclass
class FacetCounts:
    name: str
    counts: list[tuple[Any, str, int, bool]] = field(default_factory=list[tuple[Any, str, int, bool]])


class Views:
    """The pages of one model, each gathered for one request's reader."""

    def __init__(self, model: Model) -> None:
        self.model = model

    # -- helpers -------------------------------------------------------------------------------------------------
    def node_type(self, name: str) -> NodeType:
        found = self.model.node_types.get(name)
        if found is None:
            raise NotFoundError("node type", name)
        return found

    def title_of(self, node: Mapping[str, Any]) -> str:
        if "name" in node and "properties" not in node:
            return str(node["name"])  # a summary node: the tool already chose its title
        node_type = self.model.node_types.get(str(node.get("type")))
        value = node.get("properties", {}).get(node_type.display) if node_type else None
        return str(value) if value not in (None, "") else str(node["id"])

    def columns(self, node_type: NodeType) -> tuple[str, ...]:
        """A type table's property columns: key and display, then the required and facet properties."""
        wanted = [node_type.key, node_type.display]
        required = list(node_type.schema.get("required", []))
        facets = [f.name for f in facets_of(self.model, node_type)]
        for name in [*required, *facets]:
            schema = self.model.resolved(node_type.properties.get(name, {}))
            if schema.get("type") == "string" and int(schema.get("maxLength", 10_000)) > 200:
                continue  # long text makes a table unreadable; it is on the node's page
            wanted.append(name)
        ordered = [n for n in dict.fromkeys(wanted) if n in node_type.properties]
        return tuple(ordered[:MAX_COLUMNS])

    def shown(self, node_type: NodeType | None, name: str, value: Any) -> Shown:
        declared = node_type.properties.get(name, {}) if node_type else {}
        return shown(value, self.model.resolved(declared), self.model.resolved)

    # -- home ----------------------------------------------------------------------------------------------------
    def home(self, reader: Reader, revision: int) -> View:
        described = reader.call("describe_model", {})
        types = [(t, self.model.node_types.get(t["name"])) for t in described["node_types"]]
        changes = reader.call("get_changes", {"since": max(0, revision - RECENT), "limit": RECENT})
        return View("home.html.j2", {"described": described, "types": types, "changes": changes["items"],
                                     "recent": RECENT}, title="Home")  # fmt: skip

    # -- a type's table ------------------------------------------------------------------------------------------
    def type_page(self, reader: Reader, name: str, query: list[tuple[str, str]], *, facets: bool = True) -> View:
        """A type's table; `facets=False` (a download) leaves out the facet counts, which only the page shows."""
        node_type = self.node_type(name)
        asked = parse_type_query(self.model, node_type, query)
        arguments = asked.arguments(name)
        counted = [f for f in facets_of(self.model, node_type) if f.name not in asked.where] if facets else []
        if counted:  # the rows' call counts the facets the page's filters leave alone (find_nodes' facets)
            arguments["facets"] = [f.name for f in counted][:MAX_FACETS]
        answer = reader.call("find_nodes", arguments)
        columns = self.columns(node_type)
        rows = [Row(n, self.title_of(n), tuple(self.shown(node_type, c, n["properties"].get(c)) for c in columns))
                for n in answer["items"]]  # fmt: skip
        counts = list(self._facet_counts(reader, node_type, asked, answer)) if facets else []
        ranges = {p: _range_input(self.model.resolved(s)) for p, s in node_type.properties.items()
                  if _rangeable(self.model.resolved(s))}  # fmt: skip
        download_columns = ("id", "type", *node_type.properties)
        download_rows = tuple({"id": n["id"], "type": n["type"], **n["properties"]} for n in answer["items"])
        return View(
            "type.html.j2",
            {"node_type": node_type, "answer": answer, "columns": columns, "rows": rows, "facets": counts,
             "asked": asked, "ranges": ranges, "deprecated": deprecation(node_type.schema),
             "sortable": {c for c in columns if sort_kind(self.model.resolved(node_type.properties[c]))},
             "texts": [p for p, s in node_type.properties.items() if self._contains(s)]},
            Download(name, download_columns, download_rows, answer),
            title=name,
        )  # fmt: skip

    def _contains(self, declared: Mapping[str, Any]) -> bool:
        """Whether a `contains` filter fits the property: free text, or an array of text (a member)."""
        schema = self.model.resolved(declared)
        items = schema.get("items")
        if schema.get("type") == "array" and isinstance(items, Mapping):
            schema = self.model.resolved(items)  # pyright: ignore[reportUnknownArgumentType]
        return _texty(schema)

    def _facet_counts(
        self, reader: Reader, node_type: NodeType, asked: TypeQuery, answer: Mapping[str, Any]
    ) -> Iterator[FacetCounts]:
        """Each facet's values with how many nodes have it among those the other filters leave (Datasette's
        counts), as the caller, so each count is the caller's own: find_nodes' facets, from the rows' call
        (`answer`) for a facet the page does not filter on, and from one call without its filter for one it does."""
        for facet in facets_of(self.model, node_type):
            if facet.name in answer.get("facets", {}):
                yield self._facet(reader, node_type, asked, facet, answer)
                continue
            others = {k: v for k, v in asked.where.items() if k != facet.name}
            arguments: dict[str, Any] = {"type": node_type.name, "limit": 1, "summary": True, "facets": [facet.name]}
            if others:
                arguments["where"] = others
            if asked.text is not None:
                arguments["text"] = asked.text
            yield self._facet(reader, node_type, asked, facet, reader.call("find_nodes", arguments))

    def _facet(
        self, reader: Reader, node_type: NodeType, asked: TypeQuery, facet: Facet, answer: Mapping[str, Any]
    ) -> FacetCounts:
        counted = FacetCounts(facet.name)
        found: Mapping[str, int] = answer["facets"][facet.name]
        cut = facet.name in answer["facets_cut"]
        for value in facet.values:
            total = found.get(str(facet_key(value)), 0)
            if not total and cut:  # beyond the values find_nodes answers: counted on its own
                others = {k: v for k, v in asked.where.items() if k != facet.name}
                arguments: dict[str, Any] = {"type": node_type.name, "where": {**others, facet.name: value},
                                             "limit": 1, "summary": True}  # fmt: skip
                if asked.text is not None:
                    arguments["text"] = asked.text
                total = int(reader.call("find_nodes", arguments)["total"])
            chosen = facet.name in asked.where and asked.where[facet.name] == value
            if total or chosen:
                counted.counts.append((value, _param(value), total, chosen))
        return counted

    # -- a node --------------------------------------------------------------------------------------------------
    def node_page(self, reader: Reader, id: str, at: int | None) -> View:
        arguments: dict[str, Any] = {"id": id} if at is None else {"id": id, "at": at}
        answer = reader.call("get_node", arguments)
        node: dict[str, Any] = answer["node"]
        node_type = self.model.node_types.get(node["type"])
        declared = list(node_type.properties) if node_type else []
        names = [p for p in declared if p in node["properties"]]
        names += sorted(p for p in node["properties"] if p not in declared)
        properties = [(p, self.shown(node_type, p, node["properties"][p]),
                       is_deprecated(node_type.properties.get(p)) if node_type else False) for p in names]  # fmt: skip
        groups = list(self.neighbours(reader, node["type"], id)) if at is None else []
        return View(
            "node.html.j2",
            {"node": node, "node_type": node_type, "heading": self.title_of(node), "properties": properties,
             "out": [g for g in groups if g.direction == "out"], "into": [g for g in groups if g.direction == "in"],
             "at": at, "read_at": answer["revision"], "history": list(self.history(reader, node))},
            Download(f"{id}-edges", ("name", "edge_type", "source", "target", "node_type", "node_name"),
                     tuple({"name": g.name, "edge_type": g.edge_type, "source": i["edge"]["source"],
                            "target": i["edge"]["target"], "node_type": i["node"]["type"],
                            "node_name": self.title_of(i["node"])} for g in groups for i in g.items),
                     {"items": [dict(i) for g in groups for i in g.items]}),
            title=self.title_of(node),
        )  # fmt: skip

    def neighbours(self, reader: Reader, node_type: str, id: str, *, summary: bool = True) -> Iterator[Group]:
        """The node's neighbours under each name its type's edges have: one get_neighbors call per edge end
        (`summary=False`: whole edges, their revisions too, for the edit page)."""
        for end in self.model.edge_ends(node_type):
            arguments = {"id": id, "direction": end.direction, "summary": summary, "edge_types": [end.edge.name],
                         "limit": NEIGHBOUR_LIMIT}  # fmt: skip
            answer = reader.call("get_neighbors", arguments)
            if answer["items"]:
                yield _group(end, answer)

    def history(self, reader: Reader, node: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
        """The node's earlier states, newest first: each state names the revision that wrote it, so the state
        just before that revision (`get_node` with `at`) is the one before it. Stops where the node did not
        exist yet, where the log was compacted or the caller may not see it then, and after `HISTORY_STEPS`."""
        state: Mapping[str, Any] = node
        for _ in range(HISTORY_STEPS):
            revision = int(state.get("revision", 0))
            yield {
                "revision": revision,
                "by": state.get("updated_by"),
                "at": state.get("updated_at"),
                "proposal": self.merged_from(reader, revision),
            }
            if revision <= 1:
                return
            try:
                state = reader.call("get_node", {"id": node["id"], "at": revision - 1})["node"]
            except CanonError:
                return

    @staticmethod
    def merged_from(reader: Reader, revision: int) -> str | None:
        """The proposal whose merge wrote `revision`, read from the change log's entry at it (None: a direct write,
        or an entry the log no longer keeps)."""
        if revision <= 0:
            return None
        try:
            items = reader.call("get_changes", {"since": revision - 1, "until": revision, "limit": 1})["items"]
        except CanonError:
            return None
        return items[0].get("proposal") if items else None

    def diff(self, reader: Reader, id: str, query: Mapping[str, str]) -> View:
        since, until = _revision(query, "from"), _revision(query, "to", optional=True)
        arguments: dict[str, Any] = {"from": since, "ids": [id], "limit": 100}
        if until is not None:
            arguments["to"] = until
        answer = reader.call("diff_revisions", arguments)
        return View("diff.html.j2", {"id": id, "answer": answer, "since": since, "until": until},
                    title=f"{id}: what changed")  # fmt: skip

    # -- editing ------------------------------------------------------------------------------------------------
    def edit_form(self, reader: Reader, id: str, token: str) -> View:
        node = reader.call("get_node", {"id": id})["node"]
        node_type = self.node_type(node["type"])
        fields, left = fields_of(self.model, node_type, node["properties"])
        view = self._form(node, fields, left, token, int(node["revision"]), _access_now(node))
        groups = list(self.neighbours(reader, node["type"], id, summary=False))
        view.context["groups"] = groups
        view.context["titles"] = {i["node"]["id"]: self.title_of(i["node"]) for g in groups for i in g.items}
        view.context["with_properties"] = {e.name for e in self.model.edge_types.values() if e.properties}
        ends = self.model.edge_ends(node["type"])  # an edge with properties is added on a page of its own
        view.context["ends"] = [end for end in ends if not end.edge.properties]
        view.context["property_ends"] = [end for end in ends if end.edge.properties]
        return view

    def end_named(self, node_type: str, name: str, pointer: str) -> EdgeEnd:
        """The edge end a form names: one of the edge names a node of `node_type` has (`ValidationError` at
        `pointer` for any other)."""
        names = {end.name: end for end in self.model.edge_ends(node_type)}
        end = names.get(name)
        if end is None:
            raise ValidationError("Choose one of this node's edges.", [Problem(pointer, f"one of {', '.join(names)}")])
        return end

    def change_edge(self, reader: Reader, id: str, form: Sequence[tuple[str, str]]) -> dict[str, Any]:
        """An edit page's edge form: `add` an edge under one of the node's edge names to the node `other` (it must
        not exist yet: expected_revision 0), or `remove` the edge it names at the revision it was shown at."""
        given = dict(form)
        node_type = self.node_type(reader.call("get_node", {"id": id, "summary": True})["node"]["type"])
        if given.get("_action") == "add":
            end = self.end_named(node_type.name, given.get("name", ""), "/form/name")
            other = given.get("other", "").strip()
            if not other:
                raise ValidationError("Choose an edge and the other node's id.", [Problem("/form/other", "a node id")])
            source, target = (id, other) if end.direction == "out" else (other, id)
            return reader.call("upsert_edge", {"type": end.edge.name, "source": source, "target": target,
                                               "expected_revision": 0})  # fmt: skip
        if given.get("_action") != "remove":
            raise ValidationError("The form asks for nothing.", [Problem("/form/_action", "add or remove")])
        raw = given.get("_revision", "")
        if not WHOLE.fullmatch(raw) or id not in (given.get("source"), given.get("target")):
            problem = Problem("/form", "type, source, target (this node at one end) and _revision")
            raise ValidationError("The form does not name one of this node's edges at a revision.", [problem])
        ref = {name: given.get(name, "") for name in ("type", "source", "target")}
        return reader.call("delete_edge", {**ref, "expected_revision": int(raw)})

    def _form(self, node: Mapping[str, Any], fields: list[Field], left: list[str], token: str, revision: int,
              access: Access, *, errors: Mapping[str, list[str]] | None = None, general: Sequence[str] = (),
              conflict: Mapping[str, Any] | None = None) -> View:  # fmt: skip
        return View("edit.html.j2", {"node": node, "fields": fields, "left": left, "token": token,
                                     "revision": revision, "errors": errors or {}, "general": list(general),
                                     "conflict": conflict, "heading": self.title_of(node), "access": access},
                    title=f"Edit {self.title_of(node)}")  # fmt: skip

    def save(self, reader: Reader, id: str, form: Sequence[tuple[str, str]], token: str) -> dict[str, Any] | View:
        """Write a submitted form with `patch_node`: the tool's answer, else the form again, with the
        tool's problems next to their fields, or, on a conflict, what the node holds now beside what was sent.
        Its visibility and readers fields, when sent, are the tool's own arguments (`access_of`)."""
        node = reader.call("get_node", {"id": id})["node"]
        node_type = self.node_type(node["type"])
        patch, revision = patch_of(self.model, node_type, form)
        sent = {**node["properties"], **{k: v for k, v in patch.items() if v is not None}}
        sent = {k: v for k, v in sent.items() if patch.get(k, v) is not None}
        given = dict(form)
        now = _access_now(node)
        typed = access_fields(given.get(VISIBILITY_FIELD, now.visibility), given.get(READERS_FIELD, now.readers))
        try:
            answer = reader.call("patch_node", {"id": id, "properties": patch, **access_of(form),
                                                "expected_revision": revision})  # fmt: skip
        except ConflictError as conflict:
            fields, left = fields_of(self.model, node_type, sent)  # what this person sent, to save again
            theirs = {f.name: self.shown(node_type, f.name, node["properties"].get(f.name)) for f in fields
                      if node["properties"].get(f.name) != sent.get(f.name)}  # fmt: skip
            for name, mine, now_shown in (("visibility", typed.visibility, now.visibility),
                                          ("readers", typed.readers, now.readers)):  # fmt: skip
                if mine != now_shown:
                    theirs[name] = Shown("text", now_shown or "none")
            return self._form(node, fields, left, token, int(node["revision"]), typed, general=[str(conflict)],
                              conflict={"actual": conflict.actual, "expected": conflict.expected, "theirs": theirs,
                                        "by": node.get("updated_by"), "at": node.get("updated_at")})  # fmt: skip
        except ValidationError as invalid:
            errors, general = by_field(invalid.problems, list(node_type.properties), ACCESS_POINTERS)
            fields, left = fields_of(self.model, node_type, sent)
            return self._form(node, fields, left, token, revision, typed, errors=errors,
                              general=[str(invalid), *general])  # fmt: skip
        return answer

    # -- search and changes --------------------------------------------------------------------------------------
    def search(self, reader: Reader, query: Mapping[str, str], types: Sequence[str]) -> View:
        words = query.get("q", "")
        answer: dict[str, Any] = {"items": [], "total": 0, "facets": {}, "next_cursor": None}
        if words:
            arguments: dict[str, Any] = {"query": words, "limit": SEARCH_SIZE, "fields": [], "facets": True}
            if types:
                arguments["types"] = list(types)
            if query.get("_cursor"):
                arguments["cursor"] = query["_cursor"]
            answer = reader.call("search", arguments)
        columns = ("id", "type", "name", "score", "property", "snippet")
        rows = tuple({"id": h["id"], "type": h["type"], "name": h["name"], "score": h["score"],
                      "property": h["match"]["property"], "snippet": h["match"]["snippet"]}
                     for h in answer["items"])  # fmt: skip
        params = [("q", words), *(("type", t) for t in types)]
        return View("search.html.j2", {"words": words, "answer": answer, "types": list(types), "params": params,
                                       "cursor": query.get("_cursor")},
                    Download("search", columns, rows, answer),
                    title=f"Search: {words}" if words else "Search")  # fmt: skip

    def changes(self, reader: Reader, query: Mapping[str, str]) -> View:
        since = _revision(query, "since", optional=True) or 0
        arguments: dict[str, Any] = {"since": since, "limit": CHANGES_SIZE}
        if query.get("_cursor"):
            arguments["cursor"] = query["_cursor"]
        answer = reader.call("get_changes", arguments)
        columns = ("revision", "at", "principal", "op", "kind", "key", "type", "proposal")
        rows = tuple({c: item.get(c) for c in columns} for item in answer["items"])
        return View("changes.html.j2", {"answer": answer, "since": since},
                    Download("changes", columns, rows, answer), title="Changes")  # fmt: skip

    # -- the model -----------------------------------------------------------------------------------------------
    def model_page(self) -> View:
        types = []
        for name, node_type in self.model.node_types.items():
            required = set(node_type.schema.get("required", []))
            properties = [(p, self.model.resolved(s), p in required, is_deprecated(s))
                          for p, s in node_type.properties.items()]  # fmt: skip
            types.append((name, node_type, properties, self.model.edge_ends(name)))
        edges = [(e, [(p, self.model.resolved(s), is_deprecated(s)) for p, s in e.properties.items()])
                 for e in self.model.edge_types.values()]  # fmt: skip
        return View("model.html.j2", {"types": types, "edges": edges}, title="Model")


def _access_now(node: Mapping[str, Any]) -> Access:
    """The edit form's visibility and readers fields, holding the node's own."""
    return access_fields(str(node["visibility"]), [str(r) for r in node.get("readers", [])])


def _group(end: EdgeEnd, answer: Mapping[str, Any]) -> Group:
    return Group(end.name, end.edge.name, end.direction, tuple(answer["items"]), int(answer["total"]),
                 end.edge.deprecated)  # fmt: skip


def _param(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _rangeable(schema: Mapping[str, Any]) -> bool:
    return schema.get("type") in ("integer", "number") or schema.get("format") in ("date", "date-time")


def _range_input(schema: Mapping[str, Any]) -> str:
    """How a range's bounds are typed in: a date picker for a date, else text (a number, or a date-time)."""
    return "date" if schema.get("format") == "date" else "text"


def _texty(schema: Mapping[str, Any]) -> bool:
    return schema.get("type") == "string" and "enum" not in schema and schema.get("format") not in ("date", "date-time")


def _revision(query: Mapping[str, str], name: str, *, optional: bool = False) -> Any:
    raw = query.get(name)
    if raw is None or raw == "":
        if optional:
            return None
        raise ValidationError(f"This page needs {name}.", [Problem(f"/query/{name}", "a revision is required")])
    if not WHOLE.fullmatch(raw):
        raise ValidationError(f"{name} must be a revision.", [Problem(f"/query/{name}", "a whole number, 0 or more")])
    return int(raw)
