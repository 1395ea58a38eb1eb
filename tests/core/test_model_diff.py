"""`canon model diff`'s classifications, held to a corpus of model changes: each change is made to a small model,
both models' artifacts are generated as `canon generate` makes them, and the worst classification on each surface
(MCP manifest, REST/OpenAPI, GraphQL SDL, llms.txt) and for the write rules every surface enforces must be the
expected one. B breaking, D needs-data-check, C compatible, N none (nothing changed there).

GraphQL takes a node's properties as one JSON input, so its SDL shows no input rule (required, bounds, pattern,
format): those changes show on the MCP and REST rows, and on the write rules' row, since the dispatcher applies the
type schemas to every surface's writes (GraphQL's too). `test_model_diff_reality.py` holds these rows to what old
clients meet on a server running the new model."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from core.lang.model import Model, parse_model
from core.seam.model_diff import WRITES, ModelDiff, at_version, diff_artifacts, diff_type_schemas, diff_write_rules
from core.seam.rendering import render_model
from core.seam.surfaces import discover

Document = dict[str, Any]
Change = Callable[[Document], None]

BASE: Document = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "urn:canon:model:tiny",
    "title": "Tiny",
    "description": "Teams and the services they own.",
    "x-canon-model": {"name": "tiny", "version": "1.0.0", "summary": "Teams and services."},
    "$defs": {
        "Team": {
            "type": "object",
            "description": "A team.",
            "x-canon-node": {"key": "slug", "display": "name", "plural": "teams"},
            "properties": {
                "slug": {"type": "string", "pattern": "^[a-z][a-z0-9-]*$", "maxLength": 40, "description": "Id."},
                "name": {"type": "string", "minLength": 1, "maxLength": 80, "description": "Name."},
                "area": {"type": "string", "enum": ["product", "platform", "data"], "description": "Area."},
                "size": {"type": "integer", "minimum": 1, "maximum": 50, "description": "Head count."},
                "founded": {"type": "string", "format": "date", "description": "Founded."},
            },
            "required": ["slug", "name"],
            "additionalProperties": False,
        },
        "Service": {
            "type": "object",
            "description": "A service.",
            "x-canon-node": {"key": "name", "display": "name", "plural": "services"},
            "properties": {
                "name": {"type": "string", "minLength": 1, "maxLength": 60, "description": "Name."},
                "tier": {"type": "integer", "minimum": 1, "maximum": 3, "description": "Tier."},
            },
            "required": ["name"],
            "additionalProperties": False,
        },
        "owns": {
            "type": "object",
            "description": "A team owns a service.",
            "x-canon-edge": {
                "source": ["Team"],
                "target": ["Service"],
                "cardinality": "one-to-many",
                "inverse": "owned_by",
            },
            "properties": {"since": {"type": "string", "format": "date", "description": "Since."}},
            "additionalProperties": False,
        },
        "depends_on": {
            "type": "object",
            "description": "A service depends on another.",
            "x-canon-edge": {
                "source": ["Service"],
                "target": ["Service", "Team"],
                "cardinality": "many-to-many",
                "inverse": "dependents",
            },
            "properties": {},
            "additionalProperties": False,
        },
    },
}


def _defs(d: Document) -> Document:
    defs: Document = d["$defs"]
    return defs


def _team(d: Document) -> Document:
    team: Document = _defs(d)["Team"]
    return team


def _set(path: str, value: Any) -> Change:
    """A change setting the member at `path` (slash-separated, from `$defs`) to `value`."""

    def change(d: Document) -> None:
        *parents, last = path.split("/")
        target = _defs(d)
        for part in parents:
            target = target[part]
        target[last] = value

    return change


def _drop(path: str) -> Change:
    def change(d: Document) -> None:
        *parents, last = path.split("/")
        target = _defs(d)
        for part in parents:
            target = target[part]
        del target[last]

    return change


def _both(*changes: Change) -> Change:
    def change(d: Document) -> None:
        for c in changes:
            c(d)

    return change


def _rename_type(old: str, new: str) -> Change:
    def change(d: Document) -> None:
        defs = _defs(d)
        defs[new] = defs.pop(old)
        for t in defs.values():
            edge = t.get("x-canon-edge")
            if edge is not None:
                edge["source"] = [new if s == old else s for s in edge["source"]]
                edge["target"] = [new if s == old else s for s in edge["target"]]

    return change


def _rename_property(old: str, new: str) -> Change:
    def change(d: Document) -> None:
        props = _team(d)["properties"]
        props[new] = props.pop(old)

    return change


def _model_member(name: str, value: str) -> Change:
    def change(d: Document) -> None:
        d[name] = value

    return change


_PRODUCT = {"type": "object", "description": "A product.", "x-canon-node": {"key": "name", "display": "name"},
            "properties": {"name": {"type": "string", "description": "Name."}}, "required": ["name"],
            "additionalProperties": False}  # fmt: skip
_USES = {"type": "object", "description": "A team uses a service.", "properties": {}, "additionalProperties": False,
         "x-canon-edge": {"source": ["Team"], "target": ["Service"], "cardinality": "many-to-many"}}  # fmt: skip
_BUDGET = {"type": "integer", "description": "Yearly budget."}


def _remove_service(d: Document) -> None:
    for name in ("Service", "owns"):
        del _defs(d)[name]
    _defs(d)["depends_on"]["x-canon-edge"].update(source=["Team"], target=["Team"])  # a model needs an edge type


def _required(*names: str) -> Change:
    return _set("Team/required", ["slug", "name", *names])


#   id, change, expected on: mcp rest graphql llms writes
CORPUS: list[tuple[str, Change, str]] = [
    ("node type added", _set("Product", _PRODUCT), "C C C C N"),
    ("node type removed", _remove_service, "B B B B B"),
    ("node type renamed", _rename_type("Service", "Component"), "B B B B B"),
    ("edge type added", _set("uses", _USES), "C C C C N"),
    ("edge type removed", _drop("depends_on"), "B B B B N"),
    ("edge type renamed", _rename_type("depends_on", "needs"), "B B B B N"),
    ("optional property added", _set("Team/properties/budget", _BUDGET), "C C C N C"),
    ("required property added", _both(_set("Team/properties/budget", _BUDGET), _required("budget")), "B B C N B"),
    ("property removed", _drop("Team/properties/founded"), "B B B N B"),
    ("property renamed", _rename_property("founded", "formed"), "B B B N B"),
    ("property made required", _required("size"), "B B C N B"),
    ("required property made optional", _set("Team/required", ["slug"]), "B B B N C"),
    ("enum widened", _set("Team/properties/area/enum", ["product", "platform", "data", "security"]), "C C C N C"),
    ("enum narrowed", _set("Team/properties/area/enum", ["product", "platform"]), "B B B N B"),
    ("enum added to a free string", _set("Service/properties/name/enum", ["api", "web"]), "B B B N B"),
    ("enum removed", _drop("Team/properties/area/enum"), "C C B N C"),
    ("type changed", _set("Team/properties/size/type", "string"), "B B B N B"),
    ("type widened", _set("Team/properties/size/type", "number"), "B B B N C"),
    ("format changed", _set("Team/properties/founded/format", "date-time"), "B B N N B"),
    ("format added", _set("Service/properties/name/format", "hostname"), "B B N N B"),
    ("format removed", _drop("Team/properties/founded/format"), "C C N N C"),
    ("pattern tightened", _set("Team/properties/slug/pattern", "^[a-z]+$"), "B B N N B"),
    ("pattern removed", _drop("Team/properties/slug/pattern"), "C C N N C"),
    ("minimum tightened", _set("Team/properties/size/minimum", 5), "B B N N B"),
    ("minimum loosened", _set("Team/properties/size/minimum", 0), "C C N N C"),
    ("maximum tightened", _set("Team/properties/size/maximum", 20), "B B N N B"),
    ("maximum loosened", _set("Team/properties/size/maximum", 500), "C C N N C"),
    ("maxLength tightened", _set("Team/properties/name/maxLength", 40), "B B N N B"),
    ("maxLength loosened", _set("Team/properties/name/maxLength", 200), "C C N N C"),
    ("minLength tightened", _set("Team/properties/name/minLength", 3), "B B N N B"),
    ("minLength removed", _drop("Team/properties/name/minLength"), "C C N N C"),
    ("cardinality tightened", _set("depends_on/x-canon-edge/cardinality", "many-to-one"), "C C N N B"),
    ("cardinality loosened", _set("owns/x-canon-edge/cardinality", "many-to-many"), "C C N N C"),
    ("acyclic added", _set("depends_on/x-canon-edge/acyclic", True), "C C N N B"),
    ("acyclic set false", _set("depends_on/x-canon-edge/acyclic", False), "C C N N N"),
    ("visibility default set", _set("Team/x-canon-node/defaults", {"visibility": "public"}), "C C N N C"),
    ("type description changed", _set("Team/description", "A group of people."), "C C C C N"),
    ("property description changed", _set("Team/properties/size/description", "People."), "C C C N N"),
    (
        "model title and description changed",
        _both(_model_member("title", "Small"), _model_member("description", "Another text.")),
        "N C N C N",
    ),
    ("edge property added", _set("owns/properties/note", {"type": "string", "description": "Note."}), "C C C N C"),
    ("edge property removed", _drop("owns/properties/since"), "B B B N B"),
    (
        "required edge property added",
        _both(_set("owns/properties/note", {"type": "string"}), _set("owns/required", ["note"])),
        "B B C N B",
    ),
    ("edge source widened", _set("owns/x-canon-edge/source", ["Team", "Service"]), "C C B N C"),
    ("edge target narrowed", _set("depends_on/x-canon-edge/target", ["Service"]), "C C B N B"),
    ("plural renamed", _set("Team/x-canon-node/plural", "squads"), "C C N N N"),
    ("version only", lambda d: None, "N N N N N"),
]

_LETTERS = {"B": "breaking", "D": "needs-data-check", "C": "compatible", "N": "none"}
_COLUMNS = ("mcp", "rest", "graphql", "llms", WRITES)


def corpus_model(change: Change, version: str) -> Model:
    document = copy.deepcopy(BASE)
    change(document)
    document["x-canon-model"]["version"] = version
    return parse_model(document, source="test")


@pytest.fixture(scope="module")
def base() -> tuple[Model, dict[str, dict[str, str]]]:
    """The base model and its artifacts at the version every changed model has (as `diff_models` compares them),
    generated once for the module."""
    model = corpus_model(lambda d: None, "1.0.0")
    return model, render_model(at_version(model, "2.0.0"), discover())


def _diff(base: tuple[Model, dict[str, dict[str, str]]], change: Change) -> ModelDiff:
    old, artifacts = base
    new = corpus_model(change, "2.0.0")
    surfaces = discover()
    findings = [*diff_artifacts(artifacts, render_model(new, surfaces), surfaces), *diff_type_schemas(old, new),
                *diff_write_rules(old, new)]  # fmt: skip
    return ModelDiff(old.version, new.version, tuple(findings), _COLUMNS)


def test_the_corpus_covers_at_least_40_changes() -> None:
    assert len(CORPUS) >= 40
    assert len({name for name, _, _ in CORPUS}) == len(CORPUS)


@pytest.mark.parametrize(("change", "expected"), [(c, e) for _, c, e in CORPUS], ids=[n for n, _, _ in CORPUS])
def test_each_model_change_is_classified_as_expected_on_every_surface(
    base: tuple[Model, dict[str, dict[str, str]]], change: Change, expected: str
) -> None:
    report = _diff(base, change)
    got = {s: report.classification(s) for s in _COLUMNS}
    assert got == {s: _LETTERS[e] for s, e in zip(_COLUMNS, expected.split(), strict=True)}, report.findings


def test_render_model_builds_a_model_s_artifacts_once_and_hands_out_copies(
    model: Model, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plan generates the store's model and the new one; a dry run and the apply, or the reality replay's cases,
    generate the same models again: the process keeps the last few, and no caller can change what it keeps."""
    import core.seam.rendering

    document = copy.deepcopy(dict(model.document))
    document["x-canon-model"]["version"] = "9.9.9"  # a model no other test generated in this process
    fresh = parse_model(document, source="kept.schema.json")
    built: list[str] = []
    render = core.seam.rendering.render

    def counted(registry: Any, surfaces: Any = None, check_time: Any = None) -> dict[str, dict[str, str]]:
        built.append(registry.model.version)
        return render(registry, surfaces, check_time)

    monkeypatch.setattr(core.seam.rendering, "render", counted)
    first = render_model(fresh)
    first["mcp"].clear()  # a caller's change stays its own
    again = render_model(fresh)
    assert len(built) == 1
    assert again["mcp"]
    assert again == render_model(fresh)
    assert again != render_model(model)  # another model: its own artifacts
