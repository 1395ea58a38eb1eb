"""Proposals: named, pending change-sets that a reviewer approves (merged) or rejects.

A proposal holds the operations `write_batch` takes, checked when proposed (and when revised) by a dry run of
the one write path (`Store.commit`: the model, every write rule, the author's `core.dispatch.access.write_guard`), and
the revision each touched record had then (`bases`). Approval commits the operations in one transaction on the
current revision and marks the proposal merged in that same transaction (`Store.commit(then=...)`), so a
merge is all or nothing and two approvals merge once: the second finds the proposal no longer open.

The conflict rule: a merge is refused (`ConflictError`) when any node or edge the proposal touches has a
revision other than the one it had when the proposal was made or last revised (changed, created or deleted
since); the error names every such record. Non-overlapping changes are not merged: revise the proposal.

Reviewers: principals with the admin role or in the `reviewers` group (`REVIEW_GROUP`); never the author.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from core.dispatch.access import sees, sight_of, write_guard
from core.lang.validation import StateView
from core.store.common import utc_now
from core.store.view import DiffEntry
from core.values.errors import ConflictError, ForbiddenError, NotFoundError, ValidationError
from core.values.operations import DeleteNode, Operation, PatchNode, PutEdge, PutNode
from core.values.principal import Principal
from core.values.records import Edge, Node, Sight, edge_key

__all__ = ["REVIEW_GROUP", "Proposal", "diff", "find", "get", "is_reviewer", "propose", "review", "revise"]

REVIEW_GROUP = "reviewers"
STATES = ("open", "merged", "rejected", "withdrawn")
Convert = Callable[[Sequence[Mapping[str, Any]]], list[Operation]]
_COLUMNS = ("id, title, rationale, author, state, base_revision, operations, bases, comments, created_at, "
            "updated_at, reviewer, merge_revision")  # fmt: skip


@dataclass(frozen=True)
class Proposal:
    id: str
    title: str
    rationale: str
    author: str
    state: str
    base_revision: int
    operations: tuple[Mapping[str, Any], ...]
    bases: Mapping[str, int]  # touched record key -> its revision when proposed (0: absent)
    comments: tuple[Mapping[str, Any], ...] = ()
    created_at: str = ""
    updated_at: str = ""
    reviewer: str | None = None
    merge_revision: int | None = None
    extra: Mapping[str, Any] = field(default_factory=dict[str, Any])

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id, "title": self.title, "rationale": self.rationale, "author": self.author,
            "state": self.state, "base_revision": self.base_revision, "created_at": self.created_at,
            "updated_at": self.updated_at, "reviewer": self.reviewer, "merge_revision": self.merge_revision,
            "comments": [dict(c) for c in self.comments],
        }  # fmt: skip


def is_reviewer(principal: Principal) -> bool:
    return "admin" in principal.roles or REVIEW_GROUP in principal.groups


def _key(op: Operation) -> tuple[str, str]:
    if isinstance(op, PutNode):
        return "node", op.node.id
    if isinstance(op, PatchNode | DeleteNode):
        return "node", op.id
    if isinstance(op, PutEdge):
        return "edge", op.edge.key
    return "edge", edge_key(op.type, op.source, op.target)


def _revision_in(view: StateView, kind: str, key: str) -> int:
    if kind == "node":
        node = view.node(key)
        return node.revision if node is not None else 0
    type_, _, ends = key.partition(":")
    source, _, target = ends.partition("->")
    edge = view.edge(type_, source, target)
    return edge.revision if edge is not None else 0


def _guard(principal: Principal, operations: Sequence[Operation], seen: dict[str, int],
           check: Mapping[str, int] | None = None) -> Callable[[StateView, Sequence[Operation]], None]:  # fmt: skip
    """The write guard of `principal`, then: note each touched record's revision (into `seen`) and, with
    `check`, refuse when any differs from it (the conflict rule)."""
    inner = write_guard(principal)

    def guard(view: StateView, ops: Sequence[Operation]) -> None:
        if inner is not None:
            inner(view, ops)
        for op in operations:
            kind, key = _key(op)
            seen[f"{kind}:{key}"] = _revision_in(view, kind, key)
        if check is not None:
            moved = sorted(k for k, r in seen.items() if check.get(k) != r)
            if moved:
                first = moved[0]
                raise ConflictError(
                    f"{', '.join(moved)} (changed since the proposal's base revision)",
                    expected=check.get(first, 0),
                    actual=seen[first],
                )

    return guard


def _checked(store: Any, author: Principal, requested: Sequence[Mapping[str, Any]],
             convert: Convert) -> tuple[int, dict[str, int]]:  # fmt: skip
    """Dry-run the operations as the author on the current revision: (base revision, bases)."""
    operations = convert(requested)
    seen: dict[str, int] = {}
    result = store.commit(operations, principal=author.name, dry_run=True, guard=_guard(author, operations, seen))
    return result.revision, seen


def _sql(store: Any, sql: str) -> str:
    return sql.replace("?", store.DIALECT.mark)


def _row(row: Sequence[Any]) -> Proposal:
    (id_, title, rationale, author, state, base, ops, bases, comments, created, updated, reviewer, merged) = row
    return Proposal(id_, title, rationale, author, state, int(base), tuple(json.loads(ops)), json.loads(bases),
                    tuple(json.loads(comments)), created, updated, reviewer,
                    int(merged) if merged is not None else None)  # fmt: skip


def get(store: Any, id: str) -> Proposal:
    rows = store._read(_sql(store, f"SELECT {_COLUMNS} FROM proposals WHERE id = ?"), (id,))
    if not rows:
        raise NotFoundError("proposal", id)
    return _row(rows[0])


def find(store: Any, *, state: str | None = None, author: str | None = None, node: str | None = None,
         after: str | None = None, limit: int = 50) -> tuple[list[Proposal], int]:  # fmt: skip
    """One page of proposals in id order after `after`, and how many match in all."""
    where, params = ["1 = 1"], []
    for column, value in (("state", state), ("author", author)):
        if value is not None:
            where.append(f"{column} = ?")
            params.append(value)
    rows = store._read(_sql(store, f"SELECT {_COLUMNS} FROM proposals WHERE {' AND '.join(where)} ORDER BY id"),
                       params)  # fmt: skip
    found = [_row(r) for r in rows]
    if node is not None:
        found = [p for p in found if f"node:{node}" in p.bases or any(
            k.startswith("edge:") and (f":{node}->" in k or k.endswith(f"->{node}")) for k in p.bases)]  # fmt: skip
    total = len(found)
    if after is not None:
        found = [p for p in found if p.id > after]
    return found[:limit], total


def _touch(db: Any, store: Any, p: Proposal, **changes: Any) -> None:
    sets = ", ".join(f"{k} = ?" for k in changes)
    db.execute(_sql(store, f"UPDATE proposals SET {sets} WHERE id = ?"), (*changes.values(), p.id))


def propose(store: Any, author: Principal, requested: Sequence[Mapping[str, Any]], title: str, rationale: str,
            convert: Convert) -> Proposal:  # fmt: skip
    base, bases = _checked(store, author, requested, convert)
    now = utc_now()
    p = Proposal(f"p-{secrets.token_hex(6)}", title, rationale, author.name, "open", base, tuple(requested), bases,
                 (), now, now)  # fmt: skip
    with store._transaction() as db:
        db.execute(_sql(store, f"INSERT INTO proposals ({_COLUMNS}) VALUES ({', '.join('?' * 13)})"),
                   (p.id, p.title, p.rationale, p.author, p.state, p.base_revision, json.dumps(list(requested)),
                    json.dumps(bases), "[]", now, now, None, None))  # fmt: skip
    return p


def _open(store: Any, id: str) -> Proposal:
    p = get(store, id)
    if p.state != "open":
        raise ValidationError(f"Proposal {id!r} is {p.state}, no longer open.", [])
    return p


def revise(
    store: Any,
    author: Principal,
    id: str,
    convert: Convert,
    *,
    requested: Sequence[Mapping[str, Any]] | None = None,
    title: str | None = None,
    rationale: str | None = None,
    withdraw: bool = False,
) -> Proposal:
    """The author changes an open proposal (operations re-checked, bases taken anew) or withdraws it."""
    p = _open(store, id)
    if p.author != author.name:
        raise ForbiddenError("proposal", id, f"{author.name} may not revise proposal {id!r}: only its author may.")
    changes: dict[str, Any] = {"updated_at": utc_now()}
    if withdraw:
        changes["state"] = "withdrawn"
    if requested is not None:
        base, bases = _checked(store, author, requested, convert)
        changes |= {"operations": json.dumps(list(requested)), "bases": json.dumps(bases), "base_revision": base}
    if title is not None:
        changes["title"] = title
    if rationale is not None:
        changes["rationale"] = rationale
    with store._transaction() as db:
        _touch(db, store, p, **changes)
    return get(store, id)


def review(store: Any, reviewer: Principal, id: str, decision: str, comment: str, convert: Convert) -> Proposal:
    """Comment on a proposal (anyone), or approve (merge) / reject it (a reviewer who is not the author)."""
    p = get(store, id)
    entry = {"by": reviewer.name, "at": utc_now(), "decision": decision, "text": comment}
    comments = json.dumps([*p.comments, entry])
    if decision == "comment":
        with store._transaction() as db:
            _touch(db, store, p, comments=comments)
        return get(store, id)
    if not is_reviewer(reviewer) or reviewer.name == p.author:
        why = "its author may not review it" if reviewer.name == p.author else "it needs a reviewer"
        raise ForbiddenError("proposal", id, f"{reviewer.name} may not {decision} proposal {id!r}: {why}.")
    p = _open(store, id)
    if decision == "reject":
        with store._transaction() as db:
            _close(db, store, p, "rejected", reviewer, comments, None)
        return get(store, id)
    operations = convert(p.operations)
    seen: dict[str, int] = {}

    def then(db: Any, revision: int) -> None:
        _close(db, store, p, "merged", reviewer, comments, revision)

    store.commit(operations, principal=p.author, guard=_guard(reviewer, operations, seen, p.bases), then=then)
    return get(store, id)


def _close(db: Any, store: Any, p: Proposal, state: str, reviewer: Principal, comments: str,
           revision: int | None) -> None:  # fmt: skip
    """Close the proposal if it is still open (in the caller's transaction); refuse if someone else did."""
    cursor = db.execute(
        _sql(store, "UPDATE proposals SET state = ?, reviewer = ?, comments = ?, merge_revision = ?, updated_at = ? "
             "WHERE id = ? AND state = 'open'"),
        (state, reviewer.name, comments, revision, utc_now(), p.id),
    )  # fmt: skip
    if cursor.rowcount != 1:
        raise ValidationError(f"Proposal {p.id!r} was closed meanwhile by another review; nothing was written.", [])


def diff(store: Any, p: Proposal, principal: Principal, convert: Convert) -> tuple[list[DiffEntry], bool, str | None]:
    """The proposal against the current revision, as `principal` may see it: (entries, applies cleanly, why not)."""
    sight = sight_of(principal)
    seen: dict[str, int] = {}
    try:
        operations = convert(p.operations)
        everyone = Principal(p.author, frozenset({"admin"}))  # what the caller sees is decided per entry below
        guard = _guard(everyone, operations, seen, p.bases)
        result = store.commit(operations, principal=p.author, dry_run=True, guard=guard)
    except (ValidationError, ConflictError, NotFoundError) as exc:
        return [], False, str(exc)
    first: dict[str, Any] = {}
    last: dict[str, Any] = {}
    for w in result.planned:
        first.setdefault(w.key, w)
        last[w.key] = w
    return [_entry(store, sight, first[k], last[k]) for k in first], True, None


def _visible(store: Any, sight: Sight | None, record: Node | Edge | None) -> bool:
    if record is None or sight is None:
        return True
    if isinstance(record, Node):
        return sees(sight, record)
    ends = store.nodes([record.source, record.target])
    return all(n is None or sees(sight, n) for n in (ends.get(record.source), ends.get(record.target)))


def _entry(store: Any, sight: Sight | None, first: Any, last: Any) -> DiffEntry:
    before, after = first.before, last.after
    change = "added" if before is None else "removed" if after is None else "changed"
    if not (_visible(store, sight, before) and _visible(store, sight, after)):
        return DiffEntry(first.kind, first.key, change, None, None, redacted=True)
    old = dict(before.properties) if before is not None else {}
    new = dict(after.properties) if after is not None else {}
    props: dict[str, dict[str, Any]] = {}
    for name in sorted(set(old) | set(new)):
        if old.get(name, None) != new.get(name, None) or (name in old) != (name in new):
            props[name] = {
                **({"before": old[name]} if name in old else {}),
                **({"after": new[name]} if name in new else {}),
            }
    fields: list[str] = []
    if isinstance(before, Node) and isinstance(after, Node):
        fields = [f for f in ("type", "visibility", "readers") if getattr(before, f) != getattr(after, f)]
    return DiffEntry(first.kind, first.key, change, before, after, tuple(fields), props)
