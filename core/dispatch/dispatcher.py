"""The one dispatch path: every call from every surface goes through `Dispatcher`.

    call_tool(principal, surface, name, arguments)
      → look up          unknown → UnknownToolError (MCP: JSON-RPC -32602 naming the closest tools)
      → authorise        the caller's roles must grant the tool's permission, else ForbiddenError (a result)
      → validate input   values no JSON surface may carry into canon first (`core.values.json_values.value_problems`:
                         non-finite numbers, integers past 64 bits, lone surrogates, deep nesting), then
                         against the exact input schema (plain arguments pass a `QuickCheck` first); failure
                         → an error *result* with JSON pointers; then the schema's top-level defaults are filled
                         in, so every surface makes the same call
      → execute          under a wall-time bound; handlers read through the caller's `sight` (core.dispatch.access);
                         a walk runs in a walk worker process when the dispatcher has them (core.dispatch.walkers),
                         else here once its turn comes: one at a time (core.values.priority)
      → audit            every hook gets one record: who, where, what, outcome, revision, duration
      → result           one JSON object, which surfaces send as structured content and as text

How a tool runs is part of its definition (`"execution"`, see `core.dispatch.registry.Execution`): `worker` on a thread
that may wait, `walk` taking turns with other walks, `point` (one record by its key, nothing else) and `indexed`
(a search the store answers from its indexes). `call_tool_now` is the same path for a caller that must not wait
(an event loop): it runs a `point` tool on the calling thread when the index and the store are free and current at
that instant, and otherwise declines (None), so the caller hands the call to a thread that may wait. A caller with
one client (stdio) may ask it to run `indexed` tools the same way. A `walk` tool's handler runs in a walk worker
process when there is one (`core.dispatch.walkers`): the serving process authorises, validates, audits and shapes the
call
as for any other, and waits for the handler's value off its interpreter.

A handler is bound to its tool where it is written: `@handler("get_node")` marks the function, and whoever
collects a toolset (`core.tools`) finds the marked functions of its modules.

Resources, completions and tool listings take the same path (execute with the caller's sight, audit).
Surfaces never hold logic: they translate their wire format to these calls and the results (or `CanonError`s)
back. A request a surface rejects before it has a principal (a bad token) is audited with `rejected`.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import hashlib
import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol, cast

from core.dispatch import proposals
from core.dispatch.access import may_call, require_node, require_tool, sight_of, write_guard
from core.dispatch.confirm import Asking, InputRequired
from core.dispatch.pinning import pin
from core.dispatch.planning import ModelPlanner
from core.dispatch.proposal_view import ProposalView
from core.dispatch.proposals import ProposalBook
from core.dispatch.registry import Registry, ToolDefinition
from core.dispatch.review import review_guard
from core.index.current import CurrentView
from core.index.graph import GraphIndex
from core.lang.model import Model
from core.lang.projection import shape
from core.store import CommitResult, Store
from core.store.view import View
from core.values.audit import AuditLog, AuditRecord
from core.values.documents import pointer
from core.values.errors import (
    CanonError,
    ForbiddenError,
    InvalidArgumentsError,
    LimitExceededError,
    Problem,
    UnavailableError,
    UnknownToolError,
)
from core.values.json_values import storable_text, value_problems
from core.values.operations import Operation
from core.values.principal import Principal, Reviewers, ReviewPolicy
from core.values.priority import Priority
from core.values.records import Node, Sight

__all__ = [
    "OUTCOMES",
    "AuditRecord",
    "CallContext",
    "Commit",
    "Dispatcher",
    "Handler",
    "ReadOnly",
    "StoreCommit",
    "ToolResult",
    "WalkPool",
    "error_json",
    "handler",
    "handlers_in",
]

log = logging.getLogger("canon.dispatch")
DEFAULT_TIME_LIMIT_S = 10.0


class Commit(Protocol):
    """How a handler writes (`CallContext.commit`): the store's one write path, as the caller."""

    def __call__(self, operations: Sequence[Operation], *, dry_run: bool = False) -> CommitResult:
        """Commit `operations` as the caller in one transaction (`Store.commit`, with `write_guard` checking that
        the caller may touch every record involved, and `core.dispatch.review` refusing a write of a type that
        waits for review with `ReviewRequiredError`, unless the caller writes it directly), then bring this
        process's index up to it, so the call's next read sees its write and the change listeners hear it now."""
        ...

    def published(self) -> None:
        """Bring this process's index up to what was committed otherwise (a model applied by the planner)."""
        ...


