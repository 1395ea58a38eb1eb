"""The current revision as a `View` (`core.index.current.CurrentView`), the door handlers read through: it answers
as the store's own view of its current revision does, on both backends, and a past view refuses what only the
current revision answers (`core.store.view.current_only`)."""

from __future__ import annotations

import pytest

from core.index.current import CurrentView
from core.index.graph import GraphIndex
from core.store import NodeQuery, Store
from core.values.errors import ForbiddenError, ValidationError
from core.values.operations import PatchNode
from core.values.records import Sight

pytestmark = pytest.mark.both_backends

ANONYMOUS = Sight(frozenset({"public"}))


@pytest.fixture
def current(seeded_store: Store) -> CurrentView:
    return CurrentView(seeded_store, GraphIndex.build(seeded_store))


def _a_team_with_members(store: Store) -> str:
    return next(source if kind == "owns" else target for kind, source, target in store.iter_topology()
                if kind in ("member_of", "owns") and store.node(target if kind == "member_of" else source))  # fmt: skip


def test_the_current_view_reads_what_the_store_s_view_of_now_reads(seeded_store: Store, current: CurrentView) -> None:
    stored = seeded_store.view()
    assert current.revision == stored.revision == seeded_store.revision()
    team = _a_team_with_members(seeded_store)
    assert current.node(team) == stored.node(team)
    assert current.neighbours(team, sight=ANONYMOUS) == stored.neighbours(team, sight=ANONYMOUS)
    assert current.edges_of(team) == stored.edges_of(team)
    assert current.find_nodes("Team", sight=ANONYMOUS, limit=5) == stored.find_nodes("Team", sight=ANONYMOUS, limit=5)
    ids = [n.id for n in seeded_store.iter_nodes()][:20]
    assert current.nodes(ids, sight=ANONYMOUS) == stored.nodes(ids, sight=ANONYMOUS)


def test_the_current_view_follows_a_commit_once_the_index_syncs(seeded_store: Store, current: CurrentView) -> None:
    team = next(seeded_store.iter_nodes("Team"))
    before = current.revision
    seeded_store.commit([PatchNode(team.id, {"name": "Renamed Team"})], principal="test")
    current.index.sync()
    assert current.revision == before + 1
    assert current.node(team.id).properties["name"] == "Renamed Team"  # type: ignore[union-attr]
    with current.walk() as held:
        assert held.revision == current.revision
        assert team.id in held.graph


def test_a_hidden_node_read_with_a_sight_is_forbidden(seeded_store: Store, current: CurrentView) -> None:
    hidden = next(n for n in seeded_store.iter_nodes() if n.visibility != "public")
    with pytest.raises(ForbiddenError):
        current.node(hidden.id, sight=ANONYMOUS)
    assert current.node(hidden.id) == hidden  # no sight: the record as stored, for `CallContext.readable`


def test_a_past_view_refuses_what_only_the_current_revision_answers(seeded_store: Store) -> None:
    past = seeded_store.view(seeded_store.revision() - 1)
    for read in (lambda: past.counts(None), lambda: past.facets(NodeQuery("Team"), ["area"], limit=5),
                 lambda: past.search(past.model, None, [], None, past.revision)):  # fmt: skip
        with pytest.raises(ValidationError) as refused:
            read()
        assert refused.value.problems[0].pointer == "/at"
    assert past.find(NodeQuery("Team"), after=None, limit=5) == past.find_nodes("Team", limit=5)  # by type: answered
    # by conditions and text, and a walk, answered too (issue 27 item 2: tests/core/test_past_finds_and_walks.py)
    assert past.find(NodeQuery("Team", text="a", text_fields={"Team": ("name",)}), after=None, limit=5)[1]
    with past.walk() as held:
        assert held.revision == past.revision
