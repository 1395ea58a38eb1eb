"""Proposals: named, pending change-sets that a reviewer approves (merged) or rejects.

A proposal holds the operations `write_batch` takes, checked when proposed (and when revised) by a dry run of
the one write path (`Store.commit`: the model, every write rule, the author's `core.dispatch.access.write_guard`), and
the revision each touched record had then (`bases`). Approval commits the operations in one transaction on the
current revision and marks the proposal merged in that same transaction (`Store.commit(then=...)`), so a
merge is all or nothing and two approvals merge once: the second finds the proposal no longer open.

The conflict rule: a merge is refused (`ConflictError`) when any node or edge the proposal touches has a
revision other than the one it had when the proposal was made or last revised (changed, created or deleted
since); the error names every such record the reviewer may read. Non-overlapping changes are not merged: the
author revises the proposal (which takes the bases anew).

The review rule: a reviewer is whom `core.values.principal.Reviewers` names (`[proposals]` in canon.toml: the admin
role and the `reviewers` group by default), and never the proposal's author: held here, so on every surface.

What a reader is shown: every proposal (title, rationale, state, comments: text its author and commenters chose to
share with every reader), but of its operations, its touched records and its diff only what the reader may read
(`core.dispatch.access.sees`; a diff entry as `diff_revisions` shows one, `core.store.past.diff_entry`).

Store access goes through the store's public unit of work (`Store.unit_of_work`, `Store.rows`, `Store.commit`'s
`then`), with the statements written once for both backends.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from core.dispatch.access import sees, sight_of, write_guard
from core.lang.validation import StateView, Write
from core.store import Store, UnitOfWork
from core.store.common import utc_now
from core.store.past import diff_entry
from core.store.proposals_sql import PROPOSAL_COLUMNS
from core.store.view import DiffEntry
from core.values.errors import CanonError, ConflictError, ForbiddenError, NotFoundError, ValidationError
from core.values.operations import DeleteNode, Operation, PatchNode, PutEdge, PutNode, operations_of
from core.values.principal import Principal, Reviewers
from core.values.records import Edge, Node, Sight, edge_key
from core.values.uris import proposal_uri

__all__ = [
    "STATES", "Check", "Proposal", "ProposalBook", "Watermark", "answer", "comment", "diff", "find", "get", "propose",
    "review", "revise", "summary", "visible_keys", "visible_operations", "withdraw",
]  # fmt: skip

STATES = ("open", "merged", "rejected", "withdrawn")
DECISIONS = ("approve", "reject")
_COLUMNS = PROPOSAL_COLUMNS


@dataclass(frozen=True)
class Proposal:
    id: str
    title: str
    rationale: str
    author: str
    state: str
    base_revision: int
    operations: tuple[Mapping[str, Any], ...]
    bases: Mapping[str, int]  # touched record ("node:ID" or "edge:KEY") -> its revision when proposed (0: absent)
    comments: tuple[Mapping[str, Any], ...] = ()
    created_at: str = ""
    updated_at: str = ""
    reviewer: str | None = None
    merge_revision: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id, "title": self.title, "rationale": self.rationale, "author": self.author,
            "state": self.state, "base_revision": self.base_revision, "created_at": self.created_at,
            "updated_at": self.updated_at, "reviewer": self.reviewer, "merge_revision": self.merge_revision,
            "comments": [dict(c) for c in self.comments],
        }  # fmt: skip


@dataclass(frozen=True)
class Check:
    """A proposal against the current revision, as one reader may see it: the diff entries, whether it still
    applies cleanly, and why not (`problem`), with the touched records that changed since its base (`moved`)."""

    entries: tuple[DiffEntry, ...]
    clean: bool
    problem: str | None = None
    moved: tuple[str, ...] = ()


# -- which records an operation touches ------------------------------------------------------------------------------
def _key(op: Operation) -> tuple[str, str]:
    if isinstance(op, PutNode):
        return "node", op.node.id
    if isinstance(op, PatchNode | DeleteNode):
        return "node", op.id
    if isinstance(op, PutEdge):
        return "edge", op.edge.key
    return "edge", edge_key(op.type, op.source, op.target)


def _ends(key: str) -> tuple[str, str, str]:
    type_, _, ends = key.partition(":")
    source, _, target = ends.partition("->")
    return type_, source, target


def _revision_in(view: StateView, kind: str, key: str) -> int:
    record = view.node(key) if kind == "node" else view.edge(*_ends(key))
    return record.revision if record is not None else 0


def _revision_of(view: StateView, touched: str) -> int:
    kind, _, key = touched.partition(":")
    return _revision_in(view, kind, key)


def _moved(view: StateView, bases: Mapping[str, int]) -> list[str]:
    """The touched records whose revision is not the one recorded in `bases` (the conflict rule)."""
    return sorted(k for k, r in bases.items() if _revision_of(view, k) != r)


def _guard(principal: Principal, operations: Sequence[Operation], seen: dict[str, int],
           check: Mapping[str, int] | None = None, name: Callable[[list[str]], str] = ", ".join,
           ) -> Callable[[StateView, Sequence[Operation]], None]:  # fmt: skip
    """The write guard of `principal`, then: note each touched record's revision (into `seen`) and, with
    `check`, refuse when any differs from it (the conflict rule; `name` says which records it names)."""
    inner = write_guard(principal)

    def guard(view: StateView, ops: Sequence[Operation]) -> None:
        if inner is not None:
            inner(view, ops)
        for op in operations:
            kind, key = _key(op)
            seen[f"{kind}:{key}"] = _revision_in(view, kind, key)
        if check is not None:
            moved = _moved(view, check)
            if moved:
                raise ConflictError(f"{name(moved)} (changed since the proposal's base revision)",
                                    expected=check.get(moved[0], 0), actual=_revision_of(view, moved[0]))  # fmt: skip

    return guard


def _checked(store: Store, author: Principal, requested: Sequence[Mapping[str, Any]]) -> tuple[int, dict[str, int]]:
    """Dry-run the operations as the author on the current revision: (base revision, bases)."""
    operations = operations_of(requested)
    seen: dict[str, int] = {}
    result = store.commit(operations, principal=author.name, dry_run=True, guard=_guard(author, operations, seen))
    return result.revision, seen


# -- reading -----------------------------------------------------------------------------------------------------------
def _row(row: Sequence[Any]) -> Proposal:
    (id_, title, rationale, author, state, base, ops, bases, comments, created, updated, reviewer, merged) = row
    return Proposal(id_, title, rationale, author, state, int(base), tuple(json.loads(ops)), json.loads(bases),
                    tuple(json.loads(comments)), created, updated, reviewer,
                    int(merged) if merged is not None else None)  # fmt: skip


def get(store: Store, id: str) -> Proposal:
    """The proposal `id`; `NotFoundError` when there is none."""
    rows = store.rows(f"SELECT {_COLUMNS} FROM proposals WHERE id = ?", (id,))
    if not rows:
        raise NotFoundError("proposal", id)
    return _row(rows[0])


def find(store: Store, principal: Principal, *, state: str | None = None, author: str | None = None,
         node: str | None = None, after: str | None = None, limit: int = 50) -> tuple[list[Proposal], int]:  # fmt: skip
    """One page of proposals in id order after `after`, and how many match in all. `node`: those touching it (or
    an edge at it); a node `principal` may not read matches none, so the filter says nothing of it."""
    where, params = ["1 = 1"], list[Any]()
    for column, value in (("state", state), ("author", author)):
        if value is not None:
            where.append(f"{column} = ?")
            params.append(value)
    found = [_row(r) for r in store.rows(f"SELECT {_COLUMNS} FROM proposals WHERE {' AND '.join(where)} ORDER BY id",
                                         params)]  # fmt: skip
    if node is not None:
        current = store.node(node)
        if current is not None and not sees(sight_of(principal), current):
            found = []
        found = [p for p in found if f"node:{node}" in p.bases or any(
            k.startswith("edge:") and node in _ends(k.split(":", 1)[1])[1:] for k in p.bases)]  # fmt: skip
    total = len(found)
    if after is not None:
        found = [p for p in found if p.id > after]
    return found[:limit], total


def _sees_key(store: Store, sight: Sight | None, key: str) -> bool:
    """Whether a reader may read the touched record `key` as it is now (an absent one: yes)."""
    if sight is None:
        return True
    kind, _, rest = key.partition(":")
    ids = [rest] if kind == "node" else list(_ends(rest)[1:])
    return all(sees(sight, n) for n in store.nodes(ids).values())


def visible_keys(store: Store, p: Proposal, principal: Principal) -> list[str]:
    """The records the proposal touches that `principal` may read now ("node:ID", "edge:KEY")."""
    sight = sight_of(principal)
    return [k for k in sorted(p.bases) if _sees_key(store, sight, k)]


def visible_operations(store: Store, p: Proposal, principal: Principal) -> list[dict[str, Any]]:
    """The proposal's operations `principal` may read: each whose record it may read now and, for a node written
    whole, as written (visibility and readers); the others are left out."""
    sight = sight_of(principal)
    shown: list[dict[str, Any]] = []
    for requested in p.operations:
        try:
            (op,) = operations_of([requested])
        except CanonError:
            continue
        kind, key = _key(op)
        if _sees_key(store, sight, f"{kind}:{key}") and not (isinstance(op, PutNode) and not sees(sight, op.node)):
            shown.append(dict(requested))
    return shown


# -- writing -----------------------------------------------------------------------------------------------------------
def _audit(work: UnitOfWork, principal: Principal, surface: str, action: str, p: Proposal, revision: int) -> None:
    """An audit record of a proposal's step, in the step's own transaction: `proposals/propose` by the author
    and `proposals/merge` by the reviewer at the merge revision, both with the proposal's URI as their target and
    the digest of the operations stored or merged, link author, reviewer, proposal and merge in the audit log."""
    digest = hashlib.sha256(json.dumps(list(p.operations), sort_keys=True).encode()).hexdigest()[:16]
    work.execute(
        "INSERT INTO audit (at, principal, surface, action, target, arguments_digest, outcome, revision, duration_ms) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (utc_now(), principal.name, surface, action, proposal_uri(p.id), digest, "ok", revision, 0.0),
    )


def _touch(work: UnitOfWork, p: Proposal, **changes: Any) -> None:
    sets = ", ".join(f"{k} = ?" for k in changes)
    work.execute(f"UPDATE proposals SET {sets} WHERE id = ?", (*changes.values(), p.id))


def propose(store: Store, author: Principal, requested: Sequence[Mapping[str, Any]], title: str, rationale: str, *,
            surface: str = "core") -> Proposal:  # fmt: skip
    """Check the operations as the author's write on the current revision (what it raises, `write_batch` would
    raise), then store them as an open proposal based on that revision."""
    base, bases = _checked(store, author, requested)
    now = utc_now()
    p = Proposal(f"p-{secrets.token_hex(6)}", title, rationale, author.name, "open", base, tuple(requested), bases,
                 (), now, now)  # fmt: skip
    with store.unit_of_work() as work:
        work.execute(f"INSERT INTO proposals ({_COLUMNS}) VALUES ({', '.join('?' * 13)})",
                     (p.id, p.title, p.rationale, p.author, p.state, p.base_revision, json.dumps(list(requested)),
                      json.dumps(bases), "[]", now, now, None, None))  # fmt: skip
        _audit(work, author, surface, "proposals/propose", p, base)
    return p


def _open(store: Store, id: str) -> Proposal:
    p = get(store, id)
    if p.state != "open":
        raise ValidationError(f"Proposal {id!r} is {p.state}, no longer open.", [])
    return p


def _own(store: Store, author: Principal, id: str, what: str) -> Proposal:
    p = _open(store, id)
    if p.author != author.name:
        raise ForbiddenError("proposal", id, f"{author.name} may not {what} proposal {id!r}: only its author may.")
    return p


def revise(store: Store, author: Principal, id: str, *,
           requested: Sequence[Mapping[str, Any]] | None = None, title: str | None = None,
           rationale: str | None = None) -> Proposal:  # fmt: skip
    """The author changes an open proposal: new operations are checked as when proposed, and the base revision
    and the touched records' revisions are taken anew (what resolves a conflict)."""
    p = _own(store, author, id, "revise")
    changes: dict[str, Any] = {"updated_at": utc_now()}
    if requested is not None:
        base, bases = _checked(store, author, requested)
        changes |= {"operations": json.dumps(list(requested)), "bases": json.dumps(bases), "base_revision": base}
    if title is not None:
        changes["title"] = title
    if rationale is not None:
        changes["rationale"] = rationale
    with store.unit_of_work() as work:
        if not work.rows("SELECT id FROM proposals WHERE id = ? AND state = 'open'", (id,)):
            raise ValidationError(f"Proposal {id!r} was closed meanwhile; nothing was revised.", [])
        _touch(work, p, **changes)
    return get(store, id)


