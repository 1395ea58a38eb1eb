"""Editing a node's properties from a form generated from its type's schema, through `patch_node`.

The form (`fields_of`) has one field per property the form can hold: text (a textarea when it may be long), a
number, a date, a choice for an enum or a boolean, and an array of text or numbers as one item per line. Objects
and other shapes are left to the API (the page says so). A submitted form becomes a JSON Merge Patch
(`patch_of`): a field's value as its schema reads it, an emptied field `null` (the property removed), with the
revision the form was opened at as `expected_revision`, so a node someone changed meanwhile is a conflict, never
a lost update. The tool validates the patch against the same schema as every surface; its problems come back
with their pointers (`/properties/<name>`), which the page shows next to the field they concern.

Who may read a node is two fields of their own on the New and edit forms (`access_fields`, `access_of`): its
visibility (a choice of the three; on a New form first "the type's default", which sends nothing, so the tool gives
the type's default as for any caller who leaves it out) and its readers (`user:NAME` or `group:NAME`, one a line).
They go to `upsert_node` and `patch_node` as the tool's own `visibility` and `readers` arguments, which the tool
checks as it does for every surface (a value none of the three, a reader of the wrong shape, readers on a node
that is not restricted); its problems at `/visibility` and `/readers` are shown next to these fields.

Forms are protected against cross-site request forgery by a double-submit token (`CSRF_COOKIE`): a random token
in a `SameSite=Strict`, `HttpOnly` cookie under the pages' path, and the same token in a hidden field; a POST
whose field does not match its cookie is refused before any tool runs. A page on another site can neither read
the cookie nor make the browser send it with its own POST.
"""

from __future__ import annotations

import hmac
import re
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from core.lang.model import EdgeType, Model, NodeType
from core.values.errors import Problem, ValidationError
from core.values.records import VISIBILITIES
from generators.pages.filters import typed

__all__ = [
    "ACCESS_POINTERS", "CSRF_COOKIE", "CSRF_FIELD", "READERS_FIELD", "VISIBILITY_FIELD", "Access", "Field",
    "access_fields", "access_of", "by_field", "csrf_matches", "fields_of", "form_values", "new_token", "patch_of",
]  # fmt: skip

CSRF_COOKIE = "canon_pages_csrf"
CSRF_FIELD = "_csrf"
LONG_TEXT = 200  # characters: a text property that may be longer gets a textarea
VISIBILITY_FIELD = "_visibility"  # a node's visibility (a property name cannot start with "_")
READERS_FIELD = "_readers"  # its readers, one a line
ACCESS_POINTERS = {"/visibility": VISIBILITY_FIELD, "/readers": READERS_FIELD}  # the write tools' arguments
READER_SEPARATORS = re.compile(r"[\s,]+")  # a reader (user:NAME, group:NAME) holds neither
REQUIRED = re.compile(r"'([a-z][a-z0-9_]{0,63})' is a required property")


@dataclass(frozen=True)
class Field:
    """One form field: the property it edits, how it is shown, and what it holds now."""

    name: str
    widget: str  # text, textarea, url, number, date, select, lines
    value: str  # as the field shows it
    required: bool
    description: str = ""
    choices: tuple[tuple[str, str], ...] = ()  # (value, label) for a select
    minimum: Any = None
    maximum: Any = None
    step: str | None = None
    max_length: int | None = None
    deprecated: bool = False


@dataclass(frozen=True)
class Access:
    """A form's visibility and readers fields: what each holds, and the visibility's choices (value, label)."""

    visibility: str
    readers: str  # one reader a line
    choices: tuple[tuple[str, str], ...]


def access_fields(visibility: str, readers: Sequence[str] | str, default: str | None = None) -> Access:
    """The fields showing `visibility` and `readers` (a list, or the text a form sent); a New form passes the
    type's `default` (as "internal", or "restricted to group:x"), its first choice, which sends nothing."""
    choices = tuple((v, v) for v in VISIBILITIES)
    if default is not None:
        choices = (("", f"the type's default ({default})"), *choices)
    shown = readers if isinstance(readers, str) else "\n".join(readers)
    return Access(visibility, shown, choices)


def access_of(form: Sequence[tuple[str, str]]) -> dict[str, Any]:
    """The `visibility` and `readers` arguments a submitted form gives the write tools: a field the form did not
    send is left out, as is a visibility left at the type's default (""); readers are split at white space and
    commas, and none given is `None` on a form that sent the field (patch_node: remove them). Whatever the person
    chose is passed on as typed: the tool decides what is valid, for every surface alike."""
    given = dict(form)
    access: dict[str, Any] = {}
    if given.get(VISIBILITY_FIELD, "") != "":
        access["visibility"] = given[VISIBILITY_FIELD]
    if READERS_FIELD in given:
        readers = [r for r in READER_SEPARATORS.split(given[READERS_FIELD]) if r]
        access["readers"] = readers or None
    return access


