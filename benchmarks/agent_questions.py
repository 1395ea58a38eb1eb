"""The questions of the agent-task benchmark (`benchmarks/agent_tasks.py`): each with its expected answer computed
from the sample data (`schema/default/seed.json`), and the fixed sequence of calls a careful agent makes to answer
it from canon's tools and from `@modelcontextprotocol/server-memory`'s.

The scripts are written from what each server's `tools/list` says, nothing else: canon's scripts use `summary`
and `fields` where the listed tool offers them (a canon from before those existed is asked the same questions
without them) and follow `next_cursor` to the end of every list they need whole. server-memory's scripts use
`search_nodes` to find an entity and `open_nodes` to read it with its relations (its entities are named by the
node ids; every scalar property is an observation "key: value"). A script returns the answer it extracted from
what it received; `None` for server-memory means its tools cannot answer the question (it keeps no change log).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SEED = Path(__file__).resolve().parent.parent / "schema" / "default" / "seed.json"
CHANGED = ("svc-checkout-api", "team-payments")  # the nodes the set-up edits before the questions are asked
Json = dict[str, Any]
Call = Callable[[str, Json], Json]


# -- the sample data, read independently of canon --------------------------------------------------------------
@dataclass(frozen=True)
class Seed:
    """The sample data as plain dicts, with the few look-ups the expected answers need."""

    nodes: Mapping[str, Json]
    edges: tuple[Json, ...]

    @classmethod
    def load(cls, path: Path = SEED) -> Seed:
        data = json.loads(path.read_text(encoding="utf-8"))
        return cls({n["id"]: n for n in data["nodes"]}, tuple(data["edges"]))

    def prop(self, node_id: str, key: str) -> Any:
        return self.nodes[node_id]["properties"].get(key)

    def out(self, node_id: str, edge: str) -> list[str]:
        return [e["target"] for e in self.edges if e["source"] == node_id and e["type"] == edge]

    def into(self, node_id: str, edge: str) -> list[str]:
        return [e["source"] for e in self.edges if e["target"] == node_id and e["type"] == edge]

    def edge(self, edge: str, source: str, target: str) -> Json:
        return next(e for e in self.edges if (e["type"], e["source"], e["target"]) == (edge, source, target))

    def by(self, node_type: str, key: str, value: Any) -> str:
        return next(i for i, n in self.nodes.items() if n["type"] == node_type and n["properties"].get(key) == value)

    def of_type(self, node_type: str) -> list[str]:
        return [i for i, n in self.nodes.items() if n["type"] == node_type]


# -- an agent on canon's tools ---------------------------------------------------------------------------------
@dataclass
class Canon:
    """canon's tools as a script calls them: `call(tool, arguments)` gives the result object."""

    call: Call
    offers: Mapping[str, frozenset[str]]  # tool -> the arguments its listed input schema names
    since: int = 0  # the revision before the set-up's edits

    def short(self, tool: str, fields: list[str] | None = None) -> Json:
        """The shortest form a tool offers: only `fields` of each node, or its summary when no property is needed."""
        if fields is not None:
            return {"fields": fields} if "fields" in self.offers[tool] else {}
        return {"summary": True} if "summary" in self.offers[tool] else {}

    def pages(self, tool: str, arguments: Json) -> Iterator[Json]:
        """Every item of a list, page after page."""
        cursor: str | None = None
        while True:
            page = self.call(tool, arguments | ({"cursor": cursor} if cursor else {}))
            yield from page["items"]
            cursor = page.get("next_cursor")
            if not cursor:
                return

    def find(self, node_type: str, where: Json | None = None, fields: list[str] | None = None) -> list[Json]:
        arguments = {"type": node_type, **({"where": where} if where else {}), **self.short("find_nodes", fields)}
        return list(self.pages("find_nodes", arguments))

    def one(self, node_type: str, key: str, value: Any, fields: list[str] | None = None) -> Json:
        [node] = self.find(node_type, {key: value}, fields)
        return node

    def near(self, node_id: str, edge: str, direction: str, fields: list[str] | None = None) -> list[Json]:
        """The items (node, edge) one `edge` away from `node_id`."""
        arguments = {"id": node_id, "edge_types": [edge], "direction": direction}
        return list(self.pages("get_neighbors", arguments | self.short("get_neighbors", fields)))


