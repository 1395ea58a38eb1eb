"""The `canon` command line, run as a user runs it: a working directory, exit codes, standard output and error
(`run_canon`: in this process, as a child process would see it, or in a child process; the first test holds the
two to the same answers)."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest

from core.app.synthetic import write_synthetic
from core.lang.model import default_model_path, load_model
from core.ops.config import _KEYS as CONFIG_KEYS  # pyright: ignore[reportPrivateUsage]
from core.ops.config import Config
from tests.conftest import REPO, run_canon
from tests.core.test_model import EIGHT, eight_problems_in_one_type

COMMANDS = ("init", "validate", "import", "export", "stats", "config", "synth")
EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE, EXIT_STORE = 0, 1, 2, 3


@pytest.fixture(scope="module")
def two_ways_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder after `canon init`, with a model file the meta-schema refuses and a compatible change."""
    seeded = tmp_path_factory.mktemp("two-ways")
    assert run_canon("init", cwd=seeded, process=True).returncode == EXIT_OK
    (seeded / "bad.json").write_text('{"$schema": 1}', encoding="utf-8")
    document = json.loads(default_model_path().read_text(encoding="utf-8"))
    document["x-canon-model"]["version"] = "1.1.0"
    document["$defs"]["Team"]["properties"]["budget"] = {"description": "Budget.", "type": "integer"}
    (seeded / "budget.json").write_text(json.dumps(document), encoding="utf-8")
    return seeded


@pytest.mark.parametrize(
    "argv",
    [
        ("--version",),
        ("stats",),
        ("export", "-"),
        ("validate", "bad.json"),
        ("--model", "bad.json", "stats"),
        ("no-such-command",),
        ("stats", "--no-such-option"),
        ("model", "diff", "budget.json"),  # a plan: the slowest command, and the one that caches the most
        ("--store", "missing/canon.db", "stats"),
    ],
    ids=lambda argv: " ".join(argv),
)
def test_a_command_run_in_the_test_process_answers_as_the_same_command_in_a_child_process(
    argv: tuple[str, ...], two_ways_folder: Path, tmp_path: Path
) -> None:
    """The exit status, standard output and standard error, byte for byte, on copies of one seeded folder."""
    seeded = two_ways_folder
    answers = []
    for way in ("child", "here"):
        folder = tmp_path / way
        folder.mkdir()
        for path in seeded.iterdir():
            (folder / path.name).write_bytes(path.read_bytes())
        done = run_canon(*argv, cwd=folder, process=way == "child")
        answers.append((done.returncode, done.stdout.replace(str(folder), "<folder>"),
                        done.stderr.replace(str(folder), "<folder>")))  # fmt: skip

    assert answers[0] == answers[1]
    assert answers[0][1] or answers[0][2]  # each says something


def _description(help_text: str) -> str:
    """The paragraph after the usage line of argparse help: the command's description."""
    paragraphs = [p.strip() for p in help_text.split("\n\n") if p.strip()]
    assert paragraphs[0].startswith("usage: canon")
    return paragraphs[1]


def _stats(cwd: Path, *options: str) -> dict[str, Any]:
    result = run_canon(*options, "stats", cwd=cwd)
    assert result.returncode == EXIT_OK, result.stderr
    stats: dict[str, Any] = json.loads(result.stdout)
    return stats


def _init(cwd: Path) -> dict[str, Any]:
    result = run_canon("init", cwd=cwd)
    assert result.returncode == EXIT_OK, result.stderr
    return _stats(cwd)


def _person_record(n: int) -> dict[str, Any]:
    return {
        "id": f"person-cli-{n}",
        "type": "Person",
        "properties": {
            "email": f"cli{n}@northwind.example",
            "name": f"CLI Person {n}",
            "handle": f"cli-{n}",
            "title": "Engineer",
            "role": "engineer",
        },
    }


