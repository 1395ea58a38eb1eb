"""Who is calling: the principal every call carries, from day one, on every surface.

Authorisation decides on principals in one place (a later change); until then every principal may read.
Self-reported client information is never identity: a principal comes from the transport (a verified token on
HTTP, the configured local principal on stdio).
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["ANONYMOUS", "LOCAL", "Principal"]


@dataclass(frozen=True)
class Principal:
    name: str
    roles: frozenset[str] = field(default_factory=frozenset[str])
    groups: frozenset[str] = field(default_factory=frozenset[str])

    def __str__(self) -> str:
        return self.name


LOCAL = Principal("local", frozenset({"admin"}))
ANONYMOUS = Principal("anonymous", frozenset({"reader"}))
