"""The handlers of the registry's tools, by name. Each is `(CallContext, arguments) -> result object`."""

from __future__ import annotations

from collections.abc import Mapping

from core.dispatch import Handler
from core.tools.audit import get_audit_log
from core.tools.changes import get_changes
from core.tools.model import describe_model
from core.tools.nodes import find_nodes, get_node
from core.tools.query import query_graph
from core.tools.traversal import find_paths, get_neighbors
from core.tools.writes import delete_edge, delete_node, patch_node, upsert_edge, upsert_node, write_batch

__all__ = ["HANDLERS"]

HANDLERS: Mapping[str, Handler] = {
    "describe_model": describe_model,
    "get_node": get_node,
    "find_nodes": find_nodes,
    "get_neighbors": get_neighbors,
    "find_paths": find_paths,
    "query_graph": query_graph,
    "get_changes": get_changes,
    "upsert_node": upsert_node,
    "delete_node": delete_node,
    "upsert_edge": upsert_edge,
    "delete_edge": delete_edge,
    "write_batch": write_batch,
    "patch_node": patch_node,
    "get_audit_log": get_audit_log,
}
