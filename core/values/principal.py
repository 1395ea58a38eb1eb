"""Who is calling: the principal every call carries, on every surface.

A principal comes from the transport, never from what a client says about itself: a verified bearer token on
HTTP (`core.ops.tokens`), the configured local principal on stdio, and `ANONYMOUS` for an HTTP caller without a
token. What a principal may do is decided in one place, `core.dispatch.access`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["ANONYMOUS", "LOCAL", "ROLES", "Principal", "ReviewPolicy", "Reviewers"]

ROLES: dict[str, frozenset[str]] = {
    "reader": frozenset({"read"}),
    "writer": frozenset({"read", "write"}),
    "admin": frozenset({"read", "write", "admin"}),
}
"""Each role and the tool permissions it grants (a tool definition names the one it needs)."""
_GRANTED: dict[frozenset[str], frozenset[str]] = {}  # a set of roles -> the permissions they grant together


@dataclass(frozen=True)
class Principal:
    name: str
    roles: frozenset[str] = field(default_factory=frozenset[str])
    groups: frozenset[str] = field(default_factory=frozenset[str])
    authenticated: bool = True  # False only for the anonymous HTTP caller: public nodes only

    def __str__(self) -> str:
        return self.name

    @property
    def permissions(self) -> frozenset[str]:
        granted = _GRANTED.get(self.roles)
        if granted is None:
            granted = _GRANTED[self.roles] = frozenset().union(*(ROLES.get(r, frozenset[str]()) for r in self.roles))
        return granted

    @property
    def reader_tags(self) -> tuple[str, ...]:
        """The `readers` entries that name this principal: `user:NAME` and `group:G` for each of its groups."""
        if not self.authenticated:
            return ()
        return (f"user:{self.name}", *(f"group:{g}" for g in sorted(self.groups)))


LOCAL = Principal("local", frozenset({"admin"}))
ANONYMOUS = Principal("anonymous", frozenset({"reader"}), authenticated=False)


@dataclass(frozen=True)
class Reviewers:
    """Who may approve or reject a proposal (`core.dispatch.proposals`): a principal with one of `roles` or in one of
    `groups` (`[proposals] reviewer_roles` and `reviewer_groups` in canon.toml); never the proposal's own author,
    which `core.dispatch.proposals.review` holds whatever this says."""

    roles: frozenset[str] = frozenset({"admin"})
    groups: frozenset[str] = frozenset({"reviewers"})

    def include(self, principal: Principal) -> bool:
        return principal.authenticated and not (self.roles.isdisjoint(principal.roles)
                                                and self.groups.isdisjoint(principal.groups))  # fmt: skip


@dataclass(frozen=True)
class ReviewPolicy:
    """Which writes wait for review (`core.dispatch.review`): those touching a node or edge type of `types`
    (`[proposals] review_types` in canon.toml, besides the types the model marks `"review": "required"`), by one with
    none of `direct_roles` and in none of `direct_groups` (default: only the admin writes them directly)."""

    types: frozenset[str] = frozenset()
    direct_roles: frozenset[str] = frozenset({"admin"})
    direct_groups: frozenset[str] = frozenset()

    def direct(self, principal: Principal) -> bool:
        """Whether `principal` writes the reviewed types directly."""
        return principal.authenticated and not (self.direct_roles.isdisjoint(principal.roles)
                                                and self.direct_groups.isdisjoint(principal.groups))  # fmt: skip
