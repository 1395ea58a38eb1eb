"""canon's resource URIs, spelled here and nowhere else: the `canon://` scheme, the fixed URIs, and the builders
and parsers of the others.

* `canon://model`: the whole model; `canon://model/at/{revision}`: the model in effect at a past revision (the
  store's model history); `canon://changes`: the latest change log entries;
* `canon://types/{name}`: one node or edge type's schema;
* `canon://nodes/{type}/{id}`: one node (a resource template, as is the model at a revision);
  `canon://nodes/{type}/{id}/at/{revision}`: that node as it was at a past revision (the change log);
* `canon://proposals/{id}`: one proposal (`core.dispatch.proposals`), its state, diff and discussion.

Surfaces that map URIs onto paths (REST's `/api/resources/<path>`) take the part after the scheme (`path_of`).
"""

from __future__ import annotations

import re

__all__ = [
    "CHANGES_URI",
    "MODEL_AT_TEMPLATE",
    "MODEL_URI",
    "NODE_AT_TEMPLATE",
    "NODE_TEMPLATE",
    "PROPOSAL_TEMPLATE",
    "SCHEME",
    "model_at_of",
    "model_at_uri",
    "node_at_of",
    "node_at_uri",
    "node_of",
    "node_uri",
    "path_of",
    "proposal_of",
    "proposal_uri",
    "type_of",
    "type_uri",
]

SCHEME = "canon://"
MODEL_URI = f"{SCHEME}model"
CHANGES_URI = f"{SCHEME}changes"
NODE_TEMPLATE = SCHEME + "nodes/{type}/{id}"
MODEL_AT_TEMPLATE = MODEL_URI + "/at/{revision}"
_MODEL_AT = re.compile(rf"^{re.escape(MODEL_URI)}/at/(?P<revision>[0-9]{{1,18}})$")
_TYPES = f"{SCHEME}types/"
_NODE = re.compile(rf"^{re.escape(SCHEME)}nodes/(?P<type>[^/]+)/(?P<id>[^/]+)$")
NODE_AT_TEMPLATE = NODE_TEMPLATE + "/at/{revision}"
_NODE_AT = re.compile(rf"^{re.escape(SCHEME)}nodes/(?P<type>[^/]+)/(?P<id>[^/]+)/at/(?P<revision>[0-9]{{1,18}})$")

PROPOSAL_TEMPLATE = SCHEME + "proposals/{id}"
_PROPOSAL = re.compile(rf"^{re.escape(SCHEME)}proposals/(?P<id>p-[0-9a-f]{{12}})$")


def proposal_uri(id_: str) -> str:
    """`canon://proposals/{id}` of one proposal."""
    return PROPOSAL_TEMPLATE.format(id=id_)


def proposal_of(uri: str) -> str | None:
    """The id a proposal URI names; None when `uri` is not one."""
    match = _PROPOSAL.match(uri)
    return match["id"] if match else None


def node_uri(type_: str, id_: str) -> str:
    """`canon://nodes/{type}/{id}` of one node."""
    return NODE_TEMPLATE.format(type=type_, id=id_)


def node_of(uri: str) -> tuple[str, str] | None:
    """The (type, id) a node URI names; None when `uri` is not one."""
    match = _NODE.match(uri)
    return (match["type"], match["id"]) if match else None


def node_at_uri(type_: str, id_: str, revision: int) -> str:
    """`canon://nodes/{type}/{id}/at/{revision}`: one node as it was at `revision`."""
    return NODE_AT_TEMPLATE.format(type=type_, id=id_, revision=revision)


def node_at_of(uri: str) -> tuple[str, str, int] | None:
    """The (type, id, revision) a node-at URI names; None when `uri` is not one."""
    match = _NODE_AT.match(uri)
    return (match["type"], match["id"], int(match["revision"])) if match else None


def model_at_uri(revision: int) -> str:
    """`canon://model/at/{revision}`: the model in effect at `revision`."""
    return MODEL_AT_TEMPLATE.format(revision=revision)


def model_at_of(uri: str) -> int | None:
    """The revision a model-at URI names; None when `uri` is not one."""
    match = _MODEL_AT.match(uri)
    return int(match["revision"]) if match else None


def type_uri(name: str) -> str:
    """`canon://types/{name}` of one node or edge type's schema."""
    return f"{_TYPES}{name}"


def type_of(uri: str) -> str | None:
    """The type name a type-schema URI names; None when `uri` is not one."""
    return uri.removeprefix(_TYPES) if uri.startswith(_TYPES) else None


def path_of(uri: str) -> str:
    """A URI or URI template without its scheme: `canon://types/Team` -> `types/Team`."""
    return uri.removeprefix(SCHEME)