def set_up(call: Call, listed: Json) -> Canon:
    """A canon agent (knowing what `listed`, the tools/list result, offers) after the set-up: the nodes `CHANGED`
    edited after the revision it notes."""
    since = call("get_changes", {"limit": 1})["revision"]
    call("patch_node", {"id": CHANGED[0], "properties": {"description": "Edited by the agent-task set-up."}})
    call("patch_node", {"id": CHANGED[1], "properties": {"mission": "Edited by the agent-task set-up."}})
    offers = {t["name"]: frozenset(t["inputSchema"].get("properties", {})) for t in listed["tools"]}
    return Canon(call, offers, since)


def name(node: Json) -> Any:
    """A node's display name, in its summary form or in full."""
    if "name" in node:
        return node["name"]
    properties = node["properties"]
    return properties.get("name", properties.get("title", properties.get("term")))


# -- an agent on server-memory's tools -------------------------------------------------------------------------
@dataclass
class Memory:
    """server-memory's tools as a script calls them."""

    call: Call
    read: dict[str, Json] = field(default_factory=dict[str, Json])  # entities received so far, by name

    def search(self, query: str) -> Json:
        return self._got(self.call("search_nodes", {"query": query}))

    def open(self, names: list[str]) -> Json:
        return self._got(self.call("open_nodes", {"names": names}))

    def _got(self, graph: Json) -> Json:
        self.read |= {e["name"]: e for e in graph["entities"]}
        return graph

    def one(self, entity_type: str, key: str, value: str) -> Json:
        """The entity of a type whose observation `key: value` is exact, found by searching for it."""
        found = self.search(f"{key}: {value}")["entities"]
        [entity] = [e for e in found if e["entityType"] == entity_type and observed(e, key) == value]
        return entity

    def linked(self, name: str, relation: str, direction: str) -> list[str]:
        """The names one `relation` away from `name` (its relations come with `open_nodes`)."""
        relations = self.open([name])["relations"]
        if direction == "out":
            return [r["to"] for r in relations if r["from"] == name and r["relationType"] == relation]
        return [r["from"] for r in relations if r["to"] == name and r["relationType"] == relation]

    def entities(self, names: list[str]) -> list[Json]:
        """The entities `names`, read in one call (their relations come along)."""
        return self.open(names)["entities"] if names else []


def observed(entity: Json, key: str) -> str:
    """The value of an entity's observation "key: value" ("" when it has none)."""
    prefix = f"{key}: "
    return next((o[len(prefix) :] for o in entity["observations"] if o.startswith(prefix)), "")


def memory_name(entity: Json) -> str:
    return observed(entity, "name") or observed(entity, "title") or observed(entity, "term")


# -- the questions ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Question:
    text: str
    expected: Callable[[Seed], Any]
    canon: Callable[[Canon], Any]
    memory: Callable[[Memory], Any] | None  # None: server-memory's tools cannot answer it


def _names(nodes: list[Json]) -> list[Any]:
    return sorted(name(n) for n in nodes)


def _q_owner_on_call(s: Seed) -> Any:
    [team] = s.into(s.by("Service", "name", "checkout-api"), "owns")
    leads = [p for p in s.into(team, "member_of") if s.edge("member_of", p, team)["properties"].get("role") == "lead"]
    return s.prop(team, "name"), s.prop(team, "oncall"), sorted(s.prop(p, "name") for p in leads)


def _c_owner_on_call(c: Canon) -> Any:
    service = c.one("Service", "name", "checkout-api")
    [owner] = c.near(service["id"], "owns", "in", ["name", "oncall"])
    team = owner["node"]
    members = c.near(team["id"], "member_of", "in", ["name"])
    leads = [name(m["node"]) for m in members if m["edge"]["properties"].get("role") == "lead"]
    return team["properties"]["name"], team["properties"].get("oncall"), sorted(leads)


