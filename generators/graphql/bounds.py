"""The bounds of the GraphQL surface (`generators.graphql.schema`), and how its failures are answered.

The bounds, in the order they are checked (`generators.graphql.gate` applies them, off the event loop):

1. the document's size (`MAX_DOCUMENT` characters), before it is parsed;
2. its tokens and comments (`MAX_TOKENS` each), counted by the parser as it reads;
3. its syntax tree: nodes (`MAX_NODES`), nesting (`MAX_NESTING`) and fragment definitions (`MAX_FRAGMENTS`),
   before any validation rule runs;
4. `budget_rule`: depth (`MAX_DEPTH`), aliases (`MAX_ALIASES`), fields of one name merged into one selection set
   (`MAX_REPEAT`) and an estimated cost (fields x list sizes, `MAX_COST`), in one walk that tallies each fragment
   once however often it is spread; only a document within these meets GraphQL's own validation rules;
5. subscriptions per connection and per process.

Request bodies are bounded by core.

Failures: a canon error (a refused bound among them) is an answer, `canon_error` gives its GraphQL form with
`extensions.code`; an unexpected one (`unexpected`) is masked in the response and logged with its traceback
(`CanonSchema`).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import strawberry
from graphql import (
    FieldNode,
    FragmentSpreadNode,
    GraphQLError,
    GraphQLField,
    GraphQLInterfaceType,
    GraphQLList,
    GraphQLNamedType,
    GraphQLNonNull,
    GraphQLObjectType,
    InlineFragmentNode,
    IntValueNode,
    OperationDefinitionNode,
    OperationType,
    SelectionSetNode,
    ValidationContext,
    ValidationRule,
    get_named_type,
)
from strawberry.types import ExecutionContext, ExecutionResult
from strawberry.types.graphql import OperationType as StrawberryOperationType

from core.dispatch.dispatcher import error_json
from core.values.errors import CanonError, LimitExceededError

__all__ = [
    "MAX_ALIASES",
    "MAX_COST",
    "MAX_DEPTH",
    "MAX_DOCUMENT",
    "MAX_FRAGMENTS",
    "MAX_NESTING",
    "MAX_NODES",
    "MAX_REPEAT",
    "MAX_SUBSCRIPTIONS",
    "MAX_SUBSCRIPTIONS_PER_CONNECTION",
    "MAX_TOKENS",
    "UNKNOWN_LIST",
    "CanonSchema",
    "Tally",
    "budget_rule",
    "canon_error",
    "limit_error",
    "unexpected",
]

log = logging.getLogger("canon.graphql")

MAX_DOCUMENT = 50_000  # characters of a query document, refused before it is parsed
MAX_TOKENS = 5_000  # lexical tokens (and, apart, comments), counted by the parser as it reads
MAX_NODES = 10_000  # syntax tree nodes, counted before any validation rule runs
MAX_NESTING = 64  # syntax tree levels (selection sets, lists and objects in arguments)
MAX_FRAGMENTS = 100  # fragment definitions in one document
MAX_DEPTH = 10
MAX_ALIASES = 30
MAX_REPEAT = 50  # fields answering to one name in one merged selection set (the overlapping-fields rule is quadratic)
MAX_COST = 10_000  # estimated field resolutions: each field counts 1, times the list sizes above it
UNKNOWN_LIST = 10  # the size assumed for a list nothing bounds (e.g. describe_model's node_types)
MAX_SUBSCRIPTIONS_PER_CONNECTION = 20
MAX_SUBSCRIPTIONS = 1_000  # per served app (`generators.graphql.runtime.Runtime`)


# -- failures ---------------------------------------------------------------------------------------------------------
def unexpected(error: GraphQLError) -> bool:
    """Whether `error` is a failure nobody meant to answer with (masked, and logged with its traceback)."""
    original = error.original_error
    return original is not None and not isinstance(original, GraphQLError | CanonError)


def canon_error(error: CanonError) -> GraphQLError:
    """The GraphQL form of a canon error: `extensions.code` upper-cased, `problems`, and the structured fields."""
    body = error_json(error)
    code = str(body.pop("code")).upper()
    body.pop("message", None)
    return GraphQLError(str(error), extensions={"code": code, "problems": body.pop("problems", []), **body})


class CanonSchema(strawberry.Schema):
    """Logs only unexpected failures (with their traceback); canon errors and invalid queries are answers.
    `execute` (a POST or GET) runs queries and mutations only: a subscription is refused there (strawberry would
    run it as a query and fail), it is served over WebSocket."""

    async def execute(
        self,
        query: str | None,
        variable_values: dict[str, Any] | None = None,
        context_value: Any | None = None,
        root_value: Any | None = None,
        operation_name: str | None = None,
        allowed_operation_types: Iterable[StrawberryOperationType] | None = None,
        operation_extensions: dict[str, Any] | None = None,
    ) -> ExecutionResult:
        allowed = set(allowed_operation_types or StrawberryOperationType) - {StrawberryOperationType.SUBSCRIPTION}
        return await super().execute(query, variable_values, context_value, root_value, operation_name, allowed,
                                     operation_extensions)  # fmt: skip

    def process_errors(self, errors: list[GraphQLError], execution_context: ExecutionContext | None = None) -> None:
        for error in errors:
            if unexpected(error):
                log.error("GraphQL field %s failed", error.path, exc_info=error.original_error)


# -- the work bound: one walk of the document, each fragment walked once ---------------------------------------------
@dataclass(frozen=True)
class Tally:
    """What a selection set asks for, its fragments expanded: field depth, aliased fields, estimated cost, how many
    fields answer to each name in it (`names`) and the most fields answering to one name in any merged selection
    set inside it (`repeat`, what graphql-core's overlapping-fields rule compares pairwise)."""

    depth: int = 0
    aliases: int = 0
    cost: int = 0
    names: Mapping[str, int] = field(default_factory=dict[str, int])
    repeat: int = 0


def limit_error(message: str, limit: str, value: int) -> GraphQLError:
    """A refused bound, as GraphQL answers it: `extensions.code` LIMIT_EXCEEDED, with the bound's name and value."""
    return canon_error(LimitExceededError(message, limit=limit, value=value))


def budget_rule(maxima: Mapping[tuple[str, str], int]) -> type[ValidationRule]:
    """The validation rule bounding an operation's work: depth (`MAX_DEPTH`), aliases (`MAX_ALIASES`), fields of one
    name merged into one selection set (`MAX_REPEAT`) and estimated cost (`MAX_COST`). Each fragment is walked
    once per enclosing `limit` and its tally reused wherever it is spread, so the walk is linear in the document
    however often fragments spread each other (a fragment spreading the next twice, 40 deep, tallies 2**41
    fields in 41 steps).

    Cost: every field counts 1, and what a list holds counts once per item it may hold (its own `limit`, or the
    nearest enclosing `limit`, else `UNKNOWN_LIST`). A `limit` given as a variable counts at its maximum
    (`maxima`, by (type, field)). Fragments on other types count their largest one, not their sum."""

    class BudgetRule(ValidationRule):
        def __init__(self, context: ValidationContext) -> None:
            super().__init__(context)
            self.memo: dict[tuple[str, int | None], Tally] = {}
            self.open: set[str] = set()  # fragments being walked (a cycle counts nothing; another rule reports it)

        def enter_operation_definition(self, node: OperationDefinitionNode, *_: Any) -> None:
            schema = self.context.schema
            root = {OperationType.QUERY: schema.query_type, OperationType.MUTATION: schema.mutation_type,
                    OperationType.SUBSCRIPTION: schema.subscription_type}[node.operation]  # fmt: skip
            if root is None:
                return
            tally = self._set(node.selection_set, root, None)
            for error in _refusals(tally):
                self.report_error(error)

        def _limit(self, node: FieldNode, parent: str, definition: GraphQLField) -> int | None:
            given = next((a.value for a in node.arguments or () if a.name.value == "limit"), None)
            if isinstance(given, IntValueNode):  # more digits than any bound has count as over it
                return max(1, int(given.value)) if len(given.value) < 10 else MAX_COST + 1
            if given is not None:  # a variable (or a wrong literal, which another rule reports)
                return maxima.get((parent, node.name.value), UNKNOWN_LIST)
            default = getattr(definition.args.get("limit"), "default_value", None)
            return default if isinstance(default, int) and not isinstance(default, bool) else None

        def _set(self, selections: SelectionSetNode | None, parent: GraphQLNamedType, limit: int | None) -> Tally:
            if selections is None:
                return Tally()
            depth = aliases = repeat = total = 0
            names: Counter[str] = Counter()
            branches = [0]
            for selection in selections.selections:
                if isinstance(selection, FieldNode):
                    tally, same = self._field(selection, parent, limit), True
                    names[(selection.alias or selection.name).value] += 1
                else:
                    assert isinstance(selection, FragmentSpreadNode | InlineFragmentNode)
                    tally, same = self._fragment(selection, parent, limit)
                    names.update(tally.names)
                depth, aliases, repeat = max(depth, tally.depth), aliases + tally.aliases, max(repeat, tally.repeat)
                if same:
                    total += tally.cost
                else:
                    branches.append(tally.cost)
            repeat = max(repeat, *names.values(), 0)
            return Tally(depth, aliases, total + max(branches), names, repeat)

        def _fragment(self, node: FragmentSpreadNode | InlineFragmentNode, parent: GraphQLNamedType,
                      limit: int | None) -> tuple[Tally, bool]:  # fmt: skip
            if isinstance(node, InlineFragmentNode):
                condition, inner, name = node.type_condition, node.selection_set, None
            else:
                name = node.name.value
                fragment = self.context.get_fragment(name)
                if fragment is None or name in self.open:
                    return Tally(), True
                condition, inner = fragment.type_condition, fragment.selection_set
            target = self.context.schema.get_type(condition.name.value) if condition is not None else parent
            if target is None:
                return Tally(), True
            if name is None:
                return self._set(inner, target, limit), target is parent
            key = (name, limit)
            if key not in self.memo:
                self.open.add(name)
                self.memo[key] = self._set(inner, target, limit)
                self.open.discard(name)
            return self.memo[key], target is parent

        def _field(self, node: FieldNode, parent: GraphQLNamedType, limit: int | None) -> Tally:
            aliased = 1 if node.alias is not None else 0
            definition = (
                parent.fields.get(node.name.value)
                if isinstance(parent, GraphQLObjectType | GraphQLInterfaceType)
                else None
            )
            if definition is None:
                return Tally(aliases=aliased, cost=1)
            own = self._limit(node, parent.name, definition)
            limit = own if own is not None else limit
            kind = definition.type.of_type if isinstance(definition.type, GraphQLNonNull) else definition.type
            listed = isinstance(kind, GraphQLList)
            inner = self._set(node.selection_set, get_named_type(definition.type), None if listed else limit)
            size = (limit if limit is not None else UNKNOWN_LIST) if listed else 1
            counted = node.selection_set is not None and not node.name.value.startswith("__")
            return Tally(depth=1 + inner.depth if counted else 0, aliases=aliased + inner.aliases,
                         cost=1 + size * inner.cost, repeat=inner.repeat)  # fmt: skip

    return BudgetRule


def _refusals(tally: Tally) -> Iterator[GraphQLError]:
    if tally.depth > MAX_DEPTH:
        yield limit_error(f"The query nests {tally.depth} fields deep, over the {MAX_DEPTH} allowed.", "depth",
                           MAX_DEPTH)  # fmt: skip
    if tally.aliases > MAX_ALIASES:
        yield limit_error(f"The query has {tally.aliases} aliased fields (fragments expanded), over the "
                           f"{MAX_ALIASES} allowed.", "aliases", MAX_ALIASES)  # fmt: skip
    if tally.repeat > MAX_REPEAT:
        yield limit_error(f"The query asks {tally.repeat} times for one field in one selection set (fragments "
                           f"expanded), over the {MAX_REPEAT} allowed.", "repeat", MAX_REPEAT)  # fmt: skip
    if tally.cost > MAX_COST:
        yield limit_error(f"The query would cost about {tally.cost} (fields x list sizes), over the {MAX_COST} "
                           "allowed; select fewer fields, use smaller limits or follow fewer edges.", "cost",
                           MAX_COST)  # fmt: skip