def by_field(
    problems: Sequence[Problem], names: Sequence[str], own: Mapping[str, str] = {}
) -> tuple[dict[str, list[str]], list[str]]:
    """A tool's problems as the form shows them: by the field they concern (a property at `/properties/<name>`,
    a required one missing at `/properties`, or one of `own`'s pointers or a pointer inside one, such as
    `/readers/0`), and the rest with their pointers."""
    errors: dict[str, list[str]] = {}
    general: list[str] = []
    for problem in problems:
        name = problem.pointer.removeprefix("/properties/").split("/", 1)[0]
        missing = REQUIRED.search(problem.message) if problem.pointer == "/properties" else None
        mine = next((own[p] for p in own if problem.pointer == p or problem.pointer.startswith(p + "/")), None)
        if mine is not None:
            errors.setdefault(mine, []).append(problem.message)
        elif problem.pointer.startswith("/properties/") and name in names:
            errors.setdefault(name, []).append(problem.message)
        elif missing is not None and missing[1] in names:
            errors.setdefault(missing[1], []).append("required: give it a value")
        else:
            general.append(f"{problem.pointer}: {problem.message}")
    return errors, general


def new_token() -> str:
    return secrets.token_urlsafe(32)


def csrf_matches(cookie: str | None, field: str | None) -> bool:
    """Whether a POST's hidden token is its cookie's (compared in constant time); both must be there."""
    if not cookie or not field:
        return False
    return hmac.compare_digest(cookie.encode("utf-8", "surrogatepass"), field.encode("utf-8", "surrogatepass"))


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _widget(schema: Mapping[str, Any], model: Model) -> str | None:
    kind = schema.get("type")
    if "enum" in schema or kind == "boolean":
        return "select"
    if kind in ("integer", "number"):
        return "number"
    if kind == "string":
        if schema.get("format") == "date":
            return "date"
        if schema.get("format") in ("uri", "iri", "url"):
            return "url"
        return "textarea" if int(schema.get("maxLength", 10_000)) > LONG_TEXT else "text"
    if kind == "array" and isinstance(schema.get("items"), Mapping):
        items = model.resolved(schema["items"])
        return "lines" if items.get("type") in ("string", "integer", "number") and "enum" not in items else None
    return None


def fields_of(
    model: Model, node_type: NodeType | EdgeType, properties: Mapping[str, Any]
) -> tuple[list[Field], list[str]]:
    """The form's fields for a node (or edge) of `node_type` holding `properties`, and the properties it cannot
    edit."""
    required = set(node_type.schema.get("required", []))
    fields: list[Field] = []
    left: list[str] = []
    for name, declared in node_type.properties.items():
        schema = model.resolved(declared)
        widget = _widget(schema, model)
        if widget is None:
            left.append(name)
            continue
        value = properties.get(name)
        shown = "\n".join(_text(v) for v in value) if widget == "lines" and isinstance(value, list) else _text(value)
        choices: tuple[tuple[str, str], ...] = ()
        if widget == "select":
            options = schema.get("enum", [True, False])
            choices = (("", "(not set)"), *((_text(v), _text(v)) for v in options))
        fields.append(Field(
            name, widget, shown, name in required, str(schema.get("description", "")), choices,
            schema.get("minimum"), schema.get("maximum"), "1" if schema.get("type") == "integer" else "any",
            schema.get("maxLength"), bool(declared.get("deprecated")),
        ))  # fmt: skip
    return fields, left


def patch_of(model: Model, node_type: NodeType, form: Sequence[tuple[str, str]]) -> tuple[dict[str, Any], int]:
    """The merge patch and expected revision a submitted form asks for (`ValidationError` for a form that is
    not one of these pages': no revision, an unknown property)."""
    given = dict(form)
    raw = given.get("_revision", "")
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 19):
        problem = Problem("/form/_revision", "a whole number, the revision the form was opened at")
        raise ValidationError("The form has no revision to write at; open the node's edit page again.", [problem])
    return form_values(model, node_type, form), int(raw)


def form_values(model: Model, node_type: NodeType | EdgeType, form: Sequence[tuple[str, str]]) -> dict[str, Any]:
    """Each property field the form sent, as its schema reads it; an emptied field is None (`ValidationError`
    for a field that is not one of the type's editable properties). Fields starting with `_` are the form's own."""
    given = dict(form)
    fields, _ = fields_of(model, node_type, {})
    editable = {f.name: f for f in fields}
    unknown = [k for k in given if not k.startswith("_") and k not in editable]
    if unknown:
        name = getattr(node_type, "name", "")
        problems = [Problem(f"/form/{k}", f"{name} has no editable property {k!r}") for k in unknown]
        raise ValidationError("The form names properties this type does not have.", problems)
    values: dict[str, Any] = {}
    for name, field in editable.items():
        if name not in given:
            continue  # a field the form did not send is left as it is
        text = given[name].replace("\r\n", "\n")
        if text.strip() == "":
            values[name] = None
        elif field.widget == "lines":
            items = model.resolved(model.resolved(node_type.properties[name]).get("items", {}))
            values[name] = [typed(items, line.strip(), "eq") for line in text.split("\n") if line.strip()]
        else:
            values[name] = typed(model.resolved(node_type.properties[name]), text, "eq")
    return values
