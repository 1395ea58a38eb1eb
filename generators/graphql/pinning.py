"""One revision for a whole GraphQL query: the `at` or `as_of` its root fields give (or the `proposal` it reads at).

A query that reads the past names the revision on a root field (`get_node(id: ..., at: 12)`). Everything that
query reads is then read at that revision: the other root fields that take `at`, and the edge fields under any of
them (`members`, `owns`, ...), which are get_neighbors calls of their own. Without this, an edge field under a
past read walked the current graph: a node deleted since had no edges, and one changed since showed today's.

The pin is read from the operation's root fields (through fragments, literals and variables) once per request, so
it does not depend on the order strawberry resolves fields in. Root fields that give different values are an
`invalid_arguments` error naming both; a query that gives none reads the current graph, as before.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import strawberry
from graphql import (
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    GraphQLResolveInfo,
    InlineFragmentNode,
    SelectionSetNode,
    Undefined,
    value_from_ast_untyped,
)

from core.dispatch.registry import PINS
from core.values.errors import InvalidArgumentsError, Problem
from generators.graphql.bounds import canon_error

__all__ = ["pinned"]

_KEY = "canon.pin"  # where a request's pin is kept in strawberry's context
PINNED = (*PINS, "proposal")  # a read at a proposal pins the whole query to it too (core.dispatch.proposal_view)


def pinned(info: strawberry.Info, tool: str) -> dict[str, Any]:
    """The query's pin, `{"at": n}`, `{"as_of": time}`, `{"proposal": id}` or `{}`, for a call of `tool` made while
    resolving it."""
    context = info.context
    if isinstance(context, dict) and _KEY in context:
        found: dict[str, Any] = context[_KEY]
        return found
    given: dict[tuple[str, str], tuple[str, Any]] = {}  # (argument, repr of the value) -> (root field, value)
    # graphql-core's own info: strawberry's does not pass the fragments on
    raw: GraphQLResolveInfo[Any] = info._raw_info  # pyright: ignore[reportPrivateUsage]
    variables = info.variable_values
    for field in _root_fields(raw.operation.selection_set, raw.fragments):
        for argument in field.arguments or ():
            if argument.name.value in PINNED:
                value = value_from_ast_untyped(argument.value, variables)
                if value is not None and value is not Undefined:  # a variable not given is no pin
                    given.setdefault((argument.name.value, repr(value)), (field.name.value, value))
    if len(given) > 1:
        named = [f"{root}({name}: {value!r})" for (name, _), (root, value) in given.items()]
        problem = Problem("/at", f"a query reads at one revision; its root fields give {', '.join(named)}")
        raise canon_error(InvalidArgumentsError(tool, [problem]))
    pin = {name: value for (name, _), (_, value) in given.items()}
    if isinstance(context, dict):
        context[_KEY] = pin
    return pin


def _root_fields(
    selections: SelectionSetNode, fragments: Mapping[str, FragmentDefinitionNode], seen: frozenset[str] = frozenset()
) -> Iterator[FieldNode]:
    for selection in selections.selections:
        if isinstance(selection, FieldNode):
            yield selection
        elif isinstance(selection, InlineFragmentNode):
            yield from _root_fields(selection.selection_set, fragments, seen)
        elif isinstance(selection, FragmentSpreadNode):
            name = selection.name.value
            fragment = fragments.get(name)
            if fragment is not None and name not in seen:  # a cycle is a validation error; never loop on one
                yield from _root_fields(fragment.selection_set, fragments, seen | {name})