class StoreCommit:
    """`Commit` on a store and the graph index that mirrors it, for one principal. (A plain class: one is made
    per call, on the path every read takes.)"""

    __slots__ = ("guard", "index", "principal", "store")

    def __init__(self, store: Store, index: GraphIndex, principal: Principal, policy: ReviewPolicy | None = None,
                 model: Model | None = None) -> None:  # fmt: skip
        self.store, self.index, self.principal = store, index, principal
        self.guard = write_guard(principal)
        if policy is not None and model is not None:  # a write of a reviewed type: ReviewRequiredError
            self.guard = review_guard(policy, model, principal, self.guard)

    def __call__(self, operations: Sequence[Operation], *, dry_run: bool = False) -> CommitResult:
        # a dry run writes nothing, so it is checked as the write it is, without the review policy's refusal
        guard = write_guard(self.principal) if dry_run else self.guard
        result = self.store.commit(operations, principal=self.principal.name, dry_run=dry_run, guard=guard)
        if result.changes:
            self.index.sync()  # apply now (and notify listeners), so the caller's next read sees its write
        return result

    def published(self) -> None:
        self.index.sync()


@dataclass(frozen=True)
class ReadOnly:
    """`Commit` where nothing may be written (a walk worker's store is read-only)."""

    def __call__(self, operations: Sequence[Operation], *, dry_run: bool = False) -> CommitResult:
        raise ForbiddenError("store", "walk worker", "A walk worker reads only; writes run in the serving process.")

    def published(self) -> None:
        return None


@dataclass(frozen=True)
class CallContext:
    """What a handler may use: the caller, the graph through one door (`view`: the current revision, or the one
    the call is pinned to with `at`), `commit` for writes, and its deadline. Nothing else of the store or index."""

    principal: Principal
    surface: str
    registry: Registry
    view: View
    commit: Commit
    deadline: float
    time_limit_s: float = DEFAULT_TIME_LIMIT_S
    sight: Sight | None = None  # what the principal may see; None: everything
    audit: AuditLog | None = None
    planner: ModelPlanner | None = None  # what `apply_model` plans with (`core.dispatch.planning`), if anything
    reviewers: Reviewers = field(default_factory=Reviewers)  # who may review proposals (`[proposals]`)
    book: ProposalBook | None = None  # the store's proposals (`core.dispatch.proposals`); None: none written here
    asking: Asking | None = None  # the caller's client can ask its person first (`core.dispatch.confirm`), or not

    @property
    def model(self) -> Model:
        return self.registry.model

    @property
    def proposals(self) -> ProposalBook:
        """The store's proposals, the door the proposal tools and resource use; `UnavailableError` where there is
        none (a walk worker)."""
        if self.book is None:
            raise UnavailableError("Proposals are read and written in the serving process, not here.")
        return self.book

    @property
    def models(self) -> ModelPlanner:
        """The model planner the composition root handed in; `UnavailableError` when there is none."""
        if self.planner is None:
            raise UnavailableError("This server plans no model change: it was started without a model planner.")
        return self.planner

    def readable(self, node: Node) -> Node:
        """`node`, if the caller may see it; `ForbiddenError` otherwise."""
        require_node(self.sight, self.principal, node)
        return node

    def check_time(self) -> None:
        """Raise `LimitExceededError` once the call's wall-time bound has passed; handlers call it in loops."""
        if time.monotonic() > self.deadline:
            raise self.out_of_time()

    def out_of_time(self) -> LimitExceededError:
        return LimitExceededError(
            f"The query ran out of its {self.time_limit_s:g} s; narrow it (a type, conditions, a smaller depth "
            "or limit).",
            limit="time_s", value=self.time_limit_s,
        )  # fmt: skip


Handler = Callable[[CallContext, dict[str, Any]], dict[str, Any]]
_BOUND = "__canon_tool__"  # the attribute `handler` marks a function with: the name of the tool it answers


def handler(name: str) -> Callable[[Handler], Handler]:
    """Bind the decorated function to the tool called `name` (its definition says how it runs)."""

    def bind(function: Handler) -> Handler:
        setattr(function, _BOUND, name)
        return function

    return bind


