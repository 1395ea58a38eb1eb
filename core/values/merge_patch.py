"""JSON Merge Patch (RFC 7396): how `patch_node` changes part of a node.

A patch is a JSON value. An object patch changes an object member by member: a member whose value is null
removes that member, any other value replaces it, except that an object value patches the member's object the
same way (recursively). Members the patch does not name are kept. A patch that is not an object replaces the
target whole. So a patch cannot set a member to null or change one element of an array: it replaces the array.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

__all__ = ["merge_patch", "removed_members"]


def merge_patch(target: Any, patch: Any) -> Any:
    """`target` with `patch` applied; neither is changed (the result shares unpatched values with `target`)."""
    if not isinstance(patch, Mapping):
        return patch
    changes = cast("Mapping[str, Any]", patch)
    result: dict[str, Any] = dict(cast("Mapping[str, Any]", target)) if isinstance(target, Mapping) else {}
    for name, value in changes.items():
        if value is None:
            result.pop(name, None)
        else:
            result[name] = merge_patch(result.get(name), value)
    return result


def removed_members(target: Mapping[str, Any], patch: Mapping[str, Any]) -> list[str]:
    """The top-level members of `target` that `patch` removes (in the patch's order)."""
    return [name for name, value in patch.items() if value is None and name in target]