def _entry(by: Principal, decision: str, text: str) -> dict[str, Any]:
    return {"by": by.name, "at": utc_now(), "decision": decision, "text": text}


def withdraw(store: Store, author: Principal, id: str, why: str = "") -> Proposal:
    """The author closes an open proposal unmerged."""
    p = _own(store, author, id, "withdraw")
    with store.unit_of_work() as work:
        _close(work, p, "withdrawn", None, _entry(author, "withdraw", why), None)
    return get(store, id)


def comment(store: Store, principal: Principal, id: str, text: str) -> Proposal:
    """Add a comment to a proposal's discussion (anyone signed in; open or closed)."""
    if not principal.authenticated:
        raise ForbiddenError("proposal", id, "Sign in to comment on a proposal.")
    with store.unit_of_work() as work:  # read and write in one transaction: two comments at once both stay
        rows = work.rows(f"SELECT {_COLUMNS} FROM proposals WHERE id = ?", (id,))
        if not rows:
            raise NotFoundError("proposal", id)
        p = _row(rows[0])
        _touch(work, p, comments=json.dumps([*p.comments, _entry(principal, "comment", text)]), updated_at=utc_now())
    return get(store, id)


def review(store: Store, reviewer: Principal, id: str, decision: str, text: str, reviewers: Reviewers, *,
           surface: str = "core") -> Proposal:  # fmt: skip
    """Approve (merge, once, against the current revision) or reject an open proposal, with a comment. Refused
    (`ForbiddenError`) for its author and for anyone `reviewers` does not name; a merge that meets a touched
    record changed since the base is a `ConflictError` naming the records the reviewer may read."""
    if decision not in DECISIONS:
        raise ValidationError(f"A review decides {' or '.join(DECISIONS)}, not {decision!r}.", [])
    p = get(store, id)
    if reviewer.name == p.author or not reviewers.include(reviewer):
        why = "its author may not review it" if reviewer.name == p.author else "only a reviewer may"
        raise ForbiddenError("proposal", id, f"{reviewer.name} may not {decision} proposal {id!r}: {why}.")
    p = _open(store, id)
    entry = _entry(reviewer, decision, text)
    if decision == "reject":
        with store.unit_of_work() as work:
            _close(work, p, "rejected", reviewer, entry, None)
        return get(store, id)
    operations = operations_of(p.operations)
    sight = sight_of(reviewer)

    def name(moved: list[str]) -> str:
        shown = [k for k in moved if _sees_key(store, sight, k)]
        hidden = len(moved) - len(shown)
        return ", ".join(shown + ([f"{hidden} record(s) you may not read"] if hidden else []))

    def then(work: UnitOfWork, revision: int) -> None:
        _close(work, p, "merged", reviewer, entry, revision)
        _audit(work, reviewer, surface, "proposals/merge", p, revision)

    # the reviewer's write guard: a reviewer merges only what it may itself read and write
    conflicts = _guard(reviewer, operations, {}, p.bases, name)

    def guard(view: StateView, ops: Sequence[Operation]) -> None:
        _unchanged(store, p)  # in the merge's transaction: a second approval hears it was merged, not a conflict
        conflicts(view, ops)

    store.commit(operations, principal=p.author, guard=guard, then=then, proposal=p.id)
    return get(store, id)


