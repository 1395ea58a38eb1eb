"""The table proposals live in (`core.dispatch.proposals`), the same on SQLite and PostgreSQL."""

from __future__ import annotations

from typing import LiteralString

__all__ = ["CHANGE_PROPOSAL", "PROPOSALS_TABLE", "PROPOSAL_COLUMNS"]

PROPOSALS_TABLE: tuple[LiteralString, ...] = (
    """CREATE TABLE proposals (
  id text PRIMARY KEY, title text NOT NULL, rationale text NOT NULL, author text NOT NULL, state text NOT NULL,
  base_revision bigint NOT NULL, operations text NOT NULL, bases text NOT NULL, comments text NOT NULL,
  created_at text NOT NULL, updated_at text NOT NULL, reviewer text, merge_revision bigint
)""",
    "CREATE INDEX proposals_state ON proposals (state, id)",
)

PROPOSAL_COLUMNS = ("id, title, rationale, author, state, base_revision, operations, bases, comments, created_at, "
                    "updated_at, reviewer, merge_revision")  # fmt: skip
"""The proposals table's columns, in the order `core.dispatch.proposals` reads them and `dump`/`restore` move them."""

CHANGE_PROPOSAL: LiteralString = "ALTER TABLE changes ADD COLUMN proposal text"
"""The change log's link to proposals: the id of the proposal whose merge wrote an entry (null for every other
entry, and for every entry logged before this column), the same statement on both backends."""