def _m_owner_on_call(m: Memory) -> Any:
    service = m.one("Service", "name", "checkout-api")
    [team] = m.linked(service["name"], "owns", "in")
    members = m.linked(team, "member_of", "in")
    # server-memory's relations carry no properties: a member's role is not there to read
    team_entity = m.read.get(team) or m.entities([team])[0]
    leads = [memory_name(e) for e in m.entities(members) if observed(e, "role") == "lead"]
    return memory_name(team_entity), observed(team_entity, "oncall") == "true", sorted(leads)


def _q_decisions_affecting_payments(s: Seed) -> Any:
    system = s.by("System", "name", "Payments Platform")
    reached = {system, *s.into(system, "part_of")}
    return sorted({s.prop(d, "number") for r in reached for d in s.into(r, "affects")})


def _c_decisions_affecting_payments(c: Canon) -> Any:
    system = c.one("System", "name", "Payments Platform")
    parts = [system["id"], *(i["node"]["id"] for i in c.near(system["id"], "part_of", "in"))]
    numbers = {d["node"]["properties"]["number"] for p in parts for d in c.near(p, "affects", "in", ["number"])}
    return sorted(numbers)


def _m_decisions_affecting_payments(m: Memory) -> Any:
    system = m.one("System", "name", "Payments Platform")
    parts = [system["name"], *m.linked(system["name"], "part_of", "in")]
    relations = m.open(parts)["relations"]
    decisions = sorted({r["from"] for r in relations if r["relationType"] == "affects" and r["to"] in parts})
    return sorted(observed(e, "number") for e in m.entities(decisions))


def _q_term(s: Seed) -> Any:
    term = s.by("GlossaryTerm", "term", "PAN")
    return s.prop(term, "definition"), sorted(s.prop(d, "title") for d in s.into(term, "defines"))


def _c_term(c: Canon) -> Any:
    term = c.one("GlossaryTerm", "term", "PAN", ["definition"])
    documents = c.near(term["id"], "defines", "in")
    return term["properties"]["definition"], _names([d["node"] for d in documents])


def _m_term(m: Memory) -> Any:
    term = m.one("GlossaryTerm", "term", "PAN")
    documents = m.entities(m.linked(term["name"], "defines", "in"))
    return observed(term, "definition"), sorted(memory_name(d) for d in documents)


def _q_changed(s: Seed) -> Any:
    return sorted(CHANGED)


def _c_changed(c: Canon) -> Any:
    return sorted({change["key"] for change in c.pages("get_changes", {"since": c.since})})


def _q_reports_chain(s: Seed) -> Any:
    chain, person = [], s.by("Person", "name", "Noah Goldberg")
    while managers := s.out(person, "reports_to"):
        person = managers[0]
        chain.append(s.prop(person, "name"))
    return chain


def _c_reports_chain(c: Canon) -> Any:
    chain, person = [], c.one("Person", "name", "Noah Goldberg")["id"]
    while managers := c.near(person, "reports_to", "out"):
        person = managers[0]["node"]["id"]
        chain.append(name(managers[0]["node"]))
    return chain


def _m_reports_chain(m: Memory) -> Any:
    chain, person = [], m.one("Person", "name", "Noah Goldberg")["name"]
    while managers := m.linked(person, "reports_to", "out"):
        person = managers[0]
        chain.append(memory_name(m.read.get(person) or m.entities([person])[0]))
    return chain


def _q_team_services(s: Seed) -> Any:
    [team] = s.out(s.by("Person", "name", "Yusuf Demir"), "member_of")
    owned = [x for x in s.out(team, "owns") if s.nodes[x]["type"] == "Service"]
    return s.prop(team, "name"), sorted(s.prop(x, "name") for x in owned)