def _unchanged(store: Store, p: Proposal) -> None:
    """Refuse a merge of `p` as it was read if, by the merge's transaction, it was closed or revised."""
    rows = store.rows("SELECT state, operations, bases FROM proposals WHERE id = ?", (p.id,))
    if not rows or rows[0][0] != "open":
        raise ValidationError(f"Proposal {p.id!r} was closed meanwhile by another review; nothing was written.", [])
    if json.loads(rows[0][1]) != list(p.operations) or json.loads(rows[0][2]) != dict(p.bases):
        raise ValidationError(f"Proposal {p.id!r} was revised meanwhile; read it again before approving it.", [])


def _close(work: UnitOfWork, p: Proposal, state: str, reviewer: Principal | None, entry: Mapping[str, Any],
           revision: int | None) -> None:  # fmt: skip
    """Close the proposal if it is still open (in the caller's transaction), adding `entry` to its discussion as it
    is then (a comment made meanwhile stays); refuse if someone else closed it."""
    rows = work.rows("SELECT comments FROM proposals WHERE id = ? AND state = 'open'", (p.id,))
    if not rows:
        raise ValidationError(f"Proposal {p.id!r} was closed meanwhile by another review; nothing was written.", [])
    comments = json.dumps([*json.loads(rows[0][0]), entry])
    work.execute(
        "UPDATE proposals SET state = ?, reviewer = ?, comments = ?, merge_revision = ?, updated_at = ? WHERE id = ?",
        (state, reviewer.name if reviewer else None, comments, revision, utc_now(), p.id),
    )


