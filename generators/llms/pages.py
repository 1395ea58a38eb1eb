"""What each page of the llms.txt surface shows, and where its data comes from.

`Site` gathers every page's data through the one dispatch path as the anonymous principal (so only public nodes
appear, and each read is audited under the surface's name), keeps the lists within the surface's bounds, renders
the page with `generators.llms.markdown`, and remembers the result until the store's revision changes.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import quote

from core.dispatch.prompts import PROMPTS, PromptDefinition
from core.dispatch.registry import Registry, ResourceDefinition, ToolDefinition
from core.dispatch.resources import read_resource
from core.lang.model import deprecated_description
from core.seam.surfaces import SurfaceHost
from core.values.principal import ANONYMOUS, ROLES
from core.values.uris import NODE_AT_TEMPLATE, NODE_TEMPLATE, node_uri, type_of
from generators.llms.markdown import (
    environment,
    first_sentence,
    label,
    node_url,
    oneline,
    tidy,
    to_json,
    type_label,
)
from generators.naming import resource_field_name, resource_path, rest_route

__all__ = ["Bounds", "Group", "Link", "Site", "role_for", "share"]

PAGE_LIMIT = 100  # find_nodes' largest page
NEIGHBOUR_LIMIT = 200  # get_neighbors' largest page


class Bounds(Protocol):
    """How much of the public graph the pages list (the fields of `generators.llms.LlmsSurface`)."""

    max_nodes: int  # public nodes listed in llms.txt, shared between the types
    max_full_nodes: int  # node pages inlined in llms-full.txt
    max_type_nodes: int  # public nodes listed on a node type's page
    max_neighbours: int  # neighbours listed per edge type and direction on a node's page
    max_resource_chars: int  # a resource's content is inlined up to this size
    max_cached: int  # pages and reads kept per revision


def role_for(permission: str) -> str:
    """The smallest role that grants `permission` (read -> reader)."""
    return min((r for r, granted in ROLES.items() if permission in granted), key=lambda r: len(ROLES[r]))


def share(counts: list[int], room: int) -> list[int]:
    """Split `room` list places fairly between groups of `counts` items (each group gets what it can use)."""
    given = [0] * len(counts)
    while room > 0:
        open_groups = [i for i, c in enumerate(counts) if given[i] < c]
        if not open_groups:
            break
        each = max(1, room // len(open_groups))
        for i in open_groups:
            take = min(each, counts[i] - given[i], room)
            given[i] += take
            room -= take
    return given


# -- what the pages show --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Link:
    title: str
    url: str
    note: str = ""


@dataclass(frozen=True)
class Group:
    """The neighbours of a node over one edge type in one direction."""

    name: str  # the edge as seen from the node: its type's name out, its inverse name in (`Model.edge_ends`)
    edge_type: str
    direction: str  # "out" or "in"
    links: tuple[Link, ...]
    total: int


class Site:
    """Every page of the surface for one registry, rendered on demand and kept per store revision."""

    def __init__(self, host: SurfaceHost, registry: Registry, bounds: Bounds) -> None:
        self.host = host
        self.registry = registry
        self.model = registry.model
        self.bounds = bounds
        self.env = environment()
        self.base = host.settings.base_url  # every link starts with it: the public URL or the root path, or ""
        self._lock = threading.RLock()
        self._revision: int | None = None
        self._memo: dict[tuple[str, ...], Any] = {}

    # -- cache ---------------------------------------------------------------------------------------------------
    def page(self, path: str) -> bytes | None:
        """The page at `path` as UTF-8, or None; the same bytes until the store's revision changes."""
        with self._lock:
            revision = self.host.revision()
            if revision != self._revision:
                self._memo.clear()
                self._revision = revision
            text: str | None = self._remember(("page", path), lambda: self.render(path))
            return None if text is None else text.encode()

    def _remember(self, key: tuple[str, ...], compute: Callable[[], Any]) -> Any:
        if key in self._memo:
            return self._memo[key]
        value = compute()
        while len(self._memo) >= self.bounds.max_cached:  # oldest first: crawlers walk forwards
            del self._memo[next(iter(self._memo))]
        self._memo[key] = value
        return value

    # -- routing -------------------------------------------------------------------------------------------------
    def render(self, path: str) -> str | None:
        if path == "/llms.txt":
            return self.llms_txt()
        if path == "/llms-full.txt":
            return self.llms_full()
        if not path.endswith(".md"):
            return None
        section, _, rest = path.removesuffix(".md").removeprefix("/").partition("/")
        if section == "nodes":
            node_type, _, id = rest.partition("/")
            return self.node_page(node_type, id) if id and "/" not in id else None
        pages: dict[str, Callable[[str], str | None]] = {
            "tools": self.tool_page, "types": self.type_page, "resources": self.resource_page,
            "prompts": self.prompt_page,
        }  # fmt: skip
        return pages[section](rest) if section in pages and rest and "/" not in rest else None

    def _render(self, template: str, **context: Any) -> str:
        return tidy(self.env.get_template(template).render(base=self.base, **context))

    # -- reads through the dispatcher, as the anonymous principal -------------------------------------------------
    def _call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any] | None:
        """The tool's result for the anonymous principal; None when it is an error (not found, not public, ...)."""
        result = self.host.call_tool(ANONYMOUS, tool, arguments)
        return result.value

    def _public_nodes(self, node_type: str, bound: int) -> tuple[list[dict[str, Any]], int]:
        """The first `bound` public nodes of a type by id, and how many public nodes it has in all."""

        def compute() -> tuple[list[dict[str, Any]], int]:
            found: list[dict[str, Any]] = []
            arguments: dict[str, Any] = {"type": node_type, "limit": min(PAGE_LIMIT, max(1, bound))}
            total = 0
            while True:
                answer = self._call("find_nodes", arguments)
                if answer is None:
                    raise RuntimeError(f"find_nodes failed for the public {node_type} nodes")
                found += answer["items"]
                total = int(answer["total"])
                if answer["next_cursor"] is None or len(found) >= bound:
                    return found[:bound], total
                arguments["cursor"] = answer["next_cursor"]

        result: tuple[list[dict[str, Any]], int] = self._remember(("nodes", node_type, str(bound)), compute)
        return result

    def _title(self, node: Mapping[str, Any]) -> str:
        node_type = self.model.node_types.get(str(node["type"]))
        value = node["properties"].get(node_type.display) if node_type else None
        return oneline(value) if value not in (None, "") else str(node["id"])

    def _node_link(self, node: Mapping[str, Any]) -> Link:
        return Link(label(self._title(node)), node_url(node["type"], node["id"]), f"{node['type']} `{node['id']}`")

    def _listed_nodes(self, room: int) -> list[dict[str, Any]]:
        """Up to `room` public nodes, shared fairly between the node types (model order, then id order)."""
        lists = [self._public_nodes(name, room)[0] for name in self.model.node_types]
        counts = share([len(nodes) for nodes in lists], room)
        return [n for nodes, count in zip(lists, counts, strict=True) for n in nodes[:count]]

    def _rest(self, tool: str, **values: str) -> str | None:
        """`METHOD /api/path` of a tool, from its REST hint, with path variables in `values` filled in."""
        if tool not in {t.name for t in self.registry.tools}:
            return None
        method, path = rest_route(self.registry.tool(tool))  # the REST surface's own mapping (generators.naming)
        path = re.sub(r"{(\w+)}", lambda m: quote(values[m[1]], safe="") if m[1] in values else m[0], path)
        return f"{method} {path}"

    # -- the index and the full file -----------------------------------------------------------------------------
    def _intro(self) -> dict[str, Any]:
        about: Mapping[str, Any] = self.model.document.get("x-canon-model", {})
        summary = ". ".join(str(s).rstrip(".") for s in (self.model.document.get("title"), about.get("summary")) if s)
        return {"model": self.model, "bounds": self.bounds, "node_types": len(self.model.node_types),
                "edge_types": len(self.model.edge_types), "summary": summary}  # fmt: skip

    def llms_txt(self) -> str:
        tools = [Link(t.name, f"/tools/{t.name}.md", first_sentence(t.description))
                 for t in self.registry.tools]  # fmt: skip
        types = [
            Link(
                name,
                f"/types/{name}.md",
                f"{deprecated_description(first_sentence(t.description), t.schema)} "
                f"({self._public_nodes(name, self.bounds.max_nodes)[1]} public)",
            )
            for name, t in self.model.node_types.items()
        ]
        resources = [Link(r.name, f"/resources/{r.name}.md", self._resource_note(r)) for r in self._all_resources()]
        prompts = [Link(p.name, f"/prompts/{p.name}.md", p.description) for p in PROMPTS]
        nodes = [self._node_link(n) for n in self._listed_nodes(self.bounds.max_nodes)]
        return self._render("llms.txt.j2", **self._intro(), tools=tools, types=types, resources=resources,
                            prompts=prompts, nodes=nodes)  # fmt: skip

    def llms_full(self) -> str:
        pages: list[tuple[str, str | None]] = [(f"/tools/{t.name}.md", self.tool_page(t.name, 1))
                                               for t in self.registry.tools]  # fmt: skip
        pages += [(f"/types/{name}.md", self.type_page(name, 1)) for name in self.model.node_types]
        pages += [(f"/resources/{r.name}.md", self.resource_page(r.name, 1, inline=False))
                  for r in self._all_resources()]  # fmt: skip
        pages += [(f"/prompts/{p.name}.md", self.prompt_page(p.name, 1)) for p in PROMPTS]
        for node in self._listed_nodes(self.bounds.max_full_nodes):
            pages.append((node_url(node["type"], node["id"]), self._node_text(node["type"], node["id"], 1)))
        return self._render("full.txt.j2", **self._intro(), pages=[(url, text) for url, text in pages if text])

    # -- tools ---------------------------------------------------------------------------------------------------
    def tool_page(self, name: str, shift: int = 0) -> str | None:
        tool = next((t for t in self.registry.tools if t.name == name), None)
        if tool is None:
            return None
        path_vars = set(re.findall(r"{(\w+)}", str(tool.surface.get("rest", {}).get("path", ""))))
        required: list[str] = list(tool.input_schema.get("required", []))
        arguments = {p: _placeholder(p, tool.input_schema) for p in required}
        example = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": tool.name, "arguments": arguments},
        }
        return self._render(
            "tool.md.j2", h=_headings(shift), tool=tool, role=role_for(tool.permission), rest=self._rest(tool.name),
            path_vars=sorted(path_vars), example=example, input=to_json(tool.input_schema),
            output=to_json(tool.output_schema), related=self._related_of_tool(tool),
            root="Query" if tool.annotations.get("readOnlyHint") else "Mutation",
        )  # fmt: skip

    def _relations(self) -> list[tuple[ToolDefinition, ResourceDefinition, str]]:
        """Which tools relate to which resources: a resource named in the tool's name (`get_changes` ->
        `changes`), and the node template for every tool that returns nodes."""
        found: list[tuple[ToolDefinition, ResourceDefinition, str]] = []
        for tool in self.registry.tools:
            words = set(tool.name.split("_"))
            for resource in self._all_resources():
                if resource.name in words:
                    found.append((tool, resource, f"{tool.name} works on {resource.title.lower()}"))
                elif "canon.Node" not in tool.typed_output_schema.get("$defs", {}):
                    continue
                elif resource.uri_template == NODE_TEMPLATE:
                    found.append((tool, resource, f"each node {tool.name} returns is also {resource.uri_template}"))
                elif resource.uri_template == NODE_AT_TEMPLATE and tool.pins:
                    found.append((tool, resource, f"each node {tool.name} returns with at is also "
                                                  f"{resource.uri_template}"))  # fmt: skip
        return found

    def _related_of_tool(self, tool: ToolDefinition) -> list[Link]:
        mine = set(tool.typed_output_schema.get("$defs", {}))
        links: list[Link] = []
        for other in self.registry.tools:
            shared = mine & set(other.typed_output_schema.get("$defs", {}))
            if other is tool or not shared:
                continue
            named = sorted(d for d in shared if d.count(".") == 1) or sorted(shared)[:3]
            links.append(Link(other.name, f"/tools/{other.name}.md", "also returns " + ", ".join(named)))
        for _, resource, note in (r for r in self._relations() if r[0] is tool):
            links.append(Link(resource.name, f"/resources/{resource.name}.md", note))
        return links

    # -- node types ----------------------------------------------------------------------------------------------
    def type_page(self, name: str, shift: int = 0) -> str | None:
        node_type = self.model.node_types.get(name)
        if node_type is None:
            return None
        required = set(node_type.schema.get("required", []))
        properties = [(p, type_label(s), deprecated_description(s.get("description", ""), s).strip(), p in required)
                      for p, s in node_type.properties.items()]  # fmt: skip
        ends = [(end, [Link(t, f"/types/{t}.md") for t in end.far],
                 deprecated_description(end.edge.description, end.edge.schema))
                for end in self.model.edge_ends(name)]  # fmt: skip
        out = [(end, links, about) for end, links, about in ends if end.direction == "out"]
        into = [(end, links, about) for end, links, about in ends if end.direction == "in"]
        nodes, total = self._public_nodes(name, self.bounds.max_type_nodes)
        return self._render(
            "type.md.j2", h=_headings(shift), name=name, node_type=node_type, properties=properties, out=out,
            description=deprecated_description(node_type.description, node_type.schema),
            into=into, schema=to_json(node_type.schema), nodes=[self._node_link(n) for n in nodes], total=total,
            more=self._rest("find_nodes"),
        )  # fmt: skip

    # -- nodes ---------------------------------------------------------------------------------------------------
    def node_page(self, node_type: str, id: str) -> str | None:
        return self._node_text(node_type, id, 0)

    def _node_text(self, node_type: str, id: str, shift: int) -> str | None:
        answer = self._call("get_node", {"id": id}) if node_type in self.model.node_types else None
        if answer is None or answer["node"]["type"] != node_type:
            return None  # missing and hidden read the same: a 404 must not tell them apart
        node: dict[str, Any] = answer["node"]
        declared = list(self.model.node_types[node_type].properties)
        names = [p for p in declared if p in node["properties"]]
        names += sorted(p for p in node["properties"] if p not in declared)
        groups = list(self._neighbours(node_type, id))
        return self._render(
            "node.md.j2", h=_headings(shift), node=node, title=self._title(node),
            properties=[(p, node["properties"][p]) for p in names],
            out=[g for g in groups if g.direction == "out"], into=[g for g in groups if g.direction == "in"],
            uri=node_uri(node_type, id), rest=self._rest("get_node", id=id),
        )  # fmt: skip

    def _neighbours(self, node_type: str, id: str) -> Iterator[Group]:
        """The node's public neighbours over each edge type its type may have, out and in: one get_neighbors call
        per edge type and direction, so two edges of different types between the same nodes both show."""

        def compute() -> list[Group]:
            groups: list[Group] = []
            for end in self.model.edge_ends(node_type):
                limit = min(NEIGHBOUR_LIMIT, self.bounds.max_neighbours)
                answer = self._call("get_neighbors", {"id": id, "direction": end.direction,
                                                      "edge_types": [end.edge.name], "limit": limit})  # fmt: skip
                if answer and answer["items"]:
                    links = tuple(self._node_link(item["node"]) for item in answer["items"])
                    groups.append(Group(end.name, end.edge.name, end.direction, links, int(answer["total"])))
            return groups

        groups: list[Group] = self._remember(("neighbours", id), compute)
        yield from groups

    # -- resources -----------------------------------------------------------------------------------------------
    # -- prompts ---------------------------------------------------------------------------------------------------
    def prompt_page(self, name: str, shift: int = 0) -> str | None:
        definition = next((p for p in PROMPTS if p.name == name), None)
        if definition is None:
            return None
        return self._render("prompt.md.j2", h=_headings(shift), prompt=definition, get=_prompt_get(definition))

    def _all_resources(self) -> tuple[ResourceDefinition, ...]:
        return (*self.registry.resources, *self.registry.templates)

    @staticmethod
    def _resource_note(resource: ResourceDefinition) -> str:
        uri = resource.uri or resource.uri_template
        return f"{resource.title}. {resource.description} (`{uri}`)"

    def resource_page(self, name: str, shift: int = 0, *, inline: bool = True) -> str | None:
        """A resource's page; `inline=False` (in llms-full.txt) leaves its content to the page itself, since the
        type resources each repeat every definition of the model."""
        resource = next((r for r in self._all_resources() if r.name == name), None)
        if resource is None:
            return None
        uri = str(resource.uri or resource.uri_template)
        content, omitted = self._resource_content(resource) if inline else (None, 0)
        variables = re.findall(r"{(\w+)}", uri)
        read = {"jsonrpc": "2.0", "id": 1, "method": "resources/read", "params": {"uri": uri}}
        related = [Link(t.name, f"/tools/{t.name}.md", note) for t, r, note in self._relations() if r is resource]
        described = type_of(uri)
        if described is not None and described in self.model.node_types:
            related.append(Link(described, f"/types/{described}.md", f"the {described} node type's page"))
        return self._render(
            "resource.md.j2", h=_headings(shift), resource=resource, uri=uri, read=read, variables=variables,
            rest="GET " + resource_path(uri), graphql=resource_field_name(resource.name),
            content=content, omitted=omitted, related=related, bound=self.bounds.max_resource_chars, inline=inline,
        )  # fmt: skip

    def _resource_content(self, resource: ResourceDefinition) -> tuple[str | None, int]:
        """(content, 0), or (None, its length) when it is over the bound. Subscribable resources (the change
        feed) change with every write and can mention nodes that have since become hidden: never inlined."""
        if resource.uri is None or resource.subscribable:
            return None, 0
        uri = resource.uri
        text = str(self.host.run(ANONYMOUS, "resources/read", uri, lambda ctx: read_resource(ctx, uri).text))
        if len(text) > self.bounds.max_resource_chars:
            return None, len(text)
        return text, 0


def _prompt_get(definition: PromptDefinition) -> dict[str, Any]:
    """A `prompts/get` request's params for `definition`, its arguments as placeholders."""
    return {"name": definition.name, "arguments": {a.name: f"<{a.name}>" for a in definition.arguments}}


def _headings(shift: int) -> Callable[[int], str]:
    """The `#`s of a heading of `level`, pushed down `shift` levels when the page is inlined in llms-full.txt."""
    return lambda level: "#" * (level + shift)


def _placeholder(name: str, schema: Mapping[str, Any]) -> Any:
    """An example value for a required argument in a call example: its default, first choice, or a stand-in."""
    spec: Mapping[str, Any] = schema.get("properties", {}).get(name, {})
    if "default" in spec:
        return spec["default"]
    if spec.get("enum"):
        return spec["enum"][0]
    stand_ins: dict[str, Any] = {"integer": 1, "number": 1, "boolean": True, "array": [], "object": {}}
    kind = spec.get("type")
    return stand_ins.get(kind, f"<{name}>") if isinstance(kind, str) else f"<{name}>"
