"""Bearer tokens: who an HTTP caller is.

`canon token create NAME --role ROLE` makes a random token, prints it once and keeps only its SHA-256 in the
token file (`[auth] tokens` in canon.toml, default `canon-tokens.json`). A token is 32 random bytes, so a
plain hash is as strong as the token; no slow hash is needed, and verifying costs one dictionary lookup.

`TokenFile.verify` re-reads the file whenever it changed (one `stat` per request), so `canon token revoke`
takes effect on the running server's next request, in every process. The file is replaced atomically and
is readable by its owner only. Token values are never logged, audited or stored.

A token may expire (`canon token create --expires-in 90d`): from its `expires_at` on it is refused like a revoked
one. Tokens from an identity provider are the other way in (`core.http.oauth`).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import tempfile
import threading
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from core.ops.config import Config
from core.values.dialect import ecma_regex
from core.values.errors import ConfigError, NotFoundError, Problem, ValidationError
from core.values.principal import ANONYMOUS, ROLES, Principal

__all__ = ["TOKEN_PREFIX", "TokenEntry", "TokenFile", "token_file"]

TOKEN_PREFIX = "canon_"  # makes a leaked token easy to recognise for secret scanners
NAME_RE = ecma_regex(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,127}$")
FORMAT = 1
RESERVED = frozenset({ANONYMOUS.name})


@dataclass(frozen=True)
class TokenEntry:
    name: str
    role: str
    groups: tuple[str, ...]
    sha256: str
    created_at: str
    expires_at: str | None = None  # RFC 3339, UTC; None: never

    def principal(self) -> Principal:
        return Principal(self.name, frozenset({self.role}), frozenset(self.groups))


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class TokenFile:
    """The token file at `path` (it need not exist: then there are no tokens). Names starting with
    `reserved_prefix` belong to an OAuth issuer's principals (`[oauth] name_prefix`): no token is made for one."""

    def __init__(self, path: Path, reserved_prefix: str | None = None) -> None:
        self.path = path
        self.reserved_prefix = reserved_prefix
        self._lock = threading.Lock()
        self._seen: tuple[int, int, int] | None = None  # (inode, size, mtime_ns) of the loaded file
        self._by_hash: dict[str, tuple[TokenEntry, float | None]] = {}  # sha256 -> entry, expiry (epoch seconds)

    # -- verifying ---------------------------------------------------------------------------------------------
    def verify(self, token: str) -> Principal | None:
        """The principal a presented token stands for, or None if it is not a current token (unknown, revoked or
        expired)."""
        with self._lock:
            self._refresh()
            digest = _digest(token)
            for known, (entry, expires) in self._by_hash.items():
                if hmac.compare_digest(known, digest):
                    return entry.principal() if expires is None or time.time() < expires else None
        return None

    def any(self) -> bool:
        """Whether the file holds any token (current or not): whether canon's own tokens are in use."""
        with self._lock:
            self._refresh()
            return bool(self._by_hash)

    def _refresh(self) -> None:
        try:
            info = os.stat(self.path)
        except FileNotFoundError:
            self._seen, self._by_hash = None, {}
            return
        stamp = (info.st_ino, info.st_size, info.st_mtime_ns)
        if stamp != self._seen:
            self._by_hash = {e.sha256: (e, _epoch(e.expires_at)) for e in self.entries()}
            self._seen = stamp

    # -- managing ----------------------------------------------------------------------------------------------
    def entries(self) -> list[TokenEntry]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise ConfigError(
                f"Cannot read the token file {self.path}: {exc.strerror}.", source=str(self.path)
            ) from exc
        try:
            data: Any = json.loads(text)
            return [
                TokenEntry(
                    t["name"], t["role"], tuple(t.get("groups", ())), t["sha256"], t["created_at"], t.get("expires_at")
                )
                for t in data["tokens"]
            ]
        except (ValueError, KeyError, TypeError) as exc:
            message = f"The token file {self.path} is damaged ({exc!r}); restore it or make it anew."
            raise ConfigError(message, source=str(self.path)) from exc

    def create(self, name: str, role: str, groups: Iterable[str] = (), expires_in: timedelta | None = None) -> str:
        """Add a token for `name` and return its value: the only time the value exists outside the caller. With
        `expires_in`, the token is refused from that long after now on."""
        given = list(groups)
        problems: list[Problem] = []
        if not NAME_RE.match(name):
            problems.append(Problem("/name", f"{name!r} is not a name (letters, digits, . _ @ -; at most 128)"))
        elif name in RESERVED:
            problems.append(Problem("/name", f"{name!r} is reserved: it names the caller without a token"))
        elif self.reserved_prefix and name.startswith(self.reserved_prefix):
            problems.append(
                Problem(
                    "/name",
                    f"{name!r} starts with {self.reserved_prefix!r}, the prefix of the OAuth "
                    "issuer's principals ([oauth] name_prefix); choose another name",
                )
            )
        if role not in ROLES:
            problems.append(Problem("/role", f"{role!r} is not a role; choose one of {', '.join(ROLES)}"))
        problems += [Problem(f"/groups/{i}", f"{g!r} is not a group name") for i, g in enumerate(given)
                     if not NAME_RE.match(g)]  # fmt: skip
        groups = tuple(sorted(set(given)))
        entries = self.entries()
        if any(e.name == name for e in entries):
            problems.append(Problem("/name", f"a token named {name!r} exists; revoke it first to replace it"))
        if expires_in is not None and expires_in <= timedelta(0):
            problems.append(Problem("/expires_in", f"{expires_in} is not a time to come; give a positive duration"))
        if problems:
            raise ValidationError(f"Cannot create the token {name!r}.", problems)
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        now = datetime.now(UTC)
        expires = None if expires_in is None else _stamp(now + expires_in)
        self._save([*entries, TokenEntry(name, role, groups, _digest(token), _stamp(now), expires)])
        return token

    def revoke(self, name: str) -> None:
        entries = self.entries()
        kept = [e for e in entries if e.name != name]
        if len(kept) == len(entries):
            raise NotFoundError("token", name)
        self._save(kept)

    def _save(self, entries: list[TokenEntry]) -> None:
        data = {"format": FORMAT, "tokens": [_record(e) for e in entries]}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, temp = tempfile.mkstemp(prefix=f".{self.path.name}.", dir=self.path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump(data, out, indent=2)
                out.write("\n")
                out.flush()
                os.fsync(out.fileno())
            os.chmod(temp, 0o600)
            os.replace(temp, self.path)
        except BaseException:
            Path(temp).unlink(missing_ok=True)
            raise


def token_file(config: Config) -> TokenFile:
    """The token file `config` names, its names kept apart from those of the configured OAuth issuer, if any."""
    return TokenFile(config.tokens, None if config.oauth is None else config.oauth.name_prefix)


def _record(entry: TokenEntry) -> dict[str, Any]:
    """A token file entry (`expires_at` only when the token expires, so files without expiry stay as they were)."""
    record = asdict(entry) | {"groups": list(entry.groups)}
    if entry.expires_at is None:
        del record["expires_at"]
    return record


def _stamp(moment: datetime) -> str:
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


def _epoch(stamp: str | None) -> float | None:
    return None if stamp is None else datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
