"""The gate every GraphQL document passes before it runs: bounded parsing and validation, off the event loop.

`Gate` (a strawberry extension, one per request) takes over strawberry's parsing and validation. A document over
`MAX_DOCUMENT` characters is refused at once; any other is parsed and validated in a worker thread, never on the
event loop, with the bounds of `generators.graphql.bounds` applied in order (tokens while parsing; nodes, nesting
and fragments before any rule; `budget_rule` before GraphQL's own rules). Every step is linear in the document
and the document is bounded, so the work a query can cause before it runs is bounded by construction; the thread
keeps even that away from other callers. A refusal is logged in one line (which bound, never the document) and
answered as a GraphQL error with `extensions.code` LIMIT_EXCEEDED.

The outcome of a document (its tree and its errors) is kept per served app (`Documents`, in the request's context;
least recently used first out), so a repeated query is parsed and validated once and then costs no thread hop. At
most `CHECKS_AT_ONCE` documents are checked at once: a flood of large documents queues behind itself, and the
dispatcher's worker threads and the event loop's share of the interpreter stay free for everyone else.

Per request, on the event loop: a document holding several operations needs `operationName` (GraphQL over HTTP
asks for a request error; strawberry would run the first one).
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import anyio
from graphql import (
    ASTValidationRule,
    DocumentNode,
    FieldNode,
    FragmentDefinitionNode,
    GraphQLError,
    GraphQLSchema,
    GraphQLSyntaxError,
    NameNode,
    Node,
    OperationDefinitionNode,
    OperationType,
    SelectionSetNode,
    parse,
    validate,
)
from strawberry.extensions import MaskErrors, SchemaExtension
from strawberry.schema.schema import validate_document

from generators.graphql.bounds import (
    MAX_DOCUMENT,
    MAX_FRAGMENTS,
    MAX_NESTING,
    MAX_NODES,
    MAX_TOKENS,
    limit_error,
    unexpected,
)

__all__ = ["CACHED_DOCUMENTS", "Checked", "Documents", "Gate", "check", "request_extensions"]

log = logging.getLogger("canon.graphql")

CACHED_DOCUMENTS = 128  # outcomes kept per served app
CHECKS_AT_ONCE = 2  # documents checked at once per served app: more would take the dispatcher's threads and the GIL


@dataclass(frozen=True)
class Checked:
    """What the gate made of one document: its tree (None when it did not parse) and its errors."""

    document: DocumentNode | None
    errors: tuple[GraphQLError, ...]

    @property
    def refused(self) -> tuple[str, ...]:
        """The bounds the document went past (empty when none did)."""
        found = [e.extensions or {} for e in self.errors]
        return tuple(str(x.get("limit")) for x in found if x.get("code") == "LIMIT_EXCEEDED")


def _survey(document: DocumentNode) -> GraphQLError | None:
    """The syntax tree's size, nesting and fragment count against their bounds, in one iterative walk."""
    nodes, deepest, stack = 0, 0, list[tuple[Node, int]]([(document, 1)])
    while stack:
        node, level = stack.pop()
        nodes, deepest = nodes + 1, max(deepest, level)
        if nodes > MAX_NODES:
            return limit_error(f"The document has over {MAX_NODES} syntax nodes.", "nodes", MAX_NODES)
        for key in node.keys:
            value = getattr(node, key, None)
            children: Sequence[Any] = value if isinstance(value, tuple | list) else (value,)  # pyright: ignore[reportUnknownVariableType]
            stack.extend((child, level + 1) for child in children if isinstance(child, Node))
    if deepest > MAX_NESTING:
        return limit_error(f"The document nests {deepest} levels deep, over the {MAX_NESTING} allowed.", "nesting",
                           MAX_NESTING)  # fmt: skip
    fragments = sum(isinstance(d, FragmentDefinitionNode) for d in document.definitions)
    if fragments > MAX_FRAGMENTS:
        return limit_error(f"The document defines {fragments} fragments, over the {MAX_FRAGMENTS} allowed.",
                           "fragments", MAX_FRAGMENTS)  # fmt: skip
    return None


def check(schema: GraphQLSchema, query: str, budget: type[ASTValidationRule],
          rules: tuple[type[ASTValidationRule], ...]) -> Checked:  # fmt: skip
    """Parse and validate `query` within the bounds, cheapest check first (CPU-bound: run it in a worker thread)."""
    try:
        try:
            document = parse(query, max_lexical_tokens=MAX_TOKENS, max_comments=MAX_TOKENS)
        except GraphQLSyntaxError as error:
            if error.message.endswith("Parsing aborted."):  # graphql-core's words for a bound, not a typo
                return Checked(None, (limit_error(error.message, "tokens", MAX_TOKENS),))
            return Checked(None, (error,))
        refused = _survey(document)
        if refused is not None:
            return Checked(document, (refused,))
        errors = validate(schema, document, (budget,))
        if not errors:
            errors = validate_document(schema, document, rules)
        return Checked(document, tuple(errors))
    except RecursionError:
        return Checked(None, (limit_error("The document nests too deeply.", "nesting", MAX_NESTING),))