def _c_team_services(c: Canon) -> Any:
    person = c.one("Person", "name", "Yusuf Demir")
    [team] = c.near(person["id"], "member_of", "out")
    owned = [i["node"] for i in c.near(team["node"]["id"], "owns", "out") if i["node"]["type"] == "Service"]
    return name(team["node"]), _names(owned)


def _m_team_services(m: Memory) -> Any:
    person = m.one("Person", "name", "Yusuf Demir")
    [team] = m.linked(person["name"], "member_of", "out")
    owned = [e for e in m.entities(m.linked(team, "owns", "out")) if e["entityType"] == "Service"]
    return memory_name(m.read[team]), sorted(memory_name(e) for e in owned)


def _neighbour_names(text: str, node_type: str, key: str, value: str, edge: str, direction: str) -> Question:
    """A question whose answer is the names of the nodes one `edge` away from one node."""

    def expected(s: Seed) -> Any:
        origin = s.by(node_type, key, value)
        ids = s.out(origin, edge) if direction == "out" else s.into(origin, edge)
        return sorted(s.prop(i, "name") or s.prop(i, "title") or s.prop(i, "term") for i in ids)

    def canon(c: Canon) -> Any:
        return _names([i["node"] for i in c.near(c.one(node_type, key, value)["id"], edge, direction)])

    def memory(m: Memory) -> Any:
        origin = m.one(node_type, key, value)["name"]
        return sorted(memory_name(e) for e in m.entities(m.linked(origin, edge, direction)))

    return Question(text, expected, canon, memory)


def _q_dependencies(s: Seed) -> Any:
    service = s.by("Service", "name", "checkout-api")
    return sorted((s.prop(t, "name"), s.edge("depends_on", service, t)["properties"].get("criticality"))
                  for t in s.out(service, "depends_on"))  # fmt: skip


def _c_dependencies(c: Canon) -> Any:
    items = c.near(c.one("Service", "name", "checkout-api")["id"], "depends_on", "out")
    return sorted((name(i["node"]), i["edge"].get("properties", {}).get("criticality")) for i in items)


def _m_dependencies(m: Memory) -> Any:
    targets = m.entities(m.linked(m.one("Service", "name", "checkout-api")["name"], "depends_on", "out"))
    return sorted((memory_name(e), None) for e in targets)  # relations carry no properties: no criticality


def _q_system_owner(s: Seed) -> Any:
    [system] = s.out(s.by("Service", "name", "fraud-scoring"), "part_of")
    return s.prop(system, "name"), sorted(s.prop(t, "name") for t in s.into(system, "owns"))


def _c_system_owner(c: Canon) -> Any:
    [system] = c.near(c.one("Service", "name", "fraud-scoring")["id"], "part_of", "out")
    return name(system["node"]), _names([t["node"] for t in c.near(system["node"]["id"], "owns", "in")])


def _m_system_owner(m: Memory) -> Any:
    [system] = m.linked(m.one("Service", "name", "fraud-scoring")["name"], "part_of", "out")
    owners = m.entities(m.linked(system, "owns", "in"))
    return memory_name(m.read.get(system) or m.entities([system])[0]), sorted(memory_name(e) for e in owners)


def _q_superseded(s: Seed) -> Any:
    old = s.by("Decision", "number", "ADR-0002")
    return sorted((s.prop(d, "number"), s.prop(d, "status")) for d in s.into(old, "supersedes"))


def _c_superseded(c: Canon) -> Any:
    items = c.near(c.one("Decision", "number", "ADR-0002")["id"], "supersedes", "in", ["number", "status"])
    return sorted((i["node"]["properties"]["number"], i["node"]["properties"]["status"]) for i in items)


def _m_superseded(m: Memory) -> Any:
    newer = m.entities(m.linked(m.one("Decision", "number", "ADR-0002")["name"], "supersedes", "in"))
    return sorted((observed(e, "number"), observed(e, "status")) for e in newer)


def _q_members_count(s: Seed) -> Any:
    return len(s.into(s.by("Team", "name", "Payments"), "member_of"))


