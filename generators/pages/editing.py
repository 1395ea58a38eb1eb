"""Editing a node's properties from a form generated from its type's schema, through `patch_node`.

The form (`fields_of`) has one field per property the form can hold: text (a textarea when it may be long), a
number, a date, a choice for an enum or a boolean, and an array of text or numbers as one item per line. Objects
and other shapes are left to the API (the page says so). A submitted form becomes a JSON Merge Patch
(`patch_of`): a field's value as its schema reads it, an emptied field `null` (the property removed), with the
revision the form was opened at as `expected_revision`, so a node someone changed meanwhile is a conflict, never
a lost update. The tool validates the patch against the same schema as every surface; its problems come back
with their pointers (`/properties/<name>`), which the page shows next to the field they concern.

Forms are protected against cross-site request forgery by a double-submit token (`CSRF_COOKIE`): a random token
in a `SameSite=Strict`, `HttpOnly` cookie under the pages' path, and the same token in a hidden field; a POST
whose field does not match its cookie is refused before any tool runs. A page on another site can neither read
the cookie nor make the browser send it with its own POST.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from core.lang.model import EdgeType, Model, NodeType
from core.values.errors import Problem, ValidationError
from generators.pages.filters import typed

__all__ = ["CSRF_COOKIE", "CSRF_FIELD", "Field", "csrf_matches", "fields_of", "form_values", "new_token", "patch_of"]

CSRF_COOKIE = "canon_pages_csrf"
CSRF_FIELD = "_csrf"
LONG_TEXT = 200  # characters: a text property that may be longer gets a textarea


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