class Documents:
    """The outcomes of the latest `CACHED_DOCUMENTS` documents of one app's schema, by text and validation rules.
    Read and written on that app's event loop only."""

    def __init__(self, budget: type[ASTValidationRule], size: int = CACHED_DOCUMENTS) -> None:
        self.budget = budget
        self.size = size
        self.kept: OrderedDict[tuple[str, tuple[type[ASTValidationRule], ...]], Checked] = OrderedDict()
        self.hits = self.misses = 0
        self.limiter: anyio.CapacityLimiter | None = None  # made on the event loop, at the first check

    async def get(self, schema: GraphQLSchema, query: str, rules: tuple[type[ASTValidationRule], ...]) -> Checked:
        key = (query, rules)
        found = self.kept.get(key)
        if found is not None:
            self.hits += 1
            self.kept.move_to_end(key)
            return found
        self.misses += 1
        if len(query) > MAX_DOCUMENT:
            checked = Checked(None, (limit_error(f"The document has {len(query)} characters, over the "
                                                 f"{MAX_DOCUMENT} allowed.", "document", MAX_DOCUMENT),))  # fmt: skip
        else:
            self.limiter = self.limiter or anyio.CapacityLimiter(CHECKS_AT_ONCE)
            checked = await anyio.to_thread.run_sync(check, schema, query, self.budget, rules, limiter=self.limiter)
        self.kept[key] = checked
        while len(self.kept) > self.size:
            self.kept.popitem(last=False)
        return checked


class Gate(SchemaExtension):
    """Parsing and validation through the `Documents` of the request's app (its context's `documents`; strawberry's
    own steps then find them done)."""

    def __init__(self) -> None:
        super().__init__()
        self.checked: Checked | None = None

    async def on_parse(self) -> AsyncIterator[None]:
        context = self.execution_context
        if context.graphql_document is None and context.query:
            documents = context.context.get("documents") if isinstance(context.context, dict) else None
            if not isinstance(documents, Documents):
                raise TypeError("a GraphQL request's context carries no Documents: execute the schema with "
                                "Runtime.context")  # fmt: skip
            checked = await documents.get(context.schema._schema, context.query, context.validation_rules)  # pyright: ignore[reportPrivateUsage]
            if checked.refused:
                log.warning("GraphQL document refused: over its %s bound", ", ".join(checked.refused))
            name = getattr(context, "_provided_operation_name", None)
            context.graphql_document, self.checked = checked.document or _unread(name), checked
        yield

    async def on_validate(self) -> AsyncIterator[None]:
        context = self.execution_context
        if self.checked is not None:
            ambiguous = _ambiguous(self.checked.document, getattr(context, "_provided_operation_name", None))
            context.pre_execution_errors = [*self.checked.errors, *ambiguous]
        yield


def _unread(name: str | None) -> DocumentNode:
    """A stand-in for a document that did not parse: strawberry needs an operation to look at before validation,
    where the parse error is answered (raised while parsing, it would escape a WebSocket subscription)."""
    typename = FieldNode(name=NameNode(value="__typename"), arguments=(), directives=())
    operation = OperationDefinitionNode(operation=OperationType.QUERY, name=NameNode(value=name) if name else None,
                                        variable_definitions=(), directives=(),
                                        selection_set=SelectionSetNode(selections=(typename,)))  # fmt: skip
    return DocumentNode(definitions=(operation,))


def _ambiguous(document: DocumentNode | None, name: str | None) -> Iterator[GraphQLError]:
    """Strawberry runs the first of several operations when none is named; GraphQL over HTTP asks for an error."""
    count = sum(isinstance(d, OperationDefinitionNode) for d in document.definitions) if document else 0
    if name is None and count > 1:
        yield GraphQLError(f"The document holds {count} operations; name the one to run in operationName.",
                           extensions={"code": "BAD_REQUEST"})  # fmt: skip


def request_extensions() -> list[Callable[[], SchemaExtension]]:
    """Per-request extension factories for a schema: the masking of unexpected errors, and the gate (its
    `Documents` are the app's, in the request's context)."""
    return [
        lambda: MaskErrors(should_mask_error=unexpected, error_message="Unexpected error; it has been logged."),
        Gate,
    ]