def _c_members_count(c: Canon) -> Any:
    team = c.one("Team", "name", "Payments")
    page = c.call("get_neighbors", {"id": team["id"], "edge_types": ["member_of"], "direction": "in", "limit": 1,
                                    **c.short("get_neighbors")})  # fmt: skip
    return page["total"]


def _m_members_count(m: Memory) -> Any:
    return len(m.linked(m.one("Team", "name", "Payments")["name"], "member_of", "in"))


def _typed_where(text: str, node_type: str, key: str, value: Any, show: str) -> Question:
    """A question whose answer is `show` of every node of a type with one property value."""

    def expected(s: Seed) -> Any:
        return sorted(s.prop(i, show) for i in s.of_type(node_type) if s.prop(i, key) == value)

    def canon(c: Canon) -> Any:
        return sorted(n["properties"][show] for n in c.find(node_type, {key: value}, [show]))

    def memory(m: Memory) -> Any:
        text = json.dumps(value) if not isinstance(value, str) else value
        found = m.search(f"{key}: {text}")["entities"]
        return sorted(observed(e, show) for e in found if e["entityType"] == node_type and observed(e, key) == text)

    return Question(text, expected, canon, memory)


def _q_pii_in_payments(s: Seed) -> Any:
    system = s.by("System", "name", "Payments Platform")
    return sorted(s.prop(x, "name") for x in s.into(system, "part_of") if s.prop(x, "handles_pii"))


def _c_pii_in_payments(c: Canon) -> Any:
    items = c.near(c.one("System", "name", "Payments Platform")["id"], "part_of", "in", ["name", "handles_pii"])
    return sorted(i["node"]["properties"]["name"] for i in items if i["node"]["properties"].get("handles_pii"))


def _m_pii_in_payments(m: Memory) -> Any:
    parts = m.entities(m.linked(m.one("System", "name", "Payments Platform")["name"], "part_of", "in"))
    return sorted(memory_name(e) for e in parts if observed(e, "handles_pii") == "true")


def _q_tier1_owned(s: Seed) -> Any:
    team = s.by("Team", "name", "Payments")
    return sorted(s.prop(x, "name") for x in s.out(team, "owns") if s.prop(x, "tier") == 1)


def _c_tier1_owned(c: Canon) -> Any:
    items = c.near(c.one("Team", "name", "Payments")["id"], "owns", "out", ["name", "tier"])
    return sorted(i["node"]["properties"]["name"] for i in items if i["node"]["properties"].get("tier") == 1)


def _m_tier1_owned(m: Memory) -> Any:
    owned = m.entities(m.linked(m.one("Team", "name", "Payments")["name"], "owns", "out"))
    return sorted(memory_name(e) for e in owned if observed(e, "tier") == "1")


def _q_slack_of_owner(s: Seed) -> Any:
    [team] = s.into(s.by("Service", "name", "payment-gateway"), "owns")
    return s.prop(team, "slack_channel")


def _c_slack_of_owner(c: Canon) -> Any:
    [team] = c.near(c.one("Service", "name", "payment-gateway")["id"], "owns", "in", ["slack_channel"])
    return team["node"]["properties"]["slack_channel"]


def _m_slack_of_owner(m: Memory) -> Any:
    [team] = m.linked(m.one("Service", "name", "payment-gateway")["name"], "owns", "in")
    return observed(m.read.get(team) or m.entities([team])[0], "slack_channel")


def _q_located(s: Seed) -> Any:
    team = s.by("Team", "name", "Identity & Access")
    return sorted(s.prop(p, "name") for p in s.into(team, "member_of") if s.prop(p, "location") == "London")


def _c_located(c: Canon) -> Any:
    items = c.near(c.one("Team", "name", "Identity & Access")["id"], "member_of", "in", ["name", "location"])
    return sorted(i["node"]["properties"]["name"] for i in items if i["node"]["properties"].get("location") == "London")


def _m_located(m: Memory) -> Any:
    members = m.entities(m.linked(m.one("Team", "name", "Identity & Access")["name"], "member_of", "in"))
    return sorted(memory_name(e) for e in members if observed(e, "location") == "London")