# -- the diff ----------------------------------------------------------------------------------------------------------
def diff(store: Store, p: Proposal, principal: Principal) -> Check:
    """The proposal against the current revision, as `principal` may see it. A closed proposal has no diff."""
    if p.state != "open":
        return Check((), False, f"The proposal is {p.state}.")
    sight = sight_of(principal)
    seen: dict[str, int] = {}
    everyone = Principal(p.author, frozenset({"admin"}))  # what the caller sees is decided per entry below
    try:
        operations = operations_of(p.operations)
        result = store.commit(operations, principal=p.author, dry_run=True, guard=_guard(everyone, operations, seen))
    except CanonError as exc:  # e.g. no longer valid under a model applied since
        if all(_sees_key(store, sight, k) for k in p.bases):
            return Check((), False, _message(exc))
        return Check((), False, "The proposal no longer applies to the current revision; it touches records you "
                     "may not read, so what fails is not shown.")  # fmt: skip
    moved = tuple(k for k in sorted(seen) if p.bases.get(k, 0) != seen[k] and _sees_key(store, sight, k))
    hidden = sum(1 for k in seen if p.bases.get(k, 0) != seen[k]) - len(moved)
    problem = None
    if moved or hidden:
        names = [*moved, *([f"{hidden} record(s) you may not read"] if hidden else [])]
        problem = f"Changed since the proposal's base revision: {', '.join(names)}; the author may revise it."
    entries = _entries(store, sight, result.planned)
    return Check(tuple(entries), problem is None, problem, moved)