# -- help ----------------------------------------------------------------------------------------------------------
def test_help_describes_canon_and_lists_every_command(tmp_path: Path) -> None:
    result = run_canon("--help", cwd=tmp_path)

    assert result.returncode == EXIT_OK
    assert _description(result.stdout)
    for command in COMMANDS:
        assert f"\n    {command} " in result.stdout


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help_with_a_description(tmp_path: Path, command: str) -> None:
    result = run_canon(command, "--help", cwd=tmp_path)

    assert result.returncode == EXIT_OK
    assert result.stdout.startswith(f"usage: canon {command}")
    description = _description(result.stdout)
    assert not description.startswith(("positional arguments", "options"))
    assert list(tmp_path.iterdir()) == []  # asking for help creates no store


# -- init ----------------------------------------------------------------------------------------------------------
def test_init_in_an_empty_directory_creates_a_seeded_store(tmp_path: Path) -> None:
    result = run_canon("init", cwd=tmp_path)

    assert result.returncode == EXIT_OK, result.stderr
    assert (tmp_path / "canon.db").is_file()
    stats = _stats(tmp_path)
    assert stats["nodes"] > 300
    assert stats["edges"] > 0
    assert stats["model"]["name"] == "northwind"


def test_init_again_keeps_the_existing_store(tmp_path: Path) -> None:
    first = _init(tmp_path)

    again = run_canon("init", cwd=tmp_path)

    assert again.returncode == EXIT_OK, again.stderr
    assert _stats(tmp_path) == first


def test_the_deploy_guide_s_setup_creates_an_empty_store_on_the_organisation_s_model(tmp_path: Path) -> None:
    guide = (REPO / "docs" / "operations" / "deploy.md").read_text(encoding="utf-8")
    section = guide.split("## The service\n", 1)[1].split("\n## ", 1)[0]
    (tmp_path / "canon.toml").write_text(section.split("```toml\n", 1)[1].split("```", 1)[0], encoding="utf-8")
    document = json.loads(default_model_path().read_text(encoding="utf-8"))
    document["x-canon-model"]["name"] = "acme"  # an organisation's own model, of the embedded one's types
    (tmp_path / "model.schema.json").write_text(json.dumps(document), encoding="utf-8")

    checked = run_canon("validate", cwd=tmp_path)
    created = run_canon("init", cwd=tmp_path)

    assert checked.returncode == EXIT_OK, checked.stderr
    assert created.returncode == EXIT_OK, created.stderr
    quoted = re.search(r"`(Created canon\.db .*?)`", section, re.DOTALL)
    assert quoted is not None
    assert created.stdout.strip() == " ".join(quoted[1].split())
    assert (_stats(tmp_path)["nodes"], _stats(tmp_path)["edges"]) == (0, 0)


def test_init_on_the_embedded_model_with_seed_false_creates_an_empty_store(tmp_path: Path) -> None:
    (tmp_path / "canon.toml").write_text("[model]\nseed = false\n", encoding="utf-8")

    stats = _init(tmp_path)

    assert (stats["model"]["name"], stats["nodes"], stats["edges"]) == ("northwind", 0, 0)


# -- validate ------------------------------------------------------------------------------------------------------
def test_validate_without_a_file_checks_the_embedded_model(tmp_path: Path) -> None:
    result = run_canon("validate", cwd=tmp_path)

    assert result.returncode == EXIT_OK, result.stderr
    assert str(default_model_path()) in result.stdout
    assert not (tmp_path / "canon.db").exists()


def test_validate_a_bad_model_exits_1_naming_the_file_and_every_pointer(tmp_path: Path) -> None:
    document = json.loads(default_model_path().read_text(encoding="utf-8"))
    document["$defs"]["Person"]["x-canon-node"]["key"] = "nope"
    document["$defs"]["member_of"]["x-canon-edge"]["target"] = ["Nope"]
    document["$defs"]["Team"]["properties"]["slug"]["type"] = "strng"
    (tmp_path / "bad.json").write_text(json.dumps(document), encoding="utf-8")

    result = run_canon("validate", "bad.json", cwd=tmp_path)

    assert result.returncode == EXIT_PROBLEMS
    problem_lines = [line for line in result.stderr.splitlines() if line.startswith("  ")]
    assert len(problem_lines) == 3
    assert all("bad.json" in line for line in problem_lines)
    for pointer in (
        "/$defs/Person/x-canon-node/key",
        "/$defs/member_of/x-canon-edge/target/0",
        "/$defs/Team/properties/slug/type",
    ):
        assert pointer in result.stderr