def _q_decided_by(s: Seed) -> Any:
    return sorted(s.prop(x, "name") for x in s.out(s.by("Decision", "number", "ADR-0010"), "decided_by"))


def _c_decided_by(c: Canon) -> Any:
    return _names([i["node"] for i in c.near(c.one("Decision", "number", "ADR-0010")["id"], "decided_by", "out")])


def _m_decided_by(m: Memory) -> Any:
    deciders = m.entities(m.linked(m.one("Decision", "number", "ADR-0010")["name"], "decided_by", "out"))
    return sorted(memory_name(e) for e in deciders)


def _q_related_terms(s: Seed) -> Any:
    term = s.by("GlossaryTerm", "term", "Ledger")
    return sorted(s.prop(t, "term") for t in {*s.out(term, "related_to"), *s.into(term, "related_to")})


def _c_related_terms(c: Canon) -> Any:
    return _names([i["node"] for i in c.near(c.one("GlossaryTerm", "term", "Ledger")["id"], "related_to", "both")])


def _m_related_terms(m: Memory) -> Any:
    term = m.one("GlossaryTerm", "term", "Ledger")["name"]
    linked = {*m.linked(term, "related_to", "out"), *m.linked(term, "related_to", "in")}
    return sorted(memory_name(e) for e in m.entities(sorted(linked)))


QUESTIONS: tuple[Question, ...] = (
    Question("Who owns checkout-api, is that team on call, and who leads it?", _q_owner_on_call, _c_owner_on_call,
             _m_owner_on_call),
    Question("Which decisions affect the Payments Platform system or one of its services?",
             _q_decisions_affecting_payments, _c_decisions_affecting_payments, _m_decisions_affecting_payments),
    Question("What does the glossary term PAN mean, and which documents define it?", _q_term, _c_term, _m_term),
    Question("What changed since revision N (N: the revision before the set-up's edits)?", _q_changed, _c_changed,
             None),
    Question("Who does Noah Goldberg report to, all the way up?", _q_reports_chain, _c_reports_chain,
             _m_reports_chain),
    Question("Which team is Yusuf Demir in, and which services does it own?", _q_team_services, _c_team_services,
             _m_team_services),
    _neighbour_names("Which services depend on ledger-service?", "Service", "name", "ledger-service", "depends_on",
                     "in"),
    Question("What does checkout-api depend on, and how critically?", _q_dependencies, _c_dependencies,
             _m_dependencies),
    Question("Which system is fraud-scoring part of, and who owns that system?", _q_system_owner, _c_system_owner,
             _m_system_owner),
    Question("Which decisions supersede ADR-0002, and what is their status?", _q_superseded, _c_superseded,
             _m_superseded),
    _neighbour_names("Who wrote the Checkout API runbook?", "Document", "title", "Checkout API runbook", "authored",
                     "in"),
    _neighbour_names("Which documents describe checkout-api?", "Service", "name", "checkout-api", "documents", "in"),
    Question("How many people are members of the Payments team?", _q_members_count, _c_members_count,
             _m_members_count),
    _typed_where("Which teams have no on-call rota?", "Team", "oncall", False, "name"),
    _typed_where("Which decisions are still proposed?", "Decision", "status", "proposed", "number"),
    Question("Which tier-1 services does the Payments team own?", _q_tier1_owned, _c_tier1_owned, _m_tier1_owned),
    Question("Which services of the Payments Platform handle PII?", _q_pii_in_payments, _c_pii_in_payments,
             _m_pii_in_payments),
    Question("Which Slack channel reaches the team that owns payment-gateway?", _q_slack_of_owner,
             _c_slack_of_owner, _m_slack_of_owner),
    Question("Who in the Identity & Access team works from London?", _q_located, _c_located, _m_located),
    Question("Who decided ADR-0010?", _q_decided_by, _c_decided_by, _m_decided_by),
    Question("Which glossary terms are related to Ledger?", _q_related_terms, _c_related_terms, _m_related_terms),
)  # fmt: skip
