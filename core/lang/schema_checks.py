"""Checks remembered between starts: a schema or model that passed its check once is not checked again.

Every start checks the model file against the model meta-schema (`core.lang.model.check_model`) and every tool's input
and output schema against the JSON Schema 2020-12 meta-schema (`core.dispatch.registry.build_registry`), so that a
broken
definition fails at start-up and never at call time. Those documents are the same from one start to the next, and
checking them was about a third of a stdio start's CPU time (docs/benchmarks.md, "Start-up of the stdio server").
A passed check leaves an empty marker file in a cache folder, named by a digest of everything that decided it:
what was checked (its kind and canonical JSON) and the checker (canon's dialect, model, model_limits and records
modules, the model meta-schema, the versions of `jsonschema` and its meta-schemas). A changed model, tool
definition, checker or `jsonschema` gives another name, so that document is checked again; a failed check leaves
nothing. The folder is only a cache: emptied, it costs one slow start; unwritable, every start checks everything,
as without one. A check that moves out of those modules must join that list, or a document that passed the old
checker would not meet the new check.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable, Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

from core.lang import model, model_limits
from core.values import dialect, records
from core.values.dialect import check_schema

__all__ = ["SchemaChecks", "check_digest"]

FOLDER = "schema-checks"


@functools.cache
def _checker_digest() -> bytes:
    """What besides the document decides a check: canon's checking code, the model meta-schema, and the versions of
    the jsonschema packages."""
    parts = [Path(module.__file__ or "").read_bytes() for module in (dialect, model, model_limits, records)]
    parts.append(model.meta_schema_path().read_bytes())
    parts += [metadata.version(name).encode() for name in ("jsonschema", "jsonschema-specifications")]
    return hashlib.sha256(b"\0".join(parts)).digest()


def check_digest(kind: str, document: Any) -> str:
    """The name of a passed check of `document` as a `kind`: sha256 of the checker's digest, the kind and the
    document's canonical JSON."""
    text = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(b"\0".join((_checker_digest(), kind.encode(), text.encode()))).hexdigest()


class SchemaChecks:
    """Checks that remember the passed ones in `folder` (`<folder>/schema-checks/<digest>`). Without a folder, a
    document is checked once per process (`canon model diff` builds two registries, the tests hundreds)."""

    def __init__(self, folder: Path | None = None, *, check_time: Callable[[], None] | None = None) -> None:
        """`check_time`: called before each check that really runs (a call's deadline, for a registry built
        while planning a model change: what it raises stops the build)."""
        self.folder = None if folder is None else folder / FOLDER
        self.checked = 0  # documents this object really checked (the others had passed before)
        self._check_time = check_time

    def once(self, kind: str, document: Any, check: Callable[[], None]) -> None:
        """Run `check` (which raises if `document` fails as a `kind`), unless `document` passed it before."""
        if self.folder is None:
            self._once_here(kind, document, check)
            return
        marker = self._marker(kind, document)
        if marker is not None and marker.is_file():
            return
        self._in_time()
        check()
        self.checked += 1
        if marker is not None:
            try:
                marker.parent.mkdir(parents=True, exist_ok=True)
                marker.touch()
            except OSError:  # a cache that cannot be written: the next start checks again, nothing worse
                pass

    def _once_here(self, kind: str, document: Any, check: Callable[[], None]) -> None:
        def timed() -> None:
            self._in_time()
            check()

        if model.once_here(kind, document, timed):
            self.checked += 1

    def _in_time(self) -> None:
        if self._check_time is not None:
            self._check_time()

    def _marker(self, kind: str, document: Any) -> Path | None:
        assert self.folder is not None
        try:
            return self.folder / check_digest(kind, document)
        except (TypeError, ValueError):  # no JSON document (a YAML key that is no string): checked, not remembered
            return None

    def check(self, schema: Mapping[str, Any]) -> None:
        """Raise `jsonschema.SchemaError` if `schema` is no JSON Schema 2020-12 document, unless it passed before."""
        self.once("schema", schema, lambda: check_schema(schema))
