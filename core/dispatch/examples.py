"""Examples for tool descriptions and server instructions, drawn from the served model and its data.

A tool description shows a call an agent can make as it stands: real type names and real ids of the model being
served, never the sample organisation's. Definitions in `schema/tools/` write `{{id}}`, `{{type}}`, `{{edge}}`,
`{{target}}` and `{{target_type}}` where an example needs them; `Examples.fill` puts in one edge of the data (its
source, type and target) and the source's type. Only public nodes are ever named, since a tool list is shown to
anonymous callers too; with no public edge, the names are the model's and the ids say what goes there.
The choice is deterministic (the first public edge in the store's order), so generated artifacts are reproducible.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import islice

from core.lang.model import Model
from core.store import Store

__all__ = ["Examples"]

_SCAN = 500  # edges looked at for a public one: bounded, so a big store starts as fast as a small one


@dataclass(frozen=True)
class Examples:
    type: str
    id: str
    edge: str
    target: str
    target_type: str

    @classmethod
    def of_model(cls, model: Model) -> Examples:
        """Examples from the model alone: its first node type, and its first edge type from that type."""
        node_type = next(iter(model.node_types))
        edge = next((e for e in model.edge_types.values() if node_type in e.sources), None)
        edge_name = edge.name if edge is not None else next(iter(model.edge_types), "EDGE_TYPE")
        target_type = min(edge.targets) if edge is not None else node_type
        return cls(node_type, f"<{node_type} id>", edge_name, f"<{target_type} id>", target_type)

    @classmethod
    def of_store(cls, model: Model, store: Store) -> Examples:
        """Examples from the data: the first edge between two public nodes (the model's alone if there is none)."""
        edges = list(islice(store.iter_topology(), _SCAN))
        nodes = store.nodes(sorted({id for _, source, target in edges for id in (source, target)}))
        public = {id: node.type for id, node in nodes.items() if node.visibility == "public"}
        for edge_type, source, target in edges:
            if source in public and target in public and edge_type in model.edge_types:
                return cls(public[source], source, edge_type, target, public[target])
        return cls.of_model(model)

    def fill(self, text: str) -> str:
        """`text` with every placeholder replaced."""
        for name in ("id", "type", "edge", "target_type", "target"):
            text = text.replace("{{" + name + "}}", getattr(self, name))
        return text


MAIN_TYPES = 8  # node types the instructions name; describe_model lists them all


def instructions(model: Model, examples: Examples) -> str:
    """The server's `instructions`: which model it serves, its main types and a good first call (within 1 KB)."""
    names = list(model.node_types)
    shown = ", ".join(names[:MAIN_TYPES]) + (f" and {len(names) - MAIN_TYPES} more" if len(names) > MAIN_TYPES else "")
    return (
        f"canon serves the knowledge graph of the model {model.name} {model.version}: nodes of {len(names)} types "
        f"({shown}) joined by {len(model.edge_types)} edge types. With words, start with "
        f'search({{"query": "..."}}); with an id, get_node({{"id": "{examples.id}"}}); describe_model({{}}) shows the '
        f'types. find_nodes({{"type": "{examples.type}", "where": {{...}}}}) filters exactly, '
        f'get_neighbors({{"id": "{examples.id}", "summary": true}}) or find_paths follow '
        f"relationships. Lists are paginated (limit, cursor → next_cursor) and say their total; summary (id, type, "
        "name) and fields (chosen properties) shorten nodes; get_changes resumes a feed of changes from a revision."
    )