def handlers_in(namespaces: Iterable[Mapping[str, object]]) -> dict[str, Handler]:
    """The handlers bound with `@handler` among the values of `namespaces` (modules' `vars()`), by tool name. The
    same function found twice (imported elsewhere) counts once; two functions bound to one name are an error."""
    found: dict[str, Handler] = {}
    for namespace in namespaces:
        for value in namespace.values():
            name = getattr(value, _BOUND, None)
            if not isinstance(name, str) or not callable(value):
                continue
            function = cast("Handler", value)
            if found.setdefault(name, function) is not function:
                raise ValueError(f"two handlers are bound to the tool {name!r}")
    return found


class WalkPool(Protocol):
    """Where walks run off this interpreter (`core.walkers.Walkers`, handed in by the composition root)."""

    def serves(self, name: str, handler: Handler) -> bool:
        """Whether the pool can run `handler` for the tool `name` (one of the handler table it was handed)."""
        ...

    def walk(self, ctx: CallContext, tool: str, arguments: Mapping[str, Any]) -> dict[str, Any] | None:
        """The handler's value, run in the pool; None when it cannot take the call now (it runs here then)."""
        ...


@dataclass(frozen=True)
class ToolResult:
    tool: str
    value: dict[str, Any] | None  # the structured result; None when the call failed or asks first
    error: CanonError | None = None
    asks: Mapping[str, Any] | None = None  # the input requests the call answers first (`core.dispatch.confirm`)

    @property
    def is_error(self) -> bool:
        return self.error is not None

    def as_json(self) -> dict[str, Any]:
        """The object both the structured content and the text content carry."""
        if self.error is not None:
            return {"error": error_json(self.error)}
        assert self.value is not None
        return self.value


OUTCOMES = ("ok", "invalid", "unknown", "not_found", "forbidden", "conflict", "limit", "error", "failed", "rejected",
            "asked")  # fmt: skip
"""Audit outcomes: success; the caller's input, target, rights or revision were wrong; a bound was hit; another
canon error; an unexpected failure (a bug); a request refused before it had a principal (a bad token); a call that
answered by asking the person at the client first (MCP's input-required result, `core.dispatch.confirm`)."""


def error_json(error: CanonError) -> dict[str, Any]:
    """The wire form of an error, shared by every surface."""
    out: dict[str, Any] = {"code": error.code, "message": str(error)}
    problems: tuple[Problem, ...] = getattr(error, "problems", ())
    if problems:
        out["problems"] = [p.as_dict() for p in problems]
    for name in ("tool", "kind", "key", "expected", "actual", "limit", "value", "suggestions", "since", "oldest"):
        if hasattr(error, name):
            value = getattr(error, name)
            out[name] = list(value) if isinstance(value, tuple) else value
    return out


def _digest(arguments: Mapping[str, Any]) -> str:
    try:
        text = json.dumps(arguments, sort_keys=True, separators=(",", ":"), default=str)
    except RecursionError:  # arguments refused as nested too deep are still audited
        text = "(nested too deep)"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True, eq=False)
