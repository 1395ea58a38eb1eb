"""Import and export: byte-stable round trips, all-or-nothing imports, and problems located by file and line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from core.app.synthetic import write_synthetic
from core.lang.model import Model, default_seed_path
from core.store import StoreStats
from core.store.interchange import export_graph, import_path
from core.store.sqlite import SQLiteStore
from core.values.errors import ImportFileError, Problem

TEAM = {"slug": "payments", "name": "Payments", "mission": "Move money.", "area": "product"}
ADA = {"email": "ada@northwind.test", "name": "Ada", "handle": "ada", "title": "Engineer", "role": "engineer"}
BOB = {"email": "bob@northwind.test", "name": "Bob", "handle": "bob", "title": "Engineer", "role": "engineer"}


@pytest.fixture
def empty_store(tmp_path: Path, model: Model) -> Iterator[SQLiteStore]:
    """A second empty store, to import into."""
    opened = SQLiteStore.open(tmp_path / "copy.db", model)
    yield opened
    opened.close()


def snapshot(store: SQLiteStore) -> tuple[int, StoreStats]:
    return store.revision(), store.stats()


def write_json(path: Path, document: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=1), encoding="utf-8")
    return path


def write_jsonl(path: Path, lines: list[Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))
    return path


def located(problems: tuple[Problem, ...]) -> set[tuple[str | None, int | None, str]]:
    return {(Path(p.file).name if p.file else None, p.line, p.pointer) for p in problems}


# -- round trips ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("suffix", [".json", ".jsonl", ".yaml"])
def test_export_import_export_is_byte_identical(
    seeded_store: SQLiteStore, empty_store: SQLiteStore, tmp_path: Path, suffix: str
) -> None:
    first, second = tmp_path / f"first{suffix}", tmp_path / f"second{suffix}"
    counts = export_graph(seeded_store, first)
    report = import_path(empty_store, first, principal="test:copy")
    assert export_graph(empty_store, second) == counts
    assert first.read_bytes() == second.read_bytes()
    stats = seeded_store.stats()
    assert counts == (stats.nodes, stats.edges) == (report.nodes, report.edges)
    assert empty_store.stats().nodes_by_type == stats.nodes_by_type


def test_export_keeps_timestamps_and_authors_but_not_revisions(seeded_store: SQLiteStore, tmp_path: Path) -> None:
    path = tmp_path / "graph.json"
    export_graph(seeded_store, path)
    document = json.loads(path.read_text(encoding="utf-8"))
    first = document["nodes"][0]
    assert list(first)[:3] == ["id", "type", "visibility"]
    assert "revision" not in first
    assert first["updated_by"] == "test:seed"
    assert all("revision" not in e for e in document["edges"])


def test_export_writes_jsonl_records_with_their_kind(seeded_store: SQLiteStore, tmp_path: Path) -> None:
    path = tmp_path / "graph.jsonl"
    nodes, edges = export_graph(seeded_store, path)
    kinds = [json.loads(line)["kind"] for line in path.read_text(encoding="utf-8").splitlines()]
    assert kinds == ["node"] * nodes + ["edge"] * edges


# -- bad imports ---------------------------------------------------------------------------------------------------
def bad_directory(root: Path) -> Path:
    """Two files, five problems: two found while reading each file, three only against the model and the graph."""
    write_json(
        root / "a.json",
        {
            "nodes": [
                {"id": "team-payments", "type": "Team", "properties": TEAM},
                {"id": "person-ada", "type": "Person", "properties": {**ADA, "email": "not-an-email"}},
                {"id": "person-bob", "type": "Person", "colour": "blue", "properties": BOB},
            ]
        },
    )
    write_jsonl(
        root / "b.jsonl",
        [
            {"kind": "node", "id": "person-cy", "type": "Person", "properties": {**ADA, "email": "cy@northwind.test"}},
            '{"kind": "node", "id": "broken", ',
            {"kind": "edge", "type": "member_of", "source": "team-payments", "target": "team-nowhere"},
            {"kind": "node", "id": "team-payments", "type": "Team", "properties": TEAM},
        ],
    )
    return root


def test_a_bad_import_lists_every_problem_with_its_file_and_location(seeded_store: SQLiteStore, tmp_path: Path) -> None:
    directory = bad_directory(tmp_path / "in")
    before = snapshot(seeded_store)
    with pytest.raises(ImportFileError) as caught:
        import_path(seeded_store, directory, principal="test")
    problems = located(caught.value.problems)
    assert ("a.json", None, "/nodes/1/properties/email") in problems  # invalid property
    assert ("a.json", None, "/nodes/2/colour") in problems  # unknown field
    assert ("b.jsonl", 2, "") in problems  # malformed line
    assert ("b.jsonl", 3, "/target") in problems  # edge to a missing node
    assert ("b.jsonl", 4, "") in problems  # duplicate node id
    assert snapshot(seeded_store) == before
    assert seeded_store.node("person-cy") is None


def test_import_problems_are_listed_in_file_order_whatever_found_them(
    seeded_store: SQLiteStore, tmp_path: Path
) -> None:
    with pytest.raises(ImportFileError) as caught:
        import_path(seeded_store, bad_directory(tmp_path / "in"), principal="test")
    assert [(Path(p.file or "").name, p.line, p.pointer) for p in caught.value.problems] == [
        ("a.json", None, "/nodes/1/properties/email"),  # against the model
        ("a.json", None, "/nodes/2/colour"),  # while reading
        ("b.jsonl", 2, ""),  # a syntax error
        ("b.jsonl", 3, "/source"),  # against the graph: member_of leaves a Person
        ("b.jsonl", 3, "/target"),
        ("b.jsonl", 3, "/properties"),
        ("b.jsonl", 4, ""),  # a duplicate
    ]


def test_a_jsonl_line_cut_short_is_faulted_just_past_its_last_character(store: SQLiteStore, tmp_path: Path) -> None:
    whole = json.dumps({"kind": "node", "id": "person-bob", "type": "Person", "properties": BOB})
    cut = whole[: whole.index('"title"')]  # ends after a comma: the next member is missing
    path = write_jsonl(tmp_path / "cut.jsonl", [{"kind": "node", "id": "team-payments", "type": "Team",
                                                 "properties": TEAM}, cut])  # fmt: skip
    with pytest.raises(ImportFileError) as caught:
        import_path(store, path, principal="test")
    (problem,) = caught.value.problems
    assert (problem.line, problem.pointer) == (2, "")
    assert f"(column {len(cut) + 1})" in problem.message


def test_an_imported_value_of_the_wrong_format_is_refused(store: SQLiteStore, tmp_path: Path) -> None:
    service = {"name": "quasar", "description": "Q.", "lifecycle": "production", "tier": 2,
               "repository": "https://exa mple.org/quasar"}  # fmt: skip
    path = write_json(tmp_path / "in.json", {"nodes": [{"id": "svc-quasar", "type": "Service", "properties": service}]})
    with pytest.raises(ImportFileError) as caught:
        import_path(store, path, principal="test")
    assert located(caught.value.problems) == {("in.json", None, "/nodes/0/properties/repository")}


def test_an_imported_id_with_a_trailing_newline_is_refused(store: SQLiteStore, tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "in.jsonl", [{"kind": "node", "id": "team-x\n", "type": "Team", "properties": TEAM}])
    before = snapshot(store)
    with pytest.raises(ImportFileError) as caught:
        import_path(store, path, principal="test")
    assert located(caught.value.problems) == {("in.jsonl", 1, "/id")}
    assert snapshot(store) == before


def test_problems_found_while_reading_are_listed_for_every_file(store: SQLiteStore, tmp_path: Path) -> None:
    directory = bad_directory(tmp_path / "in")
    before = snapshot(store)
    with pytest.raises(ImportFileError) as caught:
        import_path(store, directory, principal="test")
    assert {
        ("a.json", None, "/nodes/2/colour"),
        ("b.jsonl", 2, ""),
        ("b.jsonl", 4, ""),
    } <= located(caught.value.problems)
    assert snapshot(store) == before


def test_problems_found_against_the_model_are_located_in_every_file(store: SQLiteStore, tmp_path: Path) -> None:
    directory = tmp_path / "in"
    write_json(
        directory / "a.json",
        {
            "nodes": [
                {"id": "team-payments", "type": "Team", "properties": TEAM},
                {"id": "person-ada", "type": "Person", "properties": {**ADA, "email": "not-an-email"}},
            ],
            "edges": [{"type": "owns", "source": "team-payments", "target": "person-ada"}],
        },
    )
    write_jsonl(
        directory / "b.jsonl",
        [
            {"kind": "node", "id": "person-bob", "type": "Person", "properties": BOB},
            {"kind": "edge", "type": "member_of", "source": "person-bob", "target": "team-nowhere", "properties": {}},
        ],
    )
    before = snapshot(store)
    with pytest.raises(ImportFileError) as caught:
        import_path(store, directory, principal="test")
    assert located(caught.value.problems) == {
        ("a.json", None, "/nodes/1/properties/email"),
        ("a.json", None, "/edges/0/target"),  # owns cannot end at a Person (and person-ada was refused)
        ("b.jsonl", 2, "/target"),
        ("b.jsonl", 2, "/properties"),  # member_of requires a role
    }
    assert snapshot(store) == before


def test_invalid_json_in_an_import_file_names_the_file_and_line(store: SQLiteStore, tmp_path: Path) -> None:
    path = tmp_path / "graph.json"
    path.write_text('{\n "nodes": [\n  {"id": "x",}\n ]\n}\n', encoding="utf-8")
    with pytest.raises(ImportFileError) as caught:
        import_path(store, path, principal="test")
    assert located(caught.value.problems) == {("graph.json", 3, "")}


def test_nan_in_an_import_line_is_a_problem_at_its_line_and_column(store: SQLiteStore, tmp_path: Path) -> None:
    team = json.dumps({"kind": "node", "id": "team-x", "type": "Team", "properties": TEAM})
    other = team.replace("team-x", "team-y").replace('"payments"', '"other"').replace('"Payments"', "NaN")
    path = write_jsonl(tmp_path / "graph.jsonl", [team, other])
    with pytest.raises(ImportFileError) as caught:
        import_path(store, path, principal="test")

    [problem] = caught.value.problems
    assert (problem.line, problem.pointer) == (2, "")
    assert "NaN" in problem.message
    assert f"column {other.index('NaN') + 1}" in problem.message


@pytest.mark.parametrize(
    ("suffix", "text", "at"),
    [
        (".yaml", "nodes:\n- {id: team-x, type: Team, properties: {name: .nan}}\n", "/nodes/0/properties/name"),
        (".yaml", "nodes:\n- {id: team-x, type: Team, properties: {name: 36893488147419103232}}\n",
         "/nodes/0/properties/name"),
        (".json", '{"nodes": [{"id": "team-x", "type": "Team", "updated_by": "\\udc00"}]}', "/nodes/0/updated_by"),
        (".jsonl", '{"kind": "node", "id": "team-x", "type": "Team", "properties": {"n": -1e999}}', "/properties/n"),
    ],
    ids=["yaml-nan", "yaml-2**65", "json-surrogate", "jsonl-overflowing-float"],
)  # fmt: skip
def test_a_value_canon_cannot_hold_is_an_import_problem_at_its_pointer(
    store: SQLiteStore, tmp_path: Path, suffix: str, text: str, at: str
) -> None:
    path = tmp_path / f"graph{suffix}"
    path.write_text(text, encoding="utf-8")
    before = snapshot(store)
    with pytest.raises(ImportFileError) as caught:
        import_path(store, path, principal="test")

    assert [p.pointer for p in caught.value.problems] == [at]
    assert snapshot(store) == before


def test_an_import_document_must_hold_only_nodes_and_edges(store: SQLiteStore, tmp_path: Path) -> None:
    path = write_json(tmp_path / "graph.json", {"nodes": [], "vertices": []})
    with pytest.raises(ImportFileError) as caught:
        import_path(store, path, principal="test")
    assert located(caught.value.problems) == {("graph.json", None, "")}


def test_a_jsonl_record_without_a_kind_is_refused(store: SQLiteStore, tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "graph.jsonl", [{"id": "team-payments", "type": "Team", "properties": TEAM}])
    with pytest.raises(ImportFileError) as caught:
        import_path(store, path, principal="test")
    assert located(caught.value.problems) == {("graph.jsonl", 1, "/kind")}


def test_an_unknown_file_suffix_is_an_import_error(store: SQLiteStore, tmp_path: Path) -> None:
    path = tmp_path / "graph.csv"
    path.write_text("id,type\n", encoding="utf-8")
    with pytest.raises(ImportFileError) as caught:
        import_path(store, path, principal="test")
    assert [p.file for p in caught.value.problems] == [str(path)]


def test_a_missing_path_is_an_import_error(store: SQLiteStore, tmp_path: Path) -> None:
    path = tmp_path / "absent.json"
    with pytest.raises(ImportFileError) as caught:
        import_path(store, path, principal="test")
    assert [p.file for p in caught.value.problems] == [str(path)]


def test_a_directory_without_importable_files_is_an_import_error(store: SQLiteStore, tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("nothing here", encoding="utf-8")
    with pytest.raises(ImportFileError) as caught:
        import_path(store, tmp_path, principal="test")
    assert [p.file for p in caught.value.problems] == [str(tmp_path)]


# -- good imports --------------------------------------------------------------------------------------------------
def test_an_edge_may_reference_a_node_in_another_file_of_the_directory(store: SQLiteStore, tmp_path: Path) -> None:
    directory = tmp_path / "in"
    # the edges file sorts first: nodes from every file are applied before any edge
    write_jsonl(
        directory / "a-edges.jsonl",
        [{"kind": "edge", "type": "member_of", "source": "person-ada", "target": "team-payments",
          "properties": {"role": "lead"}}],
    )  # fmt: skip
    write_json(directory / "b" / "people.json", {"nodes": [{"id": "person-ada", "type": "Person", "properties": ADA}]})
    (directory / "c-teams.yaml").write_text(
        "nodes:\n  - id: team-payments\n    type: Team\n    properties:\n"
        + "".join(f"      {k}: {v}\n" for k, v in TEAM.items()),
        encoding="utf-8",
    )
    report = import_path(store, directory, principal="test")
    assert (report.files, report.nodes, report.edges) == (3, 2, 1)
    member = store.edge("member_of", "person-ada", "team-payments")
    assert member is not None
    assert member.properties == {"role": "lead"}


def test_a_yaml_unquoted_date_imports_as_a_string(store: SQLiteStore, tmp_path: Path) -> None:
    path = tmp_path / "people.yaml"
    path.write_text(
        "nodes:\n  - id: person-ada\n    type: Person\n    properties:\n"
        + "".join(f"      {k}: {v}\n" for k, v in ADA.items())
        + "      start_date: 2024-01-05\n",
        encoding="utf-8",
    )
    import_path(store, path, principal="test")
    node = store.node("person-ada")
    assert node is not None
    assert node.properties["start_date"] == "2024-01-05"


def test_dry_run_reports_counts_and_writes_nothing(store: SQLiteStore) -> None:
    before = snapshot(store)
    report = import_path(store, default_seed_path(), principal="test", dry_run=True)
    assert (report.revision, report.changed) == (None, 0)
    assert report.files == 1
    assert report.nodes > 300
    assert report.edges > 1000
    assert snapshot(store) == before


def test_dry_run_still_reports_problems(store: SQLiteStore, tmp_path: Path) -> None:
    path = write_json(tmp_path / "g.json", {"nodes": [{"id": "person-ada", "type": "Persn", "properties": ADA}]})
    with pytest.raises(ImportFileError) as caught:
        import_path(store, path, principal="test", dry_run=True)
    assert located(caught.value.problems) == {("g.json", None, "/nodes/0/type")}


def test_import_report_counts_files_nodes_edges_and_changes(store: SQLiteStore, tmp_path: Path) -> None:
    path = write_json(
        tmp_path / "g.json",
        {
            "nodes": [
                {"id": "team-payments", "type": "Team", "visibility": "public", "properties": TEAM},
                {"id": "person-ada", "type": "Person", "properties": ADA},
                {"id": "person-bob", "type": "Person", "properties": BOB},
            ],
            "edges": [
                {
                    "type": "member_of",
                    "source": "person-ada",
                    "target": "team-payments",
                    "properties": {"role": "lead"},
                },
                {"type": "reports_to", "source": "person-bob", "target": "person-ada"},
            ],
        },
    )
    start = store.revision()
    report = import_path(store, path, principal="importer")
    assert (report.files, report.nodes, report.edges) == (1, 3, 2)
    assert report.changed == 5
    assert report.revision == start + 5 == store.revision()
    assert {c.principal for c in store.changes(start, 100)} == {"importer"}
    assert store.stats().nodes_by_type == {"Person": 2, "Team": 1}
    team = store.node("team-payments")
    assert team is not None
    assert team.visibility == "public"


def test_importing_the_same_file_twice_changes_nothing_the_second_time(store: SQLiteStore) -> None:
    first = import_path(store, default_seed_path(), principal="test")
    revision = store.revision()
    second = import_path(store, default_seed_path(), principal="test")
    assert first.changed == first.nodes + first.edges
    assert second.changed == 0
    assert second.revision == revision == store.revision()
    assert (second.nodes, second.edges) == (first.nodes, first.edges)


def test_reimporting_an_export_preserves_timestamps_and_authors(
    seeded_store: SQLiteStore, empty_store: SQLiteStore, tmp_path: Path
) -> None:
    path = tmp_path / "graph.jsonl"
    export_graph(seeded_store, path)
    import_path(empty_store, path, principal="someone-else")
    original = seeded_store.node("team-payments")
    copied = empty_store.node("team-payments")
    assert original is not None
    assert copied is not None
    assert (copied.created_at, copied.updated_at, copied.updated_by) == (
        original.created_at,
        original.updated_at,
        original.updated_by,
    )


@pytest.mark.parametrize("suffix", [".jsonl", ".json"])
def test_import_progress_counts_each_record_once_of_as_many_as_the_files_hold(
    store: SQLiteStore, tmp_path: Path, suffix: str
) -> None:
    nodes, edges = write_synthetic(tmp_path / f"graph{suffix}", 700)  # records in two passes, batches of 1,000
    reported: list[tuple[str, int, int]] = []

    report = import_path(store, tmp_path / f"graph{suffix}", principal="test", batch=1_000,
                         progress=lambda phase, done, total: reported.append((phase, done, total)))  # fmt: skip

    assert (report.nodes, report.edges) == (nodes, edges)
    assert {phase for phase, _, _ in reported} == {"writing"}
    assert {total for _, _, total in reported} == {nodes + edges}
    assert reported[-1][1] == nodes + edges
    done = [d for _, d, _ in reported]
    assert done == sorted(done)
    assert len(reported) >= 3
