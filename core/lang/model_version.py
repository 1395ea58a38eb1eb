"""Model versions: a store's model moves forward only.

A model's `x-canon-model.version` is a semantic version (`MAJOR.MINOR.PATCH`). A store adopts a different model
document only if it is a different model (another `$id`) or a strictly higher version of the same one, so two
different documents never share a version and no process with an older model file can downgrade a store.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from core.lang.model import Model
from core.values.errors import ModelError, Problem

__all__ = ["check_successor", "semver"]


def semver(version: str) -> tuple[int, int, int]:
    """`"1.10.0"` as `(1, 10, 0)`, for ordering (the meta-schema guarantees the form)."""
    major, minor, patch = version.split(".")
    return int(major), int(minor), int(patch)


def check_successor(previous: Mapping[str, Any], model: Model) -> None:
    """Refuse `model` in place of the recorded model document `previous` unless its version is higher."""
    if previous.get("$id") != model.id:
        return
    before = str(previous["x-canon-model"]["version"])
    if semver(model.version) > semver(before):
        return
    relation = "the same version as" if model.version == before else "an older version than"
    raise ModelError(
        f"The model {model.source} ({model.name} {model.version}) differs from the store's, but is {relation} "
        f"it ({before}); give a changed model a higher version. Nothing was changed.",
        [Problem("/x-canon-model/version", f"must be higher than {before}", file=model.source)],
    )