def _message(exc: CanonError) -> str:
    problems = getattr(exc, "problems", ())
    return " ".join([str(exc), *(f"{q.pointer}: {q.message}" for q in problems)])


def _entries(store: Store, sight: Sight | None, planned: Sequence[Write]) -> list[DiffEntry]:
    first: dict[tuple[str, str], Write] = {}
    last: dict[tuple[str, str], Write] = {}
    after_nodes: dict[str, Node | None] = {}
    for w in planned:
        first.setdefault((w.kind, w.key), w)
        last[(w.kind, w.key)] = w
        if w.kind == "node":
            after_nodes[w.key] = w.after if isinstance(w.after, Node) else None
    entries: list[DiffEntry] = []
    for k, w in first.items():
        before, after = w.before, last[k].after
        entry = diff_entry(w.kind, w.key, before, after, _sees(store, sight, before, {}),
                           _sees(store, sight, after, after_nodes))  # fmt: skip
        if entry is not None:
            entries.append(entry)
    return entries


def _sees(store: Store, sight: Sight | None, record: Node | Edge | None, planned: Mapping[str, Node | None]) -> bool:
    """Whether `sight` sees a record (an edge: both its ends, as the batch leaves them when it writes them)."""
    if record is None or sight is None:
        return True
    if isinstance(record, Node):
        return sees(sight, record)
    stored = store.nodes([e for e in (record.source, record.target) if e not in planned])
    ends = [planned[e] if e in planned else stored.get(e) for e in (record.source, record.target)]
    return all(n is not None and sees(sight, n) for n in ends)


# -- what a reader is answered -----------------------------------------------------------------------------------------
def summary(store: Store, p: Proposal, principal: Principal, *, comments: bool = True) -> dict[str, Any]:
    """A proposal as `principal` is shown it (its touched records: those it may read)."""
    out = p.to_json() | {"touches": visible_keys(store, p, principal)}
    if not comments:
        del out["comments"]
    return out


def answer(store: Store, id: str, principal: Principal) -> dict[str, Any]:
    """A proposal with its operations, diff against the current revision, whether it applies cleanly and its
    discussion, as `principal` may see them: what `get_proposal` and the proposal's resource answer."""
    revision = store.revision()
    p = get(store, id)
    check = diff(store, p, principal)
    return {
        "proposal": summary(store, p, principal),
        "operations": visible_operations(store, p, principal),
        "diff": [e.to_json() for e in check.entries],
        "applies_cleanly": check.clean,
        "problem": check.problem,
        "changed_since_base": list(check.moved),
        "revision": revision,
    }


