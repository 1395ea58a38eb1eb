"""Creating a node from a page, and editing an edge's properties, through the write tools.

A type's "New" form (`Creating.new_form`) is generated from its schema as the edit form is
(`generators.pages.editing.fields_of`): the node's id first, then one field per property, the required ones and
the type's key marked. A submitted form is written with `upsert_node` expected to be new (`expected_revision` 0),
so a second person creating the same id gets a 409 page naming the node that exists, never an overwrite; a key
another node holds is the tool's problem at `/properties/<key>`, shown next to that field as every other problem
is. Who may read the node is the form's visibility and readers fields (`generators.pages.editing.access_of`),
given to `upsert_node` as its own arguments; left at "the type's default" they are not sent, so the node gets what
the tool gives any write that leaves them out. Nothing is written on an error, and the form comes back holding
what was sent.

An edge whose type has properties has a form of its own (`Creating.edge_form`), written with `upsert_edge` at the
revision the edge was shown at: an edge someone changed meanwhile is a conflict, nothing written. A new edge
whose type has properties is added on a page of its own (`Creating.new_edge_form`, linked from the edit page per
edge name): the other node's id and the type's property fields, written with `upsert_edge` expected to be new, so
a required property (`member_of`'s `role`) is given when the edge is made.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from core.lang.model import EdgeEnd, EdgeType, Model, NodeType
from core.values.errors import ConflictError, NotFoundError, Problem, ValidationError
from generators.pages.editing import (
    ACCESS_POINTERS,
    READERS_FIELD,
    VISIBILITY_FIELD,
    Field,
    access_fields,
    access_of,
    by_field,
    fields_of,
    form_values,
)  # fmt: skip
from generators.pages.reads import Reader
from generators.pages.views import NEIGHBOUR_LIMIT, WHOLE, View, Views

__all__ = ["ID_FIELD", "OTHER_FIELD", "Creating"]

ID_FIELD = "_id"  # the new node's id (a property name cannot start with "_")
OTHER_FIELD = "_other"  # a new edge's other end


class Creating:
    """The "New <Type>" form and the edge-properties form, each gathered for one request's reader."""

    def __init__(self, views: Views) -> None:
        self.views = views
        self.model: Model = views.model

    # -- a new node ----------------------------------------------------------------------------------------------
    def new_form(
        self,
        node_type: NodeType,
        token: str,
        sent: Mapping[str, Any] | None = None,
        id: str = "",
        *,
        errors: Mapping[str, list[str]] | None = None,
        general: Sequence[str] = (),
        exists: str | None = None,
        form: Sequence[tuple[str, str]] = (),
    ) -> View:
        """The form, empty or holding what was sent (`sent` the properties, `form` the fields as typed)."""
        fields, left = fields_of(self.model, node_type, sent or {})
        given = dict(form)
        default = node_type.visibility
        if node_type.readers:
            default += " to " + ", ".join(node_type.readers)
        access = access_fields(given.get(VISIBILITY_FIELD, ""), given.get(READERS_FIELD, ""), default)
        return View("new.html.j2", {"node_type": node_type, "fields": fields, "left": left, "token": token,
                                    "id": id, "errors": errors or {}, "general": list(general), "exists": exists,
                                    "key": node_type.key, "access": access},
                    title=f"New {node_type.name}")  # fmt: skip

    def create(self, reader: Reader, name: str, form: Sequence[tuple[str, str]], token: str) -> dict[str, Any] | View:
        """Write a submitted "New" form with `upsert_node`, expected new: the tool's answer, else the form again
        with the tool's problems next to their fields, or, when the id is taken, a page naming that node."""
        node_type = self.views.node_type(name)
        values = form_values(self.model, node_type, form)
        properties = {k: v for k, v in values.items() if v is not None}
        access = {k: v for k, v in access_of(form).items() if v is not None}  # none given: the tool's default
        id = dict(form).get(ID_FIELD, "").strip()
        try:
            answer = reader.call("upsert_node", {"id": id, "type": name, "properties": properties, **access,
                                                 "expected_revision": 0})  # fmt: skip
        except ConflictError as conflict:
            general = [f"A node with the id {id!r} exists already (at revision {conflict.actual}); nothing was "
                       "written. Choose another id, or open that node and edit it."]  # fmt: skip
            return self.new_form(node_type, token, properties, id, general=general, exists=id, form=form)
        except ValidationError as invalid:
            errors, general = by_field(invalid.problems, list(node_type.properties), {"/id": ID_FIELD,
                                                                                      **ACCESS_POINTERS})  # fmt: skip
            return self.new_form(node_type, token, properties, id, errors=errors, general=[str(invalid), *general],
                                 form=form)  # fmt: skip
        return answer

    # -- an edge's properties ------------------------------------------------------------------------------------
    def edge_type(self, name: str) -> EdgeType:
        found = self.model.edge_types.get(name)
        if found is None:
            raise NotFoundError("edge type", name)
        return found

    def _edge(self, reader: Reader, id: str, ref: Mapping[str, str], prefix: str = "") -> Mapping[str, Any]:
        """The edge `ref` names (its `type`, `source` and `target`, each name after `prefix`) at the node `id`, as
        get_neighbors shows it to the caller."""
        type, source, target = (ref.get(prefix + name, "") for name in ("type", "source", "target"))
        if id not in (source, target):
            raise ValidationError("The form does not name one of this node's edges.", [
                Problem("/form", "type, source and target, this node at one end")])  # fmt: skip
        self.edge_type(type)
        direction = "out" if source == id else "in"
        other = target if direction == "out" else source
        answer = reader.call("get_neighbors", {"id": id, "direction": direction, "edge_types": [type],
                                               "limit": NEIGHBOUR_LIMIT})  # fmt: skip
        for item in answer["items"]:
            if item["node"]["id"] == other:
                return item["edge"]
        raise NotFoundError("edge", f"{type} {source} -> {target}")

    def edge_form(self, reader: Reader, id: str, ref: Mapping[str, str], token: str) -> View:
        edge = self._edge(reader, id, ref)
        return self._edge_view(id, edge, edge["properties"], token, int(edge["revision"]))

    def _edge_view(self, id: str, edge: Mapping[str, Any], properties: Mapping[str, Any], token: str,
                   revision: int, *, errors: Mapping[str, list[str]] | None = None, general: Sequence[str] = (),
                   conflict: bool = False) -> View:  # fmt: skip
        edge_type = self.edge_type(edge["type"])
        fields: list[Field]
        fields, left = fields_of(self.model, edge_type, properties)
        return View("edge_edit.html.j2", {"id": id, "edge": edge, "edge_type": edge_type, "fields": fields,
                                          "left": left, "token": token, "revision": revision,
                                          "errors": errors or {}, "general": list(general), "conflict": conflict},
                    title=f"Edit {edge['type']} {edge['source']} → {edge['target']}")  # fmt: skip

    def save_edge(self, reader: Reader, id: str, form: Sequence[tuple[str, str]], token: str) -> dict[str, Any] | View:
        """Write a submitted edge form with `upsert_edge` at the revision it was opened at: the tool's answer, else
        the form again (the tool's problems by field, or the conflict with what the edge holds now)."""
        given = dict(form)
        edge = self._edge(reader, id, given, "_")
        raw = given.get("_revision", "")
        if not WHOLE.fullmatch(raw):
            problem = Problem("/form/_revision", "a whole number, the revision the form was opened at")
            raise ValidationError("The form has no revision to write at; open the edge's page again.", [problem])
        edge_type = self.edge_type(edge["type"])
        _, left = fields_of(self.model, edge_type, {})
        if left:  # upsert_edge replaces every property: a form that cannot hold one would remove it
            raise ValidationError("This edge type has properties a form cannot hold; change it through the API.",
                                  [Problem("/form", f"not editable here: {', '.join(left)}")])  # fmt: skip
        values = form_values(self.model, edge_type, form)
        sent = {**edge["properties"], **values}
        properties = {k: v for k, v in sent.items() if v is not None}
        try:
            answer = reader.call("upsert_edge", {"type": edge["type"], "source": edge["source"],
                                                 "target": edge["target"], "properties": properties,
                                                 "expected_revision": int(raw)})  # fmt: skip
        except ConflictError as conflict:
            return self._edge_view(id, edge, properties, token, int(edge["revision"]), general=[str(conflict)],
                                   conflict=True)  # fmt: skip
        except ValidationError as invalid:
            errors, general = by_field(invalid.problems, list(edge_type.properties))
            return self._edge_view(id, edge, properties, token, int(raw), errors=errors,
                                   general=[str(invalid), *general])  # fmt: skip
        return answer

    # -- a new edge with properties ------------------------------------------------------------------------------
    def new_edge_form(self, reader: Reader, id: str, name: str, token: str) -> View:
        """The form adding an edge under the edge name `name` at the node `id` (read as the caller: a node it may
        not read is the tool's refusal)."""
        node = reader.call("get_node", {"id": id, "summary": True})["node"]
        end = self.views.end_named(node["type"], name, "/query/name")
        return self._new_edge_view(node, end, {}, "", token)

    def _new_edge_view(self, node: Mapping[str, Any], end: EdgeEnd, properties: Mapping[str, Any], other: str,
                       token: str, *, errors: Mapping[str, list[str]] | None = None, general: Sequence[str] = (),
                       exists: Mapping[str, str] | None = None) -> View:  # fmt: skip
        fields, left = fields_of(self.model, end.edge, properties)
        return View("edge_new.html.j2", {"node": node, "heading": self.views.title_of(node), "end": end,
                                         "fields": fields, "left": left, "other": other, "token": token,
                                         "errors": errors or {}, "general": list(general), "exists": exists},
                    title=f"Add {end.name} to {node['id']}")  # fmt: skip

    def add_edge(self, reader: Reader, id: str, form: Sequence[tuple[str, str]], token: str) -> dict[str, Any] | View:
        """Write a submitted new-edge form with `upsert_edge`, expected new: the tool's answer, else the form
        again holding what was sent (the tool's problems by field, or, when the edge exists, a link to it)."""
        given = dict(form)
        node = reader.call("get_node", {"id": id, "summary": True})["node"]
        end = self.views.end_named(node["type"], given.get("_name", ""), "/form/_name")
        values = form_values(self.model, end.edge, form)
        properties = {k: v for k, v in values.items() if v is not None}
        other = given.get(OTHER_FIELD, "").strip()
        source, target = (id, other) if end.direction == "out" else (other, id)
        try:
            answer = reader.call("upsert_edge", {"type": end.edge.name, "source": source, "target": target,
                                                 "properties": properties, "expected_revision": 0})  # fmt: skip
        except ConflictError:
            general = [f"This node has a {end.name} edge with {other!r} already; nothing was written. Edit that "
                       "edge's properties instead."]  # fmt: skip
            exists = {"type": end.edge.name, "source": source, "target": target}
            return self._new_edge_view(node, end, properties, other, token, general=general, exists=exists)
        except ValidationError as invalid:
            far = "/target" if end.direction == "out" else "/source"
            errors, general = by_field(invalid.problems, list(end.edge.properties), {far: OTHER_FIELD})
            return self._new_edge_view(node, end, properties, other, token, errors=errors,
                                       general=[str(invalid), *general])  # fmt: skip
        return answer