class Dispatcher:
    """The dispatch path through one registry. Immutable: a model change makes another (`evolve`), and a call that
    started on this one finishes on it."""

    registry: Registry
    store: Store
    index: GraphIndex
    handlers: Mapping[str, Handler]
    time_limit_s: float = DEFAULT_TIME_LIMIT_S
    audit_hooks: list[Callable[[AuditRecord], None]] = field(default_factory=list[Callable[[AuditRecord], None]])
    audit: AuditLog | None = None  # the store's audit log, when this dispatcher keeps one
    priority: Priority = field(default_factory=Priority)  # walks take turns: cheap calls before walks
    walkers: WalkPool | None = None  # walk worker processes (core.dispatch.walkers); None: walks run in this process
    reviewers: Reviewers = field(default_factory=Reviewers)  # who may review proposals (`[proposals]`)
    policy: ReviewPolicy = field(default_factory=ReviewPolicy)  # which writes wait for review (`[proposals]`)
    planner: ModelPlanner | None = None  # what `apply_model` plans with, handed in by the composition root
    current: CurrentView = field(init=False, repr=False)  # the view of the current revision every call reads
    book: ProposalBook = field(init=False, repr=False)  # the store's proposals, for every call

    def __post_init__(self) -> None:
        object.__setattr__(self, "book", ProposalBook(self.store, self.index.sync))
        object.__setattr__(self, "current", CurrentView(self.store, self.index))  # one per dispatcher: every call's
        names = {t.name for t in self.registry.tools}
        if names != set(self.handlers):  # a definition without a handler, or a handler bound to a misspelt name
            raise ValueError(f"tools without a handler: {sorted(names - set(self.handlers))}; handlers without a "
                             f"tool: {sorted(set(self.handlers) - names)}")  # fmt: skip

    def evolve(self, registry: Registry) -> Dispatcher:
        """A dispatcher like this one (same store, index, handlers, audit, hooks and walk turns) for `registry`."""
        return dataclasses.replace(self, registry=registry)

    def context(self, principal: Principal, surface: str, received: float | None = None,
                at: int | None = None, asking: Asking | None = None) -> CallContext:  # fmt: skip
        """The context of a call received at `received` (`time.monotonic()`; default: now), whose wall-time bound
        counts from then: time spent waiting for a worker thread, a sync or a walk's turn is part of the call's
        time. Its view is the current revision's, or the store's at `at` (a read of the past: `GoneError` before
        what the change log keeps, `FutureRevisionError` beyond the store)."""
        deadline = (time.monotonic() if received is None else received) + self.time_limit_s
        view: View = self.current if at is None else self.store.view(at)
        commit = StoreCommit(self.store, self.index, principal, self.policy, self.registry.model)
        return CallContext(principal, surface, self.registry, view, commit,
                           deadline, self.time_limit_s, sight_of(principal), self.audit, self.planner,
                           self.reviewers, self.book, asking)  # fmt: skip

    def tools_for(self, principal: Principal, surface: str) -> list[ToolDefinition]:
        """The tools `principal` may call, in registry order (what its tools/list shows); audited."""
        return self.run(
            principal, surface, "tools/list", "", {}, lambda ctx: self.callable_tools(principal), needs=None
        )

    def callable_tools(self, principal: Principal) -> list[ToolDefinition]:
        """The tools `principal` may call, in registry order; not audited (`tools_for` is the audited listing)."""
        return [t for t in self.registry.tools if may_call(principal, t)]

    def unknown_tool(self, principal: Principal, name: str) -> UnknownToolError:
        """The error for `name`, called by `principal` and naming no tool. Its "did you mean" hints come only from
        the tools `principal` may call (what its tools/list shows): never a tool hidden from it."""
        names = [t.name for t in self.callable_tools(principal)]
        return UnknownToolError(name, difflib.get_close_matches(name, names, n=3, cutoff=0.5))

    def rejected(self, surface: str, target: str, reason: str) -> None:
        """Audit a request a surface refused before it had a principal (e.g. an unknown bearer token)."""
        self._audit(Principal(f"({reason})", authenticated=False), surface, "request", target, {}, "rejected",
                    time.perf_counter())  # fmt: skip

    def call_tool(self, principal: Principal, surface: str, name: str, arguments: Mapping[str, Any] | None, *,
                  received: float | None = None, asking: Asking | None = None) -> ToolResult:  # fmt: skip
        """Run a tool for a principal. Raises `UnknownToolError` only; every other failure is a result. A surface
        that hands the call to a worker thread passes `received`, the `time.monotonic()` it got the call at, so the
        call's wall-time bound includes the wait. `asking`: the caller's client can ask its person first (MCP
        2026-07-28 with form elicitation), with this request's answers; then the result may ask (`asks`)."""
        return self._call(principal, surface, name, arguments, sync=True, received=received, asking=asking)

    def call_tool_now(self, principal: Principal, surface: str, name: str, arguments: Mapping[str, Any] | None, *,
                      searches: bool = False, tool: ToolDefinition | None = None) -> ToolResult | None:  # fmt: skip
        """`call_tool` on this thread, for a caller that must not wait; None (and nothing done) unless `name` is a
        point read (or, with `searches`, an indexed read) and the index and the store are free and current right
        now. Then both stay held for the call, so it never waits on another thread's walk or write, nor replays
        the change log. `tool`: the current registry's tool `name`, if the caller has just looked it up."""
        tool = self.registry.find(name) if tool is None else tool
        if tool is None or not (tool.execution == "point" or (searches and tool.execution == "indexed")):
            return None
        with self.index.uncontended() as free:
            return self._call(principal, surface, name, arguments, sync=False, tool=tool) if free else None

    def _call(self, principal: Principal, surface: str, name: str, arguments: Mapping[str, Any] | None, *,
              sync: bool, received: float | None = None, tool: ToolDefinition | None = None,
              asking: Asking | None = None) -> ToolResult:  # fmt: skip
        started = time.perf_counter()
        received = time.monotonic() if received is None else received
        args = dict(arguments or {})
        outcome = "failed"
        try:
            if tool is None:
                tool = self.registry.tool(name)  # UnknownToolError propagates: a protocol error, not a result
        except UnknownToolError:
            outcome = "unknown"
            self._audit(principal, surface, "tools/call", name, args, outcome, started)
            raise self.unknown_tool(principal, name) from None
        try:
            require_tool(principal, tool)
            hostile = value_problems(args)  # before the schema: its messages quote values, and it recurses
            if hostile:
                raise InvalidArgumentsError(tool.name, hostile)
            quick = self.registry.quick_check(tool.name)
            if quick is None or not quick(args):
                validator = self.registry.input_validator(tool.name)
                problems = [Problem(pointer(e.absolute_path), e.message) for e in validator.iter_errors(args)]
                if problems:
                    raise InvalidArgumentsError(tool.name, sorted(problems))
            if sync:
                self.index.sync()
            # the schema's defaults, made explicit: an argument left out and one given as its default are the same
            # call (same cursor fingerprint) whichever surface sent it
            defaults = self.registry.input_defaults(tool.name)
            full = {**copy.deepcopy(defaults), **args} if defaults else dict(args)
            full = pin(self.store, tool, full)  # as_of -> at (core.dispatch.pinning)
            at = full["at"] if "at" in full and tool.pins else None  # a read of the past: the view is the store's then
            handler, ctx = self.handlers[tool.name], self.context(principal, surface, received, at, asking)
            if "proposal" in full and tool.pins:  # a read at a proposal: the current view with its writes applied
                ctx = dataclasses.replace(
                    ctx, view=ProposalView(self.store, ctx.view, proposals.get(self.store, full["proposal"]))
                )
            value = self._walk(handler, ctx, tool.name, full) if tool.execution == "walk" else handler(ctx, full)
            outcome = "ok"
            return ToolResult(tool.name, shape(value, full, self.registry.model))
        except CanonError as exc:
            outcome = _outcome(exc)
            return ToolResult(tool.name, None, exc)
        except InputRequired as asked:  # nothing done: the client asks its person, then calls again
            outcome = "asked"
            return ToolResult(tool.name, None, asks=asked.requests)
        finally:
            self._audit(principal, surface, "tools/call", name, args, outcome, started)

    def _walk(self, handler: Handler, ctx: CallContext, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """A walk's value: from a walk worker when there is one for it (core.dispatch.walkers), else run here when its
        turn
        comes (core.values.priority)."""
        # a walk worker reads the store's views, not a proposal's (which is this process's dry run)
        if self.walkers is not None and not isinstance(ctx.view, ProposalView) and self.walkers.serves(name, handler):
            value = self.walkers.walk(ctx, name, arguments)
            if value is not None:
                return value
        with self.priority.walk(ctx.deadline) as turn:
            if not turn:  # its time ran out waiting for its turn
                raise ctx.out_of_time()
            return handler(ctx, arguments)

    def run(self, principal: Principal, surface: str, action: str, target: str, arguments: Mapping[str, Any],
            work: Callable[[CallContext], Any], *, needs: str | None = "read") -> Any:  # fmt: skip
        """Run a non-tool action (resource read or list, completion) on the same path: authorise (the caller's
        roles must grant `needs`), execute, audit."""
        started = time.perf_counter()
        outcome = "failed"
        try:
            if needs is not None and needs not in principal.permissions:
                raise ForbiddenError("resource", target, f"{principal.name} has no role that may {needs}.")
            self.index.sync()
            result = work(self.context(principal, surface))
            outcome = "ok"
            return result
        except CanonError as exc:
            outcome = _outcome(exc)
            raise
        finally:
            self._audit(principal, surface, action, target, arguments, outcome, started)

    def _audit(self, principal: Principal, surface: str, action: str, target: str,
               arguments: Mapping[str, Any], outcome: str, started: float) -> None:  # fmt: skip
        if not self.audit_hooks and self.audit is None:
            return
        record = AuditRecord(
            datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            principal.name, surface, action, storable_text(target), _digest(arguments), outcome, self.index.revision,
            round((time.perf_counter() - started) * 1000, 3),
        )  # fmt: skip
        if self.audit is not None:
            self.audit.append(record)
        for hook in self.audit_hooks:
            hook(record)


_OUTCOME_OF_CODE = {
    "invalid_arguments": "invalid", "invalid": "invalid", "not_found": "not_found", "conflict": "conflict",
    "unknown_tool": "unknown", "forbidden": "forbidden", "limit_exceeded": "limit",
}  # fmt: skip


def _outcome(error: CanonError) -> str:
    return _OUTCOME_OF_CODE.get(error.code, "error")