class ProposalBook:
    """The proposals of one store, as a handler reaches them (`ctx.proposals`): this module's functions on that
    store, and the graph index synced after a merge, as a write syncs it, so the caller's next read sees the merge
    and change listeners hear of it. (A plain class: the dispatcher keeps one.)"""

    __slots__ = ("_store", "_sync")

    def __init__(self, store: Store, sync: Callable[[], object]) -> None:
        self._store, self._sync = store, sync

    def propose(self, author: Principal, requested: Sequence[Mapping[str, Any]], title: str, rationale: str, *,
                surface: str = "core") -> Proposal:  # fmt: skip
        return propose(self._store, author, requested, title, rationale, surface=surface)

    def check(self, author: Principal, requested: Sequence[Mapping[str, Any]]) -> int:
        """What `propose` checks, without storing anything: raises what it would raise; the revision checked on."""
        return _checked(self._store, author, requested)[0]

    def revise(self, author: Principal, id: str, *, requested: Sequence[Mapping[str, Any]] | None = None,
               title: str | None = None, rationale: str | None = None) -> Proposal:  # fmt: skip
        return revise(self._store, author, id, requested=requested, title=title, rationale=rationale)

    def withdraw(self, author: Principal, id: str, why: str = "") -> Proposal:
        return withdraw(self._store, author, id, why)

    def comment(self, principal: Principal, id: str, text: str) -> Proposal:
        return comment(self._store, principal, id, text)

    def review(self, reviewer: Principal, id: str, decision: str, text: str, reviewers: Reviewers, *,
               surface: str = "core") -> Proposal:  # fmt: skip
        p = review(self._store, reviewer, id, decision, text, reviewers, surface=surface)
        if p.merge_revision is not None:
            self._sync()
        return p

    def find(
        self,
        principal: Principal,
        *,
        state: str | None = None,
        author: str | None = None,
        node: str | None = None,
        after: str | None = None,
        limit: int = 50,
    ) -> tuple[list[Proposal], int]:
        return find(self._store, principal, state=state, author=author, node=node, after=after, limit=limit)

    def visible_keys(self, p: Proposal, principal: Principal) -> list[str]:
        return visible_keys(self._store, p, principal)

    def summary(self, p: Proposal, principal: Principal, *, comments: bool = True) -> dict[str, Any]:
        return summary(self._store, p, principal, comments=comments)

    def opened(self, p: Proposal, principal: Principal) -> dict[str, Any]:
        """What a write answers of the proposal it made or revised: its id, state, base revision and the touched
        records `principal` may read (`propose_changes`' answer, and a reviewed write's `proposal`)."""
        return {"id": p.id, "state": p.state, "base_revision": p.base_revision,
                "touches": visible_keys(self._store, p, principal)}  # fmt: skip

    def answer(self, id: str, principal: Principal) -> dict[str, Any]:
        return answer(self._store, id, principal)


# -- who to tell -------------------------------------------------------------------------------------------------------
class Watermark:
    """Which proposals changed (proposed, revised, commented on, closed) since the last look, whichever process
    changed them: what the change feed (`core.seam.changes`) tells subscribers of a proposal's resource
    (`core.values.uris.proposal_uri`).

    A proposal's `updated_at` is compared with what it was at the last look, over the last `SKEW_S` seconds (the
    slack for other processes' clocks and for a transaction committed after it stamped its rows); the first look
    only notes what is there. Not thread-safe: one pump owns one."""

    SKEW_S = 30.0

    def __init__(self) -> None:
        self._seen: dict[str, str] | None = None

    def changed(self, store: Store) -> list[str]:
        since = (datetime.now(UTC) - timedelta(seconds=self.SKEW_S)).isoformat(timespec="milliseconds")
        rows = store.rows("SELECT id, updated_at FROM proposals WHERE updated_at >= ? ORDER BY updated_at, id",
                          (since.replace("+00:00", "Z"),))  # fmt: skip
        now = {str(id_): str(at) for id_, at in rows}
        seen, self._seen = self._seen, now
        return [] if seen is None else [id_ for id_, at in now.items() if seen.get(id_) != at]
