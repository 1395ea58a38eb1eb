"""The bounds of the GraphQL surface (`generators.graphql`), and how its failures are answered.

Bounds, checked before anything runs: depth (`MAX_DEPTH`), aliases (`MAX_ALIASES`), tokens (`MAX_TOKENS`), an
estimated cost (fields x list sizes, `MAX_COST`, see `cost_rule`); and the subscriptions per connection and per
process. Request bodies are bounded by core. `request_extensions()` is the per-request extension list that
applies them, with the parser and validation caches and the masking of unexpected errors.

Failures: a canon error (a refused bound among them) is an answer, `canon_error` gives its GraphQL form with
`extensions.code`; an unexpected one (`unexpected`) is masked in the response and logged with its traceback
(`CanonSchema`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import strawberry
from graphql import (
    FieldNode,
    FragmentSpreadNode,
    GraphQLError,
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
    ValidationRule,
    get_named_type,
)
from strawberry.extensions import (
    AddValidationRules,
    MaskErrors,
    MaxAliasesLimiter,
    MaxTokensLimiter,
    ParserCache,
    QueryDepthLimiter,
    ValidationCache,
)
from strawberry.types import ExecutionContext

from core.dispatch import error_json
from core.errors import CanonError

__all__ = [
    "MAX_ALIASES",
    "MAX_COST",
    "MAX_DEPTH",
    "MAX_SUBSCRIPTIONS",
    "MAX_SUBSCRIPTIONS_PER_CONNECTION",
    "MAX_TOKENS",
    "UNKNOWN_LIST",
    "CanonSchema",
    "canon_error",
    "cost_rule",
    "request_extensions",
    "unexpected",
]

log = logging.getLogger("canon.graphql")

MAX_DEPTH = 10
MAX_ALIASES = 30
MAX_TOKENS = 5_000
MAX_COST = 10_000  # estimated field resolutions: each field counts 1, times the list sizes above it
UNKNOWN_LIST = 10  # the size assumed for a list nothing bounds (e.g. describe_model's node_types)
MAX_SUBSCRIPTIONS_PER_CONNECTION = 20
MAX_SUBSCRIPTIONS = 1_000  # per process (per built app)


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
    """Logs only unexpected failures (with their traceback); canon errors and invalid queries are answers."""

    def process_errors(self, errors: list[GraphQLError], execution_context: ExecutionContext | None = None) -> None:
        for error in errors:
            if unexpected(error):
                log.error("GraphQL field %s failed", error.path, exc_info=error.original_error)


# -- the cost bound ---------------------------------------------------------------------------------------------------
def cost_rule(maxima: Mapping[tuple[str, str], int]) -> type[ValidationRule]:
    """A validation rule estimating a query's work: every field counts 1, and what a list holds counts once per
    item it may hold (its own `limit`, or the nearest enclosing `limit`, else `UNKNOWN_LIST`). A `limit` given
    as a variable counts at its maximum (`maxima`, by (type, field)). Fragments on other types count their
    largest one, not their sum. Queries over `MAX_COST` are refused before anything runs."""

    class CostRule(ValidationRule):
        def enter_operation_definition(self, node: OperationDefinitionNode, *_: Any) -> None:
            schema = self.context.schema
            root = {OperationType.QUERY: schema.query_type, OperationType.MUTATION: schema.mutation_type,
                    OperationType.SUBSCRIPTION: schema.subscription_type}[node.operation]  # fmt: skip
            if root is None:
                return
            cost = self._cost(node.selection_set, root, None, frozenset())
            if cost > MAX_COST:
                message = (f"The query would cost about {cost} (fields x list sizes), over the {MAX_COST} allowed; "
                           "select fewer fields, use smaller limits or follow fewer edges.")  # fmt: skip
                self.report_error(GraphQLError(message, node, extensions={"code": "LIMIT_EXCEEDED", "problems": []}))

        def _limit(self, node: FieldNode, parent: str, field: Any) -> int | None:
            given = next((a.value for a in node.arguments or () if a.name.value == "limit"), None)
            if isinstance(given, IntValueNode):
                return max(1, int(given.value))
            if given is not None:  # a variable (or a wrong literal, which another rule reports)
                return maxima.get((parent, node.name.value), UNKNOWN_LIST)
            arg = field.args.get("limit")
            default = getattr(arg, "default_value", None)
            return default if isinstance(default, int) and not isinstance(default, bool) else None

        def _cost(self, selections: SelectionSetNode | None, parent: GraphQLNamedType, limit: int | None,
                  seen: frozenset[str]) -> int:  # fmt: skip
            if selections is None:
                return 0
            total, branches = 0, [0]
            for selection in selections.selections:
                if isinstance(selection, FieldNode):
                    total += self._field(selection, parent, limit, seen)
                    continue
                if isinstance(selection, FragmentSpreadNode):
                    name = selection.name.value
                    fragment = self.context.get_fragment(name)
                    if fragment is None or name in seen:
                        continue
                    condition, inner, seen = fragment.type_condition, fragment.selection_set, seen | {name}
                else:
                    assert isinstance(selection, InlineFragmentNode)
                    condition, inner = selection.type_condition, selection.selection_set
                target = self.context.schema.get_type(condition.name.value) if condition is not None else parent
                if target is None:
                    continue
                cost = self._cost(inner, target, limit, seen)
                if target is parent:
                    total += cost
                else:
                    branches.append(cost)
            return total + max(branches)

        def _field(self, node: FieldNode, parent: GraphQLNamedType, limit: int | None, seen: frozenset[str]) -> int:
            if not isinstance(parent, GraphQLObjectType | GraphQLInterfaceType):
                return 1
            field = parent.fields.get(node.name.value)
            if field is None:
                return 1
            own = self._limit(node, parent.name, field)
            limit = own if own is not None else limit
            kind = field.type.of_type if isinstance(field.type, GraphQLNonNull) else field.type
            inner = get_named_type(field.type)
            if isinstance(kind, GraphQLList):
                size = limit if limit is not None else UNKNOWN_LIST
                return 1 + size * self._cost(node.selection_set, inner, None, seen)
            return 1 + self._cost(node.selection_set, inner, limit, seen)

    return CostRule


def request_extensions() -> list[Any]:
    """Per-request extension factories. The depth and alias rules are made once, here: those limiters make a new
    rule class per instance, and ValidationCache keys on the rule classes, so one limiter per request would make
    every request miss the cache and validate the whole query again."""
    rules = [*QueryDepthLimiter(max_depth=MAX_DEPTH).validation_rules,
             *MaxAliasesLimiter(max_alias_count=MAX_ALIASES).validation_rules]  # fmt: skip
    return [
        lambda: AddValidationRules(rules),
        lambda: MaxTokensLimiter(max_token_count=MAX_TOKENS),
        lambda: MaskErrors(should_mask_error=unexpected, error_message="Unexpected error; it has been logged."),
        ParserCache,
        ValidationCache,
    ]
