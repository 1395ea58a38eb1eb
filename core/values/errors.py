"""The errors canon raises, one small tree.

Every error carries structured fields a surface can map to its wire format, and also inherits the builtin a
caller would naturally catch::

    CanonError
     ├── ConfigError(ValueError)            bad canon.toml or environment value       .source .key
     ├── ModelError(ValueError)             the model document is invalid             .problems
     ├── ValidationError(ValueError)        data does not fit the model               .problems
     │    └── ImportFileError(ValidationError) an import input is unreadable or invalid .problems
     │    └── InvalidArgumentsError         tool arguments do not fit the input schema .tool .problems
     ├── NotFoundError(KeyError)            no such node, edge, type or resource      .kind .key
     │    └── FutureRevisionError           a revision the store has not reached      .revision .current
     ├── UnknownToolError(LookupError)      no tool of that name                      .tool .suggestions
     ├── ConflictError(RuntimeError)        expected revision is stale                .key .expected .actual
     ├── ForbiddenError(PermissionError)    the caller may not call that or see that  .kind .key
     │    └── ReviewRequiredError           a write of a type that waits for review   .types
     ├── LimitExceededError(RuntimeError)   a query went past a bound (work, time)    .limit .value
     ├── GoneError(LookupError)             a change-log cursor older than is kept    .since .oldest
     ├── StoreError(RuntimeError)           the store cannot be opened or migrated    .path
     │    └── StoreUnavailableError         the database server cannot be reached now .path
     └── UnavailableError(RuntimeError)     what answers the call stopped; call again

A :class:`Problem` names *where* (file, JSON pointer, line) and *what* (message). Errors that hold several
problems list all of them, so a user fixes a bad input in one pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "CanonError",
    "ConfigError",
    "ConflictError",
    "ForbiddenError",
    "FutureRevisionError",
    "GoneError",
    "ImportFileError",
    "InvalidArgumentsError",
    "LimitExceededError",
    "ModelError",
    "NotFoundError",
    "Problem",
    "ReviewRequiredError",
    "StoreError",
    "StoreUnavailableError",
    "UnavailableError",
    "UnknownToolError",
    "ValidationError",
]


@dataclass(frozen=True, order=True)
class Problem:
    """One thing wrong with an input: where it is and what is wrong."""

    pointer: str
    message: str
    file: str | None = None
    line: int | None = None

    def __str__(self) -> str:
        where = self.file or ""
        if self.line is not None:
            where += f":{self.line}"
        parts = [part for part in (where, self.pointer) if part]
        return ": ".join([*parts, self.message])

    def as_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"pointer": self.pointer, "message": self.message}
        if self.file is not None:
            out["file"] = self.file
        if self.line is not None:
            out["line"] = self.line
        return out


class CanonError(Exception):
    """Base of every error canon raises on purpose."""

    code = "canon_error"


class ConfigError(CanonError, ValueError):
    """The configuration file or an environment override is invalid."""

    code = "config_error"

    def __init__(self, message: str, *, source: str, key: str | None = None) -> None:
        super().__init__(message)
        self.source = source
        self.key = key


class ModelError(CanonError, ValueError):
    """The model document is not a valid canon model."""

    code = "model_error"

    def __init__(self, message: str, problems: Sequence[Problem]) -> None:
        super().__init__(message)
        self.problems = tuple(problems)


class ValidationError(CanonError, ValueError):
    """Data (a node, an edge or a batch of them) does not fit the model or the graph."""

    code = "invalid"

    def __init__(self, message: str, problems: Sequence[Problem]) -> None:
        super().__init__(message)
        self.problems = tuple(problems)


class ImportFileError(ValidationError):
    """An import input could not be read or parsed, or its records are invalid."""

    code = "import_error"


class NotFoundError(CanonError, KeyError):
    """No node, edge or type exists under the given key."""

    code = "not_found"

    def __init__(self, kind: str, key: str) -> None:
        super().__init__(
            f"No {kind} {key!r}." if kind in ("resource", "resource template") else f"No {kind} with id {key!r}."
        )
        self.kind = kind
        self.key = key

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0])


class FutureRevisionError(NotFoundError):
    """A revision the store has not reached yet (a read of the graph at a revision, `Store.view`)."""

    def __init__(self, *, revision: int, current: int) -> None:
        CanonError.__init__(
            self, f"The store has no revision {revision} yet: it is at revision {current}. Read at {current} or before."
        )
        self.kind = "revision"
        self.key = str(revision)
        self.revision = revision
        self.current = current


class ConflictError(CanonError, RuntimeError):
    """A write named an expected revision that is no longer current."""

    code = "conflict"

    def __init__(self, key: str, *, expected: int, actual: int) -> None:
        state = "does not exist" if actual == 0 else f"is at revision {actual}"
        super().__init__(
            f"{key!r} {state}, not at the expected revision {expected}; read it again and retry with its revision."
        )
        self.key = key
        self.expected = expected
        self.actual = actual


class ForbiddenError(CanonError, PermissionError):
    """The caller's role lacks a tool, or the record's visibility does not include the caller."""

    code = "forbidden"

    def __init__(self, kind: str, key: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind  # "tool", "node", "edge", "resource"
        self.key = key


class ReviewRequiredError(ForbiddenError):
    """A direct write touches a type that needs review (`core.dispatch.review`) by a caller who may not write it
    directly. The write tools answer it with a proposal instead; any other writer hears it as this error."""

    def __init__(self, principal: str, types: Sequence[str]) -> None:
        names = ", ".join(types)
        super().__init__("type", types[0], f"{principal} may not write {names} directly: a change to it is reviewed; "
                         "propose it with propose_changes.")  # fmt: skip
        self.types = tuple(types)


class StoreError(CanonError, RuntimeError):
    """The store cannot be opened, is of an unknown version, or is damaged."""

    code = "store_error"

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(message)
        self.path = path


class StoreUnavailableError(StoreError):
    """The store's database server cannot be reached now (it is restarting, say): try again once it is back."""

    code = "unavailable"


