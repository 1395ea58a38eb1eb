"""canon's resource URIs, spelled here and nowhere else: the `canon://` scheme, the fixed URIs, and the builders
and parsers of the others.

* `canon://model`: the whole model; `canon://changes`: the latest change log entries;
* `canon://types/{name}`: one node or edge type's schema;
* `canon://nodes/{type}/{id}`: one node (the one resource template).

Surfaces that map URIs onto paths (REST's `/api/resources/<path>`) take the part after the scheme (`path_of`).
"""

from __future__ import annotations

import re

__all__ = [
    "CHANGES_URI",
    "MODEL_URI",
    "NODE_TEMPLATE",
    "SCHEME",
    "node_of",
    "node_uri",
    "path_of",
    "type_of",
    "type_uri",
]

SCHEME = "canon://"
MODEL_URI = f"{SCHEME}model"
CHANGES_URI = f"{SCHEME}changes"
NODE_TEMPLATE = SCHEME + "nodes/{type}/{id}"
_TYPES = f"{SCHEME}types/"
_NODE = re.compile(rf"^{re.escape(SCHEME)}nodes/(?P<type>[^/]+)/(?P<id>[^/]+)$")


def node_uri(type_: str, id_: str) -> str:
    """`canon://nodes/{type}/{id}` of one node."""
    return NODE_TEMPLATE.format(type=type_, id=id_)


def node_of(uri: str) -> tuple[str, str] | None:
    """The (type, id) a node URI names; None when `uri` is not one."""
    match = _NODE.match(uri)
    return (match["type"], match["id"]) if match else None


def type_uri(name: str) -> str:
    """`canon://types/{name}` of one node or edge type's schema."""
    return f"{_TYPES}{name}"


def type_of(uri: str) -> str | None:
    """The type name a type-schema URI names; None when `uri` is not one."""
    return uri.removeprefix(_TYPES) if uri.startswith(_TYPES) else None


def path_of(uri: str) -> str:
    """A URI or URI template without its scheme: `canon://types/Team` -> `types/Team`."""
    return uri.removeprefix(SCHEME)