def test_validate_names_a_ref_cycle_and_where_it_closes(tmp_path: Path) -> None:
    document = json.loads(default_model_path().read_text(encoding="utf-8"))
    document["$defs"]["Team"]["properties"]["parent"] = {"$ref": "#/$defs/Team"}
    (tmp_path / "cyclic.json").write_text(json.dumps(document), encoding="utf-8")

    result = run_canon("validate", "cyclic.json", cwd=tmp_path)

    assert result.returncode == EXIT_PROBLEMS, result.stderr  # a problem, not a RecursionError's traceback
    assert "/$defs/Team/properties/parent/$ref" in result.stderr
    assert "$ref cycle Team.properties.parent -> Team" in result.stderr
    assert "Traceback" not in result.stderr


def test_validate_lists_every_problem_in_one_run_even_under_a_wrong_type_keyword(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text(json.dumps(eight_problems_in_one_type(load_model())), encoding="utf-8")

    result = run_canon("validate", "bad.json", cwd=tmp_path)

    assert result.returncode == EXIT_PROBLEMS
    problem_lines = [line for line in result.stderr.splitlines() if line.startswith("  ")]
    assert len(problem_lines) == len(EIGHT) == 8
    for pointer, words in EIGHT.items():
        assert any(f"{pointer}: " in line and words in line for line in problem_lines), pointer


def test_validate_a_file_that_is_not_json_exits_1_naming_the_line(tmp_path: Path) -> None:
    (tmp_path / "broken.json").write_text('{\n  "$defs": {\n    oops\n}\n', encoding="utf-8")

    result = run_canon("validate", "broken.json", cwd=tmp_path)

    assert result.returncode == EXIT_PROBLEMS
    assert "broken.json:3" in result.stderr


# -- import --------------------------------------------------------------------------------------------------------
def _write_invalid_records(path: Path) -> None:
    person = _person_record(1)
    del person["properties"]["role"]
    edge = {"type": "member_of", "source": "person-cli-1", "target": "team-does-not-exist", "properties": {}}
    path.write_text(json.dumps({"nodes": [_person_record(2), person], "edges": [edge]}), encoding="utf-8")


def _write_unparsable_lines(path: Path) -> None:
    lines = [json.dumps({"kind": "node", **_person_record(1)}), "{not json", json.dumps({"kind": "nope"})]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _write_values_canon_cannot_hold(path: Path) -> None:
    nan = json.dumps({"kind": "node", **_person_record(1)}).replace('"Engineer"', "NaN", 1)
    surrogate = json.dumps({"kind": "node", **_person_record(2)}).replace("person-cli-2", "person-\\ud800")
    path.write_text(nan + "\n" + surrogate + "\n", encoding="utf-8")


@pytest.mark.parametrize(
    ("name", "write"),
    [("invalid.json", _write_invalid_records), ("unparsable.jsonl", _write_unparsable_lines),
     ("unfit.jsonl", _write_values_canon_cannot_hold)],
)  # fmt: skip
def test_import_of_a_bad_file_exits_1_and_writes_nothing(tmp_path: Path, name: str, write: Any) -> None:
    before = _init(tmp_path)
    write(tmp_path / name)

    result = run_canon("import", name, cwd=tmp_path)

    assert result.returncode == EXIT_PROBLEMS
    assert name in result.stderr
    assert "Traceback" not in result.stderr
    assert _stats(tmp_path) == before


def test_import_dry_run_checks_the_file_and_writes_nothing(tmp_path: Path) -> None:
    before = _init(tmp_path)
    (tmp_path / "people.json").write_text(json.dumps({"nodes": [_person_record(1)]}), encoding="utf-8")

    result = run_canon("import", "--dry-run", "people.json", cwd=tmp_path)

    assert result.returncode == EXIT_OK, result.stderr
    assert _stats(tmp_path) == before


def test_import_writes_the_records_of_a_good_file(tmp_path: Path) -> None:
    before = _init(tmp_path)
    edge = {
        "type": "member_of",
        "source": "person-cli-1",
        "target": "team-leadership",
        "properties": {"role": "member"},
    }
    (tmp_path / "people.json").write_text(json.dumps({"nodes": [_person_record(1)], "edges": [edge]}), encoding="utf-8")

    result = run_canon("import", "people.json", cwd=tmp_path)

    assert result.returncode == EXIT_OK, result.stderr
    after = _stats(tmp_path)
    assert (after["nodes"], after["edges"]) == (before["nodes"] + 1, before["edges"] + 1)
    assert after["revision"] == before["revision"] + 2


@pytest.mark.slow
def test_import_with_progress_draws_a_progress_bar_on_stderr(tmp_path: Path) -> None:
    write_synthetic(tmp_path / "synthetic.jsonl", 2_000)  # about 8,000 records: two import batches

    result = run_canon("--model", str(default_model_path()), "import", "synthetic.jsonl", "--progress", cwd=tmp_path)

    assert result.returncode == EXIT_OK, result.stderr
    records = len((tmp_path / "synthetic.jsonl").read_text(encoding="utf-8").splitlines())
    drawn = [line.strip() for line in result.stderr.replace("\r", "\n").splitlines() if line.strip()]
    assert all(line.startswith("writing:") for line in drawn), drawn
    last = drawn[-1]  # the last update is always drawn: every record, its rate, no time left
    assert re.search(rf"100%.* {records}/{records} \[\d\d:\d\d<00:00, +[\d.]+ records/s\]$", last), last
    assert any(re.search(rf" \d+/{records} \[\d\d:\d\d<\d\d:\d\d", line) for line in drawn[:-1]), drawn
    assert _stats(tmp_path, "--model", str(default_model_path()))["nodes"] == 2_000


def test_import_without_a_terminal_draws_no_progress_bar(tmp_path: Path) -> None:
    (tmp_path / "people.json").write_text(json.dumps({"nodes": [_person_record(1)]}), encoding="utf-8")

    result = run_canon("--model", str(default_model_path()), "import", "people.json", cwd=tmp_path)

    assert result.returncode == EXIT_OK, result.stderr
    assert result.stderr == ""


# -- export --------------------------------------------------------------------------------------------------------
def test_export_to_stdout_prints_every_node_and_edge_as_json(tmp_path: Path) -> None:
    stats = _init(tmp_path)

    result = run_canon("export", "-", cwd=tmp_path)

    assert result.returncode == EXIT_OK, result.stderr
    document = json.loads(result.stdout)
    assert set(document) == {"nodes", "edges"}
    assert len(document["nodes"]) == stats["nodes"]
    assert len(document["edges"]) == stats["edges"]
    assert all({"id", "type", "properties"} <= set(node) for node in document["nodes"])
    assert all({"type", "source", "target"} <= set(edge) for edge in document["edges"])


@pytest.mark.slow
def test_export_then_import_into_an_empty_store_then_export_gives_identical_bytes(tmp_path: Path) -> None:
    _init(tmp_path)
    model = ("--model", str(default_model_path()))
    assert run_canon("export", "first.jsonl", cwd=tmp_path).returncode == EXIT_OK
    assert run_canon(*model, "--store", "copy.db", "import", "first.jsonl", cwd=tmp_path).returncode == EXIT_OK
    assert run_canon(*model, "--store", "copy.db", "export", "second.jsonl", cwd=tmp_path).returncode == EXIT_OK

    assert (tmp_path / "first.jsonl").read_bytes() == (tmp_path / "second.jsonl").read_bytes()


def test_export_respects_the_umask_and_refuses_a_missing_folder_or_an_unknown_extension(tmp_path: Path) -> None:
    _init(tmp_path)
    previous = os.umask(0o027)  # the child inherits it, as from a user's shell
    try:
        written = run_canon("export", "graph.yaml", cwd=tmp_path)
    finally:
        os.umask(previous)
    missing_folder = run_canon("export", "no-such-folder/graph.json", cwd=tmp_path)
    unknown_extension = run_canon("export", "graph.txt", cwd=tmp_path)

    assert written.returncode == EXIT_OK, written.stderr
    assert stat.S_IMODE((tmp_path / "graph.yaml").stat().st_mode) == 0o640
    assert missing_folder.returncode == EXIT_USAGE
    assert "no-such-folder" in missing_folder.stderr
    assert not (tmp_path / "no-such-folder").exists()
    assert unknown_extension.returncode == EXIT_USAGE
    assert "graph.txt" in unknown_extension.stderr
    assert not (tmp_path / "graph.txt").exists()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".graph")) == []  # no temporary left