class UnavailableError(CanonError, RuntimeError):
    """The process answering a call (a walk worker, core.dispatch.walkers) stopped before it answered; it is being
    replaced,
    so the same call may be made again."""

    code = "unavailable"


class InvalidArgumentsError(ValidationError):
    """A tool's arguments do not validate against its input schema (or a cursor is not this query's)."""

    code = "invalid_arguments"

    def __init__(self, tool: str, problems: Sequence[Problem]) -> None:
        detail = "; ".join(f"{p.pointer or '/'}: {p.message}" for p in problems[:5])
        super().__init__(f"Invalid arguments for {tool}: {detail}", problems)
        self.tool = tool


class UnknownToolError(CanonError, LookupError):
    """No tool (or resource template) of that name is registered."""

    code = "unknown_tool"

    def __init__(self, tool: str, suggestions: Sequence[str]) -> None:
        hint = f" Did you mean {', '.join(repr(s) for s in suggestions)}?" if suggestions else ""
        super().__init__(f"Unknown tool: {tool!r}.{hint}")
        self.tool = tool
        self.suggestions = tuple(suggestions)


class LimitExceededError(CanonError, RuntimeError):
    """A query went past one of its bounds (work, wall time); narrow it or raise the bound."""

    code = "limit_exceeded"

    def __init__(self, message: str, *, limit: str, value: float) -> None:
        super().__init__(message)
        self.limit = limit
        self.value = value


class GoneError(CanonError, LookupError):
    """A change-log position older than the log keeps (`canon store compact` removed what followed it)."""

    code = "gone"

    def __init__(self, *, since: int, oldest: int, as_of: str | None = None) -> None:
        if as_of is None:
            message = (f"The change log no longer holds the changes after revision {since}: the oldest revision it "
                       f"keeps is {oldest}. Read the current state again (find_nodes, export), then follow changes "
                       "from its revision.")  # fmt: skip
        else:
            message = (f"The change log keeps no revision at or before {as_of}: the oldest revision it keeps is "
                       f"{oldest}. Read as_of a later time, or at {oldest} or later.")  # fmt: skip
        super().__init__(message)
        self.since = since
        self.oldest = oldest