@pytest.mark.parametrize("command", [("stats",), ("config",), ("export", "-")])
def test_output_piped_into_a_reader_that_stops_ends_quietly(tmp_path: Path, command: tuple[str, ...]) -> None:
    """`canon export - | head`: the reader closes the pipe; canon stops as a Unix tool stopped by SIGPIPE does."""
    _init(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CANON_")}
    child = subprocess.Popen([sys.executable, "-m", "core.app.cli", *command], cwd=tmp_path, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    assert child.stdout is not None
    child.stdout.close()  # gone before canon writes its first byte (its start-up alone takes far longer)
    _, stderr = child.communicate(timeout=60)

    assert stderr.decode() == ""
    assert child.returncode == 141  # 128 + SIGPIPE


# -- synth ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["synthetic.json", "synthetic.yaml"])
def test_synth_writes_the_format_its_extension_names_and_import_reads_it(tmp_path: Path, name: str) -> None:
    written = run_canon("synth", "--nodes", "60", name, cwd=tmp_path)
    imported = run_canon("--model", str(default_model_path()), "import", name, cwd=tmp_path)

    assert written.returncode == EXIT_OK, written.stderr
    assert imported.returncode == EXIT_OK, imported.stderr
    assert _stats(tmp_path)["nodes"] == 60


def test_synth_refuses_an_extension_it_cannot_write(tmp_path: Path) -> None:
    result = run_canon("synth", "--nodes", "10", "synthetic.txt", cwd=tmp_path)

    assert result.returncode == EXIT_USAGE
    assert "synthetic.txt" in result.stderr
    assert not (tmp_path / "synthetic.txt").exists()


def test_synth_writes_the_same_bytes_for_the_same_size(tmp_path: Path) -> None:
    first = run_canon("synth", "--nodes", "1000", "a.jsonl", cwd=tmp_path)
    second = run_canon("synth", "--nodes", "1000", "b.jsonl", cwd=tmp_path)

    assert (first.returncode, second.returncode) == (EXIT_OK, EXIT_OK)
    data = (tmp_path / "a.jsonl").read_bytes()
    assert data == (tmp_path / "b.jsonl").read_bytes()
    nodes = [json.loads(line) for line in data.splitlines() if json.loads(line)["kind"] == "node"]
    assert len(nodes) == 1000


def test_synth_with_zero_nodes_is_a_usage_error(tmp_path: Path) -> None:
    result = run_canon("synth", "--nodes", "0", "out.jsonl", cwd=tmp_path)

    assert result.returncode == EXIT_USAGE
    assert not (tmp_path / "out.jsonl").exists()


# -- store and configuration errors --------------------------------------------------------------------------------
@pytest.mark.parametrize("command", [("init",), ("stats",), ("export", "-"), ("import", "x.json")])
def test_a_store_path_that_is_a_directory_exits_3_naming_the_path(tmp_path: Path, command: tuple[str, ...]) -> None:
    (tmp_path / "a-directory").mkdir()
    (tmp_path / "x.json").write_text(json.dumps({"nodes": [_person_record(1)]}), encoding="utf-8")

    result = run_canon("--store", "a-directory", *command, cwd=tmp_path)

    assert result.returncode == EXIT_STORE
    assert "a-directory" in result.stderr


@pytest.mark.parametrize("kind", ["under-a-file", "not-a-database"])
def test_a_store_that_cannot_be_opened_exits_3_naming_the_path(tmp_path: Path, kind: str) -> None:
    if kind == "under-a-file":
        (tmp_path / "plain.txt").write_text("a file, not a directory\n", encoding="utf-8")
        store = "plain.txt/canon.db"
    else:
        (tmp_path / "junk.db").write_bytes(b"this is not an SQLite database\n" * 200)
        store = "junk.db"

    result = run_canon("--store", store, "stats", cwd=tmp_path)

    assert result.returncode == EXIT_STORE
    assert store in result.stderr


def test_a_bad_configuration_file_exits_2_and_creates_no_store(tmp_path: Path) -> None:
    (tmp_path / "bad.toml").write_text('[store]\npth = "elsewhere.db"\n', encoding="utf-8")

    result = run_canon("--config", "bad.toml", "stats", cwd=tmp_path)

    assert result.returncode == EXIT_USAGE
    assert "bad.toml" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.toml"]


def test_config_shows_each_setting_with_where_it_came_from(tmp_path: Path) -> None:
    (tmp_path / "canon.toml").write_text("[server]\nport = 9000\n", encoding="utf-8")

    result = run_canon("config", cwd=tmp_path, env={"CANON_HOST": "0.0.0.0"})

    assert result.returncode == EXIT_OK, result.stderr
    shown = json.loads(result.stdout)
    assert shown["settings"]["port"] == 9000
    assert shown["settings"]["host"] == "0.0.0.0"
    assert shown["from"]["host"] == "$CANON_HOST"
    assert "canon.toml" in shown["from"]["port"]
    assert shown["from"]["store"] == "default"


def test_config_shows_the_oauth_issuer_and_its_defaults(tmp_path: Path) -> None:
    (tmp_path / "canon.toml").write_text('[oauth]\nissuer = "https://login.example.com/realms/acme"\n'
                                         'resource = "https://canon.example.com"\n', encoding="utf-8")  # fmt: skip

    result = run_canon("config", cwd=tmp_path)

    assert result.returncode == EXIT_OK, result.stderr
    shown = json.loads(result.stdout)
    assert shown["settings"]["oauth"]["issuer"] == "https://login.example.com/realms/acme"
    assert shown["settings"]["oauth"]["roles"] == {"canon:read": "reader", "canon:write": "writer",
                                                   "canon:admin": "admin"}  # fmt: skip
    assert shown["from"]["oauth"]["issuer"] == "canon.toml [oauth] issuer"
    assert shown["from"]["oauth"]["roles"] == "default"


EVERY_KEY: dict[str, dict[str, Any]] = {
    "store": {"path": "data/canon.db"},
    "model": {"path": "model.json", "seed": False, "follow": True},
    "server": {"host": "0.0.0.0", "port": 9001, "max_body_bytes": 2048, "max_streams": 5, "stream_backlog": 7,
               "mcp_fastpath": False, "walk_workers": 3, "ui_assets": "assets",
               "allowed_hosts": ["canon.example.test"], "allowed_origins": ["https://app.example.test"],
               "public_url": "https://canon.example.test/kb", "root_path": "/kb", "trusted_proxies": ["10.0.0.0/8"]},
    "metrics": {"enabled": False, "protected": True},
    "tracing": {"enabled": True},
    "logging": {"format": "json", "access_log": True},
    "auth": {"tokens": "tokens.json", "anonymous": False},
    "local": {"name": "agent", "role": "reader", "groups": ["ops"]},
    "proposals": {"reviewer_roles": ["writer"], "reviewer_groups": ["architects"], "review_types": ["Team"],
                  "direct_roles": ["admin", "writer"], "direct_groups": ["stewards"]},
    "oauth": {"issuer": "https://login.example.test/acme", "resource": "https://canon.example.test/kb/mcp",
              "jwks_url": "https://login.example.test/jwks", "audience": "canon", "algorithms": ["ES256"],
              "leeway_s": 5, "name_claim": "email", "roles_claim": "roles", "groups_claim": "teams",
              "roles": {"canon:read": "reader"}, "jwks_cache_s": 60, "jwks_min_refresh_s": 10, "fetch_timeout_s": 3,
              "name_prefix": "idp.", "client_id": "canon-web", "client_secret_file": "client-secret",
              "redirect_path": "/signin/back", "scopes": ["openid", "canon:read"], "session_max_age_s": 600},
    "retention": {"audit_days": 90, "changes_keep_revisions": 1000, "changes_days": 30},
}  # fmt: skip
"""A canon.toml setting every key of the configuration schema (but `[store] url`, the other form of `path`, and
`[oauth] client_secret`, the other form of `client_secret_file`)."""


def _toml(sections: dict[str, dict[str, Any]]) -> str:
    def value(v: Any) -> str:
        if isinstance(v, dict):
            return "{" + ", ".join(f"{json.dumps(k)} = {value(x)}" for k, x in v.items()) + "}"
        return json.dumps(v)  # a JSON string, number, boolean or list of them is TOML too

    return "".join(f"[{name}]\n" + "".join(f"{k} = {value(v)}\n" for k, v in keys.items())
                   for name, keys in sections.items())  # fmt: skip


@pytest.mark.parametrize("store", [{"path": "data/canon.db"}, {"url": "postgresql://canon@db.example.test/canon"}])
def test_config_shows_every_setting_of_the_schema_with_its_value_and_origin(
    tmp_path: Path, store: dict[str, str]
) -> None:
    schema = json.loads((Path(__file__).parent.parent / "schema/config/config.schema.json").read_text("utf-8"))
    schema_keys = {(name, key) for name, section in schema["properties"].items() for key in section["properties"]}
    other_forms = {("store", "url"), ("oauth", "client_secret")}
    assert {(name, key) for name, keys in EVERY_KEY.items() for key in keys} | other_forms == schema_keys
    written = {**EVERY_KEY, "store": store}
    (tmp_path / "canon.toml").write_text(_toml(written), encoding="utf-8")
    (tmp_path / "client-secret").write_text("the-client-secret\n", encoding="utf-8")

    result = run_canon("config", cwd=tmp_path, env={"CANON_CACHE": "cache"})

    assert result.returncode == EXIT_OK, result.stderr
    shown = json.loads(result.stdout)
    settings, origins = shown["settings"], shown["from"]
    assert set(settings) == set(origins) == {f.name for f in fields(Config)} - {"source", "origins"}
    attrs = {(section, key): attr for section, key, attr in CONFIG_KEYS}
    for section, keys in written.items():
        for key, value in keys.items():
            if section == "oauth":
                got, origin = settings["oauth"][key], origins["oauth"][key]
            else:
                got, origin = settings[attrs[section, key]], origins[attrs[section, key]]
            assert (got, origin) == (value, f"canon.toml [{section}] {key}"), (section, key)
    assert (settings["cache"], origins["cache"]) == ("cache", "$CANON_CACHE")
    assert settings["oauth"]["client_secret"] == "***"  # read from the file, never printed
    assert origins["oauth"]["client_secret"] == "canon.toml [oauth] client_secret_file"
    assert "the-client-secret" not in result.stdout


def test_config_shows_a_store_url_without_its_password(tmp_path: Path) -> None:
    (tmp_path / "canon.toml").write_text('[store]\nurl = "postgresql://canon:s3cret-pw@db.example.test/canon"\n',
                                         encoding="utf-8")  # fmt: skip

    result = run_canon("config", cwd=tmp_path)

    assert result.returncode == EXIT_OK, result.stderr
    assert json.loads(result.stdout)["settings"]["store"] == "postgresql://canon:***@db.example.test/canon"
    assert "s3cret-pw" not in result.stdout
